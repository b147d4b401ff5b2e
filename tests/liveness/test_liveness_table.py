"""HeartbeatTable: update rule (spec 6.1), deadline expiry, channel close, digests."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given, strategies as st

from rmqc.liveness import (
    BrokerKey,
    Digest,
    DigestDecodeError,
    Heartbeat,
    HeartbeatTable,
    LivenessTableFull,
    MassExpiry,
    StallMeter,
)

K1, K2, K3 = (BrokerKey("C", "b", i) for i in (1, 2, 3))


def hb(key: BrokerKey, timeout_ms: int = 1000, epoch: int = -1, offset: int = -1, priority: int = 5) -> Heartbeat:
    return Heartbeat(key, f"h{key.broker_id}:1", timeout_ms, epoch, offset, offset, priority)


def test_alive_until_the_deadline_inclusive() -> None:
    table = HeartbeatTable()
    table.update(hb(K1, 1000), now_ms=0)
    assert table.is_alive(K1, 1000) and not table.is_alive(K1, 1001)
    assert table.expire(1000) == [] and table.expire(1001) == [K1]
    assert table.live_info(K1) is None and not table.is_alive(K1, 0)


def test_negative_timeout_means_dead_at_once() -> None:
    table = HeartbeatTable()
    table.update(hb(K1, 60_000), now_ms=0)
    table.update(hb(K1, -10_000), now_ms=5)
    assert not table.is_alive(K1, 5)
    assert table.expire(6) == [K1]


def test_epoch_and_offset_never_move_backwards_but_time_timeout_and_priority_do_change() -> None:
    table = HeartbeatTable()
    table.update(hb(K1, 1000, epoch=2, offset=200, priority=5), now_ms=0)
    table.update(hb(K1, 3000, epoch=2, offset=50, priority=1), now_ms=10)
    table.update(hb(K1, 3000, epoch=1, offset=999, priority=1), now_ms=20)
    info = table.live_info(K1)
    assert (info.epoch, info.max_offset, info.last_update_ms, info.timeout_ms, info.election_priority) == (
        2, 200, 20, 3000, 1)
    table.update(hb(K1, 3000, epoch=2, offset=300), now_ms=30)
    table.update(hb(K1, 3000, epoch=3, offset=0), now_ms=40)
    assert (table.live_info(K1).epoch, table.live_info(K1).max_offset) == (3, 0)


def test_refreshed_brokers_survive_their_old_deadline() -> None:
    table = HeartbeatTable()
    table.update(hb(K1, 100), now_ms=0)
    table.update(hb(K2, 100), now_ms=0)
    table.update(hb(K1, 100), now_ms=50)  # K1's deadline moves from 100 to 150
    assert table.expire(101) == [K2]
    assert table.is_alive(K1, 101) and table.expire(150) == [] and table.expire(151) == [K1]


def test_expiry_work_is_proportional_to_what_expires() -> None:
    table = HeartbeatTable()
    for i in range(1000):
        table.update(hb(BrokerKey("C", f"b{i}", 1), 10_000), now_ms=0)
    for second in range(1, 10):  # heartbeats every second do not grow the heap
        for i in range(1000):
            table.update(hb(BrokerKey("C", f"b{i}", 1), 10_000), now_ms=second * 1000)
    assert table.scheduled_deadlines == 1000
    assert table.next_deadline_ms() == 10_000
    assert table.expire(10_001) == [] and table.next_deadline_ms() == 19_000


def test_channel_close_makes_its_brokers_inactive() -> None:
    table = HeartbeatTable()
    table.update(hb(K1, 60_000), 0, channel_id="c1")
    table.update(hb(K2, 60_000), 0, channel_id="c1")
    table.update(hb(K3, 60_000), 0, channel_id="c2")
    assert table.on_channel_closed("c1", 0) == [K1, K2]
    assert table.on_channel_closed("c1", 0) == []
    assert not table.is_alive(K1, 1) and table.is_alive(K3, 1)


def test_a_reconnected_broker_is_not_killed_by_its_old_connection_closing() -> None:
    table = HeartbeatTable()
    table.update(hb(K1, 60_000), 0, channel_id="old")
    table.update(hb(K1, 60_000), 5, channel_id="new")
    assert table.on_channel_closed("old", 0) == []
    assert table.is_alive(K1, 6) and table.on_channel_closed("new", 0) == [K1]


def test_bound_on_brokers() -> None:
    table = HeartbeatTable(max_brokers=2)
    table.update(hb(K1), 0)
    table.update(hb(K2), 0)
    table.update(hb(K1), 1)  # known brokers are always accepted
    with pytest.raises(LivenessTableFull):
        table.update(hb(K3), 1)


def test_digest_coalesces_latest_values_and_reports_closes() -> None:
    follower = HeartbeatTable()
    follower.update(hb(K1, 1000, epoch=1, offset=10), 0, channel_id="x")
    follower.update(hb(K1, 2000, epoch=1, offset=20), 5, channel_id="x")
    follower.update(hb(K2, 1000), 5, channel_id="y")
    follower.on_channel_closed("y", 0)
    digest = follower.take_digest(now_ms=7)
    assert [(h.key, h.timeout_ms, h.max_offset) for h in digest.heartbeats] == [(K1, 2000, 20)]
    assert digest.closed == (K2,)
    assert not follower.take_digest(now_ms=8)  # nothing new since

    leader = HeartbeatTable()
    leader.update(hb(K2, 1000), 0)  # known only through digests: no channel here
    decoded = Digest.from_bytes(digest.to_bytes())
    assert decoded == digest
    assert leader.merge_digest(decoded, now_ms=100) == [K2]
    # heard 2 ms before the digest was taken (age 2): the leader dates it 100 - 2, whatever the
    # forwarding delay, so the relay never extends (or shortens) the broker's deadline
    assert leader.is_alive(K1, 2098) and not leader.is_alive(K1, 2099)
    assert not leader.take_digest(now_ms=101)  # the leader does not echo merged values


def test_relayed_registrations_travel_in_the_digest_and_older_peers_send_none() -> None:
    digest = Digest(registrations=(["C", "10.0.0.1:10911", 120_000, 3], ["C", "10.0.0.2:10911", 0, 0]))
    assert digest and Digest.from_bytes(digest.to_bytes()) == digest
    assert b"registrations" not in Digest.of((hb(K1, 1000),)).to_bytes()  # an older leader reads it as before
    assert Digest.from_bytes(b'{"heartbeats":[],"closed":[]}').registrations == ()


def test_a_follower_close_does_not_kill_a_broker_connected_to_the_leader() -> None:
    leader = HeartbeatTable()
    leader.update(hb(K1, 60_000), 0, channel_id="direct")
    assert leader.merge_digest(Digest.of((), (K1,)), now_ms=1) == []
    assert leader.is_alive(K1, 1)


def test_merged_digest_never_moves_values_backwards() -> None:
    leader = HeartbeatTable()
    leader.update(hb(K1, 1000, epoch=3, offset=300), 0)
    leader.merge_digest(Digest.of((hb(K1, 1000, epoch=2, offset=900),)), 10)
    assert (leader.live_info(K1).epoch, leader.live_info(K1).max_offset) == (3, 300)
    leader.update(hb(K1, 1000, epoch=3, offset=300), 50)  # direct, at 50
    leader.merge_digest(Digest.of((hb(K1, 1000, epoch=3, offset=300),), heard_ms_ago=30), 60)  # heard at 30
    assert leader.live_info(K1).last_update_ms == 50  # an older relayed heartbeat does not move time back


def test_a_digest_from_a_peer_without_ages_counts_as_heard_on_arrival() -> None:
    row = ["C", "b", 1, "10.0.0.1:10911", 1000, 1, 5, 5, 0]  # nine fields: an older peer's digest
    digest = Digest.from_bytes(orjson.dumps({"heartbeats": [row], "closed": []}))
    leader = HeartbeatTable()
    leader.merge_digest(digest, now_ms=40)
    assert leader.live_info(BrokerKey("C", "b", 1)).last_update_ms == 40


@pytest.mark.parametrize("data", [b"x", b"{}", b'{"heartbeats":[[1,2]],"closed":[]}',
                                  b'{"heartbeats":[["C","b",1,"a",1,1,1,1,1,-5]],"closed":[]}',
                                  b'{"heartbeats":[["C","b",1,"a",1,1,true,1,1,0]],"closed":[]}',
                                  b'{"heartbeats":[],"closed":[["C","b","1"]]}',
                                  b'{"heartbeats":[],"closed":[],"registrations":[["C","a",0]]}',
                                  b'{"heartbeats":[],"closed":[],"registrations":[["C","a",-1,0]]}',
                                  b'{"heartbeats":[],"closed":[],"registrations":{"C":1}}'])
def test_bad_digest_raises_the_named_error(data: bytes) -> None:
    with pytest.raises(DigestDecodeError):
        Digest.from_bytes(data)


@given(st.integers(0, 2**32 - 1))
def test_expiry_matches_a_full_scan_model(seed: int) -> None:
    """Random heartbeats, closes and clock steps: expire() returns exactly what a naive full scan
    of `last + timeout < now` would, at every step (seed in the hypothesis report)."""
    rng = random.Random(seed)
    table, model = HeartbeatTable(), {}
    keys = [BrokerKey("C", "b", i) for i in range(8)]
    now = 0
    for _ in range(200):
        action = rng.random()
        key = rng.choice(keys)
        if action < 0.6:
            timeout = rng.choice([-50, 0, 10, 50, 200])
            table.update(hb(key, timeout), now, channel_id=key.broker_id % 3)
            model[key] = (now + timeout, key.broker_id % 3)
        elif action < 0.7:
            channel = rng.randrange(3)
            closed = table.on_channel_closed(channel, now)
            expected = sorted(k for k, (_, ch) in model.items() if ch == channel)
            assert closed == expected
            for k in expected:
                del model[k]
        else:
            now += rng.randrange(0, 80)
            expected = sorted(k for k, (deadline, _) in model.items() if deadline < now)
            assert sorted(table.expire(now)) == expected
            for k in expected:
                del model[k]
        assert all(table.is_alive(k, now) == (k in model and model[k][0] >= now) for k in keys)


def test_last_alive_is_the_last_heartbeat_or_the_close_and_is_bounded() -> None:
    table = HeartbeatTable(max_brokers=2)
    table.update(hb(K1, 100), 10, channel_id="c1")
    table.update(hb(K2, 100), 20)
    assert table.last_alive_ms(K1) == 10  # live: its latest heartbeat
    table.on_channel_closed("c1", 50)
    assert table.expire(121) == [K2]
    assert (table.last_alive_ms(K1), table.last_alive_ms(K2)) == (50, 20)
    table.update(hb(K3, 100), 130)
    table.expire(231)
    assert table.last_alive_ms(K1) is None  # the oldest inactive broker is forgotten first
    assert (table.last_alive_ms(K2), table.last_alive_ms(K3)) == (20, 130)


def test_forgiven_time_moves_every_deadline_and_leaves_ages_out() -> None:
    table = HeartbeatTable()
    a, b = BrokerKey("C", "a", 1), BrokerKey("C", "b", 1)
    table.update(Heartbeat(a, "x:1", timeout_ms=1000), 0)
    table.update(Heartbeat(b, "x:2", timeout_ms=1000), 500)
    table.forgive(2000)  # the node could not look for 2 s
    assert table.expire(2500) == [] and table.is_alive(a, 3000)
    assert table.next_deadline_ms() == 3000  # on the caller's clock
    digest = table.take_digest(3000)
    assert sorted(row[9] for row in digest.rows) == [500, 1000]  # heard ago, looking time only
    assert table.expire(3001) == [a]
    assert not table.is_alive(a, 3001) and table.is_alive(b, 3001)


def test_a_relayed_row_ages_on_the_leader_s_looking_time() -> None:
    leader = HeartbeatTable()
    leader.forgive(5000)
    key = BrokerKey("C", "r", 1)
    leader.merge_digest(Digest.of([Heartbeat(key, "x:1", timeout_ms=1000)], heard_ms_ago=300), 10_000)
    assert leader.is_alive(key, 10_700) and not leader.is_alive(key, 10_701)


def test_a_stall_seen_by_several_tasks_is_counted_once_and_small_lateness_not_at_all() -> None:
    meter = StallMeter(tolerance_s=0.1)
    assert meter.observe(due_s=1.0, now_s=1.05) == 0.0
    assert meter.observe(due_s=2.0, now_s=5.0) == pytest.approx(2.9)
    assert meter.observe(due_s=2.02, now_s=5.01) == pytest.approx(0.01)  # the same stall, another task
    assert meter.stalls == 2 and meter.longest_s == pytest.approx(2.9)


def test_many_masters_expiring_together_is_suspect_a_few_are_not() -> None:
    guard = MassExpiry(masters=10, window_s=3.0)
    guard.note(9, 100.0)
    assert not guard.suspect(100.0)
    guard.note(1, 102.0)
    assert guard.suspect(102.0)
    assert not guard.suspect(103.5)  # the first of them is older than the window
    guard.note(3, 110.0)
    assert not guard.suspect(110.0)
