"""A replica on a fake clock and in-memory storage, its outbox a list (what the simulator does)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from rmqc.node import NodeConfig, parse_peers
from rmqc.raft import MemoryStorage
from rmqc.replica import Answer, Replica

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
