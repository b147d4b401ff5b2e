"""A steady writer for operation tests and benchmarks: clients registering brokers (1013 of fresh
ids) through a ControllerClient as fast as they are answered, recording when each write was
acknowledged, so a test can measure how long writes paused (during a leadership transfer, a
rolling restart) and check that no acknowledged write was lost.

Each client fills its own broker group `<prefix>-<client>` with ids 1, 2, 3... up to the controller's
bound on replicas per group, then the next one (`<prefix>-<client>.1`, ...); a write that was not
acknowledged (refused, timed out, connection lost) is repeated with the same id and check code,
which is idempotent, until it is.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.fsm import MAX_REPLICAS_PER_GROUP

from .cluster import wait_until

CLUSTER = "WriterCluster"
# One attempt's bound: a write that waits longer is repeated (idempotently) instead of waited for.
ATTEMPT_TIMEOUT_MS = 1000
RETRY_PAUSE_S = 0.002  # after a refusal: the leader is changing, ask again almost at once
MAX_ACKS = 1_000_000  # a writer stops recording beyond this (bounded memory on long runs)
# How often wait_acks looks (pauses are measured from ack_times, not from when it looked)
ACK_POLL_S = 0.01


@dataclass
class WriteLoad:
    controllers: Sequence[str]
    clients: int = 4
    prefix: str = "w"
    acked: dict[str, int] = field(default_factory=dict)  # group -> ids acknowledged (1..n)
    ack_times: list[float] = field(default_factory=list)  # time.perf_counter() of every ack
    refusals: int = 0
    # (perf_counter time, what) of every write not acknowledged: an answer other than 0 (its code
    # and remark) or a client error (the client retries 2007 and lost connections itself)
    failures: list[tuple[float, str]] = field(default_factory=list)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write until cancelled; `started` once every client's first write was acknowledged."""
        firsts = [trio.Event() for _ in range(self.clients)]
        async with trio.open_nursery() as nursery:
            for index, first in enumerate(firsts):
                nursery.start_soon(self._client, f"{self.prefix}-{index}", first)
            for first in firsts:
                await first.wait()
            task_status.started()

    async def _client(self, name: str, first: trio.Event) -> None:
        async with ControllerClient(self.controllers, timeout_ms=ATTEMPT_TIMEOUT_MS, max_retries=5,
                                    backoff_ms=5, max_backoff_ms=20) as client:
            for generation in itertools.count():
                if len(self.ack_times) >= MAX_ACKS:
                    return
                await self._fill(client, name if generation == 0 else f"{name}.{generation}", first)

    async def _fill(self, client: ControllerClient, group: str, first: trio.Event) -> None:
        """Register ids 1.. in `group` until it holds as many as the controller allows in one group
        (beyond, every write would be refused: a long run moves on to a fresh group)."""
        self.acked[group] = 0
        while self.acked[group] < MAX_REPLICAS_PER_GROUP and len(self.ack_times) < MAX_ACKS:
            broker_id = self.acked[group] + 1
            try:
                address = f"10.0.0.{broker_id % 250}:10911;{1_700_000_000_000 + broker_id}"
                answer = await client.apply_broker_id(CLUSTER, group, broker_id, address)
                ok = answer.code == 0
                failure = None if ok else f"answered {answer.code}: {answer.remark}"
            except ClientError as error:
                ok = False
                failure = f"{type(error).__name__}: {error}"
            if failure is not None and len(self.failures) < MAX_ACKS:
                self.failures.append((time.perf_counter(), failure))
            if ok:
                self.acked[group] = broker_id
                self.ack_times.append(time.perf_counter())
                first.set()
            else:
                self.refusals += 1
                await trio.sleep(RETRY_PAUSE_S)

    async def wait_acks(self, count: int, *, after: float = 0.0, timeout_s: float) -> None:
        """Wait until `count` writes were acknowledged after `after` (a time.perf_counter() time;
        0: since the load began); AssertionError after `timeout_s`."""
        async def enough() -> bool:
            return len(self.ack_times) - bisect.bisect_right(self.ack_times, after) >= count

        await wait_until(enough, timeout_s, f"{count} writes acknowledged", interval_s=ACK_POLL_S)

    def failures_between(self, start: float, end: float) -> list[str]:
        return [what for when, what in self.failures if start <= when <= end]

    def pause_s(self, start: float, end: float) -> float:
        """The longest stretch without an acknowledged write from `start` to the first
        acknowledgement after `end` (perf_counter times: e.g. a transfer's request and answer)."""
        inside = [t for t in self.ack_times if start < t <= end]
        after = next((t for t in self.ack_times if t > end), end)
        points = [start, *inside, after]
        return max(b - a for a, b in itertools.pairwise(points)) if len(points) > 1 else 0.0

    async def lost_writes(self, client: ControllerClient) -> dict[str, tuple[int, int]]:
        """Groups whose acknowledged ids the controller does not have: {group: (acked, next id)}."""
        lost = {}
        # a copy: a cancelled writer runs on to its next checkpoint, and may open a new group while
        # these questions wait for their answers (CI: "dictionary changed size during iteration")
        for group, acked in list(self.acked.items()):
            answer = await client.get_next_broker_id(CLUSTER, group)
            next_id = int(answer.ext("nextBrokerId") or 0)
            if next_id <= acked:  # the last unacknowledged attempt may have committed: next_id may be acked + 2
                lost[group] = (acked, next_id)
        return lost
