"""The simulated network between Raft nodes: per directed link it delays, drops, duplicates and
(through random delays) reorders messages, and it can cut links in one or both directions.

Pure and seeded: every decision comes from the `random.Random` handed in."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable
from dataclasses import dataclass

from rmqc.config import NodeConfig

# rmqc serve's bound on the Raft messages queued for one peer (`peer_outbox_messages`, its default).
PEER_OUTBOX_MESSAGES: int = next(f.default for f in dataclasses.fields(NodeConfig)  # type: ignore[assignment]
                                 if f.name == "peer_outbox_messages")
# A real transport has a bounded send queue per peer; beyond this many messages in flight on one
# link the simulated one drops, as the real one would (Raft tolerates loss).
LINK_IN_FLIGHT_MAX = PEER_OUTBOX_MESSAGES


@dataclass(frozen=True, slots=True)
class LinkFaults:
    """How one run's network misbehaves; the same for every link unless a link is cut."""

    drop_p: float = 0.02
    duplicate_p: float = 0.02
    delay_min_us: int = 500
    delay_max_us: int = 5_000
    spike_p: float = 0.01  # a message is held back much longer (a stalled TCP stream)
    spike_max_us: int = 150_000


class SimNetwork:
    def __init__(self, rng: random.Random, faults: LinkFaults) -> None:
        self.rng = rng
        self.faults = faults
        self.cut: set[tuple[str, str]] = set()  # directed (frm, to) pairs that deliver nothing
        self.in_flight: dict[tuple[str, str], int] = {}
        self.sent = 0
        self.dropped = 0

    def delays_us(self, frm: str, to: str) -> list[int]:
        """Delivery delays for one message on frm->to: none if lost, two if duplicated."""
        self.sent += 1
        link = (frm, to)
        if link in self.cut or self.in_flight.get(link, 0) >= LINK_IN_FLIGHT_MAX:
            self.dropped += 1
            return []
        if self.rng.random() < self.faults.drop_p:
            self.dropped += 1
            return []
        copies = 2 if self.rng.random() < self.faults.duplicate_p else 1
        delays = [self._one_delay_us() for _ in range(copies)]
        self.in_flight[link] = self.in_flight.get(link, 0) + copies
        return delays

    def _one_delay_us(self) -> int:
        if self.rng.random() < self.faults.spike_p:
            return self.rng.randint(self.faults.delay_max_us, self.faults.spike_max_us)
        return self.rng.randint(self.faults.delay_min_us, self.faults.delay_max_us)

    def arrived(self, frm: str, to: str) -> bool:
        """Account for a message reaching `to`; False if the link was cut while it travelled."""
        link = (frm, to)
        self.in_flight[link] -= 1
        return link not in self.cut

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Cut every link between different groups, both ways (a symmetric partition)."""
        members = [sorted(group) for group in groups]
        for i, left in enumerate(members):
            for right in members[i + 1 :]:
                for a in left:
                    for b in right:
                        self.cut.add((a, b))
                        self.cut.add((b, a))

    def cut_one_way(self, frm: str, to: str) -> None:
        """An asymmetric fault: frm's messages no longer reach to, the reverse still works."""
        self.cut.add((frm, to))

    def isolate(self, node: str, everyone: Iterable[str]) -> None:
        others = [n for n in everyone if n != node]
        self.partition([[node], others])

    def heal(self) -> None:
        self.cut.clear()

    def describe_cuts(self) -> str:
        return ",".join(f"{a}->{b}" for a, b in sorted(self.cut)) or "none"
