"""A replica on a fake clock and in-memory storage, its outbox a list (what the simulator does)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from rmqc.config import NodeConfig, parse_peers
from rmqc.raft import MemoryStorage
from rmqc.replica import Answer, ForwardRequest, Replica, SendDigest, SendRaft

START_MS = 1_000_000
WALL_AT_START_MS = 1_700_000_000_000


@dataclass
class FakeClock:
    now_ms: int = START_MS

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_ms(self) -> int:
        return WALL_AT_START_MS + self.now_ms - START_MS


@dataclass
class Harness:
    replica: Replica
    clock: FakeClock
    outbox: list[Any] = field(default_factory=list)

    def settle(self) -> None:
        """Drive until nothing is due (what the shell's driver task does)."""
        while self.replica.drive_due:
            self.replica.drive()

    def advance(self, ms: int) -> None:
        """Let `ms` pass, waking at every `next_wakeup_ms()` on the way (the shell's timer)."""
        until = self.clock.now_ms + ms
        while True:
            self.clock.now_ms = min(until, max(self.clock.now_ms, self.replica.next_wakeup_ms()))
            self.replica.advance_time()
            self.settle()
            if self.clock.now_ms >= until:
                return

    def take(self, kind: type) -> list[Any]:
        """The actions of `kind` in the outbox, removed from it."""
        taken = [action for action in self.outbox if isinstance(action, kind)]
        self.outbox[:] = [action for action in self.outbox if not isinstance(action, kind)]
        return taken

    def answers(self) -> dict[Any, Any]:
        return {answer.token: answer.response for answer in self.take(Answer)}


def config(peers: str = "n0-127.0.0.1:9878", **options: Any) -> NodeConfig:
    return NodeConfig(peers=parse_peers(peers), data_dir="/nonexistent/replica-test", **options)


def harness(peers: str = "n0-127.0.0.1:9878", *, storage: Any = None, seed: int = 1, **options: Any) -> Harness:
    clock, outbox = FakeClock(), []
    replica = Replica(config(peers, **options), storage or MemoryStorage(), clock, random.Random(seed), outbox)
    return Harness(replica, clock, outbox)


def leader(**options: Any) -> Harness:
    """A single-node replica that serves as leader."""
    h = harness(**options)
    h.advance(100)
    assert h.replica.serving_as_leader
    return h


class Cluster:
    """Replicas on one fake clock, their actions delivered at once unless the link is cut: Raft
    messages, forwards (and their answers), digests. Answers to clients stay in `answered`."""

    def __init__(self, size: int = 3, **options: Any) -> None:
        peers = ";".join(f"n{i}-127.0.0.1:{i + 1}" for i in range(size))
        self.clock = FakeClock()
        self.outboxes: dict[str, list[Any]] = {}
        self.replicas: dict[str, Replica] = {}
        for i in range(size):
            node_id, outbox = f"n{i}", []
            node_config = dataclasses.replace(config(peers, **options), node_id=node_id)
            self.outboxes[node_id] = outbox
            self.replicas[node_id] = Replica(node_config, MemoryStorage(), self.clock, random.Random(i), outbox)
        self.cut: set[tuple[str, str]] = set()  # (from, to) links that drop everything
        self.answered: dict[Any, Any] = {}

    def isolate(self, node_id: str) -> None:
        self.cut |= {(node_id, other) for other in self.replicas} | {(other, node_id) for other in self.replicas}

    def leader(self) -> str | None:
        serving = [node_id for node_id, replica in self.replicas.items() if replica.serving_as_leader]
        return serving[0] if len(serving) == 1 else None

    def run(self, ms: int) -> None:
        until = self.clock.now_ms + ms
        while self.clock.now_ms < until:
            soonest = min(replica.next_wakeup_ms() for replica in self.replicas.values())
            self.clock.now_ms = min(until, max(self.clock.now_ms + 1, soonest))
            for replica in self.replicas.values():
                replica.advance_time()
            self.settle()

    def settle(self) -> None:
        busy = True
        while busy:
            busy = False
            for node_id, replica in self.replicas.items():
                while replica.drive_due:
                    replica.drive()
                busy |= self._deliver(node_id)

    def _deliver(self, sender: str) -> bool:
        outbox = self.outboxes[sender]
        actions, outbox[:] = list(outbox), []
        for action in actions:
            if isinstance(action, SendRaft):
                for message in action.messages:
                    if (sender, message.to) not in self.cut:
                        self.replicas[message.to].raft_messages(sender, [message])
            elif isinstance(action, ForwardRequest):
                if (sender, action.leader) not in self.cut:
                    self.replicas[action.leader].forwarded_request(sender, action.request, (sender, action.tag))
            elif isinstance(action, SendDigest):
                if (sender, action.leader) not in self.cut:
                    self.replicas[action.leader].digest(sender, action.payload)
            elif isinstance(action, Answer) and isinstance(action.token, tuple):  # a forward's answer
                follower, tag = action.token
                if (sender, follower) not in self.cut and action.response is not None:
                    self.replicas[follower].forwarded_response(tag, action.response)
            elif isinstance(action, Answer):
                self.answered[action.token] = action.response
        return bool(actions)
