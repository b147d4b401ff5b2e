"""Quiet ticks (issue 21, "no timer wake-ups while idle"): a follower's ticks that only count
(RaftCore.quiet_ticks) are counted whenever the replica next runs, so an idle follower's timer
sleeps until its election timeout, and the core sees the same ticks as with a wake-up per tick."""

from __future__ import annotations

import dataclasses
import random

from replica_harness import START_MS, FakeClock, config

from rmqc.raft import MemoryStorage
from rmqc.replica import Replica, SendRaft

PEERS = "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"
IDLE_MS = 5_000


def lone_follower(clock: FakeClock) -> Replica:
    """n0 of a 3-node group whose peers never answer: it times out and campaigns, again and again."""
    node_config = dataclasses.replace(config(PEERS), node_id="n0")
    return Replica(node_config, MemoryStorage(), clock, random.Random(7), [])


def campaigns(replica: Replica) -> list[tuple[str, int, str]]:
    """The vote requests it sent: (type, term, to)."""
    outbox = replica.outbox
    assert isinstance(outbox, list)
    return [(message.type.name, message.term, message.to) for action in outbox if isinstance(action, SendRaft)
            for message in action.messages]


def core_view(replica: Replica) -> tuple[int, ...]:
    raft = replica.raw.raft
    return (raft.ticks, raft.term, raft.lease_age, raft.election_elapsed, raft.leader_contact_elapsed,
            raft.randomized_election_timeout)


def settle(replica: Replica) -> None:
    while replica.drive_due:
        replica.drive()


def test_an_idle_followers_next_wakeup_is_its_election_timeout_not_the_next_tick() -> None:
    clock = FakeClock()
    replica = lone_follower(clock)
    settle(replica)
    raft, tick_ms = replica.raw.raft, replica.config.tick_ms
    assert raft.quiet_ticks() == raft.randomized_election_timeout - 1 > 0
    # the tick that reaches the election timeout (unless a liveness deadline comes first)
    assert replica.next_wakeup_ms() == min(START_MS + raft.randomized_election_timeout * tick_ms,
                                           replica.liveness.next_due_ms(clock.now_ms))
    assert replica.next_wakeup_ms() > START_MS + tick_ms


def test_ticks_counted_lazily_are_the_ticks_a_wakeup_per_tick_gives() -> None:
    """Two copies of one replica: one woken only at next_wakeup_ms() (and driven, as by a peer
    message, at odd instants between), the other woken every tick as before. At every instant the
    core has the same tick count, term, lease age and election counters: the same elections."""
    lazy_clock, eager_clock = FakeClock(), FakeClock()
    lazy, eager = lone_follower(lazy_clock), lone_follower(eager_clock)
    tick_ms = lazy.config.tick_ms
    timer_wakeups = 0
    for now_ms in range(START_MS, START_MS + IDLE_MS):
        lazy_clock.now_ms = eager_clock.now_ms = now_ms
        if now_ms >= lazy.next_wakeup_ms():
            timer_wakeups += 1
            lazy.advance_time()
        if now_ms % 37 == 0:  # a message arrives: the driver runs before it is stepped
            lazy.wake_driver()
        settle(lazy)
        if now_ms % tick_ms == 0:
            eager.advance_time()
        settle(eager)
        if now_ms % 37 == 0:
            assert core_view(lazy) == core_view(eager), now_ms
    assert core_view(lazy) == core_view(eager)
    assert campaigns(lazy) == campaigns(eager)
    assert len(campaigns(lazy)) >= 4  # it did campaign, more than once
    assert timer_wakeups < IDLE_MS // tick_ms // 5


def test_a_stall_past_the_election_timeout_feeds_one_tick_as_before() -> None:
    clock = FakeClock()
    replica = lone_follower(clock)
    settle(replica)
    raft = replica.raw.raft
    due_ms = replica.next_wakeup_ms()
    clock.now_ms = due_ms + 20 * replica.config.tick_ms  # later than MAX_TICK_BURST ticks
    replica.advance_time()
    settle(replica)
    assert (raft.ticks, raft.term, raft.election_elapsed) == (1, 1, 1)  # no campaign after the pause
    assert replica.liveness.stalls.stalls == 1
