"""rmqc.replica._deadlines: next_wakeup_ms and advance_time read one list of deadline sources, and
every part of the replica that keeps deadlines is on it (or is one the driver's passes expire)."""

from __future__ import annotations

from dataclasses import dataclass, field

from replica_harness import harness

from rmqc.replica._deadlines import Deadlines

# Parts whose waits the driver expires on its passes (while any waits, the replica ticks) and the
# heartbeat table, whose round is judged before a stall is forgiven (the module docstring says why).
NOT_REGISTERED = {"proposals", "reads", "liveness"}


@dataclass
class Source:
    deadline_ms: int | None
    expired: list[int] = field(default_factory=list)

    def next_deadline_ms(self) -> int | None:
        return self.deadline_ms

    def expire(self, now_ms: int) -> None:
        self.expired.append(now_ms)


def test_the_soonest_deadline_of_any_source_and_every_source_asked_to_expire() -> None:
    deadlines = Deadlines()
    assert deadlines.next_ms() is None
    sources = [Source(None), Source(30), Source(20)]
    for source in sources:
        deadlines.register(source)
    assert deadlines.next_ms() == 20
    deadlines.expire(25)
    assert [source.expired for source in sources] == [[25], [25], [25]]


def test_every_part_of_the_replica_with_deadlines_is_registered() -> None:
    replica = harness().replica
    registered = {id(source) for source in replica.deadlines._sources}
    parts = {name: part for name, part in vars(replica).items()
             if callable(getattr(part, "next_deadline_ms", None)) and callable(getattr(part, "expire", None))}
    assert {"forwards", "leader_waits", "operations", "membership"} <= set(parts)
    forgotten = [name for name, part in parts.items() if id(part) not in registered]
    assert sorted(set(forgotten) - NOT_REGISTERED) == []


def test_a_registered_deadline_wakes_the_replica() -> None:
    h = harness()
    h.advance(100)
    source = Source(h.replica.next_wakeup_ms() - 1)
    h.replica.deadlines.register(source)
    assert h.replica.next_wakeup_ms() == source.deadline_ms
    h.clock.now_ms = source.deadline_ms
    h.replica.advance_time()
    assert source.expired == [source.deadline_ms]
