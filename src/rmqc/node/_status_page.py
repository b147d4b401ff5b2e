"""The status page's builder: the document of `/status.json` (rmqc.metrics' status page says what
it carries and answers the page's paths) made in the node's event loop, with the other members'
status asked over their controller port, at once with PEER_TIMEOUT_MS each (rmqc.client's
node_views, as `rmqc status` asks).

Who builds it, and when: the node's event loop, and only while someone watches (a request within
WATCH_S), so an unwatched page costs nothing. The rows are built GROUPS_PER_SLICE at a time with a
checkpoint between slices, so 10,000 groups never hold the loop for one long stretch; the finished
document is serialised once and replaced whole. The HTTP threads of the metrics port only read that
one reference (as they read the health snapshot): nothing of the replica is touched outside the
loop's thread. `previousBuild` in the document says what the last build cost the loop.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

from rmqc.client import ClientError, ControllerClient, join_credentials, node_views
from rmqc.metrics import (
    BuildCost,
    failover_document,
    group_rows_chunk,
    member_view,
    no_answer_view,
    page_document,
)
from rmqc.remoting import RemotingCommand
from rmqc.replica import status_document

from ._ratelog import RateLimitedLog
from ._tls import peer_client_context

__all__ = ["GROUPS_PER_SLICE", "StatusPage"]

log = logging.getLogger("rmqc.node.status_page")

REFRESH_S = 1.0
# While nobody watches, the loop only looks this often whether someone started to.
IDLE_CHECK_S = 0.25
# A browser tab polls every second; a page closed this long ago is no longer built.
WATCH_S = 10.0
# Rows built between two checkpoints: measured ~1 ms of loop time per 500 groups of 3 brokers.
GROUPS_PER_SLICE = 500
ERROR_LOG_EVERY_S = 60.0  # a page that fails to build says so once a minute, not every second
# A member that does not answer within this shows as not answering (the page refreshes every second).
PEER_TIMEOUT_MS = 1000


class StatusPage:
    """Owned by the metrics port's task; `run` in a nursery, `document()` from the HTTP threads."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self._document: bytes | None = None  # replaced whole by the loop
        self._asked_s = -math.inf  # time.monotonic() of the last request (any thread writes it)
        self.last_cost: BuildCost | None = None  # what the last build held the loop (the page shows it)
        self.failure: str | None = None  # why the last build failed
        self._errors = RateLimitedLog(log, ERROR_LOG_EVERY_S)

    def document(self) -> bytes | None:
        """Any thread: the latest document (None until the first is built); marks the page watched."""
        self._asked_s = time.monotonic()
        return self._document

    def watched(self) -> bool:
        return time.monotonic() - self._asked_s < WATCH_S

    async def run(self) -> None:
        config = self._node.config
        # Signed like a joining node when RMQC_ACCESS_KEY/RMQC_SECRET_KEY are set (an ACL'd group
        # refuses the others' status otherwise, and the page says so); TLS as to the peers.
        async with ControllerClient([config.listen_address], timeout_ms=PEER_TIMEOUT_MS, max_retries=0,
                                    credentials=join_credentials(os.environ),
                                    ssl_context=peer_client_context(config)) as client:
            while True:
                if self.watched() and self._node.replica is not None:
                    started_s = time.monotonic()
                    await self._refresh(client)
                    await trio.sleep(max(0.0, REFRESH_S - (time.monotonic() - started_s)))
                else:
                    await trio.sleep(IDLE_CHECK_S)

    async def _refresh(self, client: ControllerClient) -> None:
        # A diagnostic page must never take the controller down with it: a failure to build it is
        # logged and answered to the page (500), and the next second tries again.
        try:
            self._document, self.failure = await self.build(client), None
        except Exception as error:  # whatever it is, the node keeps serving
            self._document, self.failure = None, f"{type(error).__name__}: {error}"
            self._errors.log(logging.ERROR, "%s: building the status page failed: %s", self._node.config.node_id,
                             self.failure)

    async def build(self, client: ControllerClient) -> bytes:
        """The document as of now, built in the loop in slices (see the module's docstring)."""
        replica = self._node.replica
        others = [address for member, address in replica.conf_state.addresses if member != replica.config.node_id]
        others_views = await node_views(client, others, _member_view)
        meter = _LoopMeter()
        with meter.hold():
            own = {"address": self._node.config.listen_address, "status": status_document(replica)}
            groups = list(replica.state.groups())  # the page sorts them
            failovers = [failover_document(failover) for failover in replica.failovers.recent()]
        # Each slice's rows are serialised at once and freed (group_rows_chunk says why).
        chunks: list[bytes] = []
        for start in range(0, len(groups), GROUPS_PER_SLICE):
            if start:
                await trio.lowlevel.checkpoint()
            with meter.hold():  # the table and the clock are read afresh after each checkpoint
                chunks.append(group_rows_chunk(groups[start:start + GROUPS_PER_SLICE], replica.liveness.table,
                                               replica.now_ms()))
        with meter.hold():
            body = page_document(node_id=replica.config.node_id, generated_ms=replica.clock.wall_ms(),
                                 nodes=[own, *others_views], group_chunks=chunks, failovers=failovers,
                                 previous_build=self.last_cost)
        self.last_cost = meter.cost()
        return body


async def _member_view(address: str, answer: RemotingCommand | ClientError) -> dict[str, Any]:
    return no_answer_view(address, answer) if isinstance(answer, ClientError) else member_view(address, answer)


class _LoopMeter:
    """Adds up the stretches the build holds the loop: wall time and the thread's CPU time."""

    def __init__(self) -> None:
        self._wall_s: list[float] = []
        self._cpu_s: list[float] = []

    @contextmanager
    def hold(self) -> Iterator[None]:
        wall_s, cpu_s = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._wall_s.append(time.perf_counter() - wall_s)
            self._cpu_s.append(time.thread_time() - cpu_s)

    def cost(self) -> BuildCost:
        return BuildCost(sum(self._wall_s) * 1000, max(self._wall_s, default=0.0) * 1000, sum(self._cpu_s) * 1000,
                         max(self._cpu_s, default=0.0) * 1000, len(self._wall_s))
