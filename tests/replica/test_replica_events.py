"""The event ring of `rmqc events` (rmqc.replica.EventLog): numbering, a reader that fell behind,
a cursor from before a restart, a failover's steps after the commit, and the RMQC_EVENTS request's
fields and answer (the long poll is the shell's: tests/node/test_node_events.py)."""

from __future__ import annotations

import orjson
import pytest

from rmqc.fsm import (
    ApplyResult,
    ApplyStatus,
    BrokerGroup,
    ElectionReason,
    ElectMaster,
    NotificationSent,
    Replica as GroupReplica,
    Trigger,
)
from rmqc.liveness import BrokerKey, Heartbeat
from rmqc.remoting import RMQC_EVENTS, ResponseCode, make_request
from rmqc.replica import (
    MAX_EVENTS_PER_PAGE,
    BadEventsRequest,
    EventLog,
    EventsQuery,
    events_answer,
    events_query,
    is_failover,
)


def test_a_reader_pages_through_the_ring_and_learns_what_it_missed() -> None:
    events = EventLog(capacity=4)
    for n in range(6):
        events.record("alarm", 1_000 + n, {"n": n})
    page = events.page(0)
    assert [e["seq"] for e in page.events] == [3, 4, 5, 6] and page.missed == 0 and page.last_seq == 6
    behind = events.page(1)  # saw seq 1; 2 was dropped before it asked
    assert behind.missed == 1 and [e["seq"] for e in behind.events] == [3, 4, 5, 6]
    assert [e["n"] for e in events.page(4, limit=1).events] == [4]
    assert events.page(6).events == [] and events.page(6).missed == 0
    restarted = events.page(99)  # a cursor of an earlier run of the node: read from the start
    assert [e["seq"] for e in restarted.events] == [3, 4, 5, 6] and restarted.missed == 0


def test_a_failover_event_and_its_steps_after_the_commit() -> None:
    events = EventLog()
    woken: list[int] = []
    events.listener = lambda: woken.append(events.last_seq)
    before = BrokerGroup("C", "g", 3, {1: GroupReplica("h1:1", "c1"), 2: GroupReplica("h2:1", "c2")},
                         master_id=1, master_epoch=1, sync_state_set=frozenset({1, 2}), sync_state_set_epoch=1)
    after = BrokerGroup("C", "g", 3, before.replicas, master_id=2, master_epoch=2, sync_state_set=frozenset({2}),
                        sync_state_set_epoch=2)
    command = ElectMaster("C", "g", Trigger.CONTROLLER, 2, 1, 1, 5_000, liveness_lost_ms=4_990,
                          master_last_alive_ms=1_000, reason=ElectionReason.HEARTBEAT_MISSED,
                          deadline_missed_by_ms=7, candidates=((2, 1, 300, 5, True),))
    applied = ApplyResult(command, ApplyStatus.OK, before, after)
    assert is_failover(applied)
    events.failovers_applied([applied], wall_ms=5_004, now_ms=100)
    [failover] = events.page(0).events
    assert failover["kind"] == "failover" and (failover["oldMaster"], failover["newMaster"]) == (1, 2)
    assert failover["reason"] == "heartbeat_deadline_missed" and failover["deadlineMissedByMs"] == 7
    assert failover["candidates"] == [{"brokerId": 2, "epoch": 1, "maxOffset": 300, "priority": 5,
                                       "inSyncStateSet": True}]
    assert failover["timeline"] == {"masterLastAliveMs": 1_000, "detectedMs": 4_990, "proposedMs": 5_000,
                                    "committedMs": 5_004}
    events.notifications_queued(BrokerKey("C", "g", 2), "h2:1", 2, now_ms=100)
    assert events.sent("h2:1", 1, now_ms=105) is None  # an older epoch's 1008: not this failover
    assert events.sent("h2:1", 2, now_ms=112) == (BrokerKey("C", "g", 2), 12)
    assert events.sent("h2:1", 2, now_ms=113) is None  # once
    assert events.last_seq == 1  # the step is the leader's record, applied on every node
    events.notification_applied(NotificationSent("C", "g", 2, "h2:1", 2, 12, 5_010), wall_ms=5_011)
    new_master = BrokerKey("C", "g", 2)
    assert events.heartbeat_heard(Heartbeat(new_master, "h2:1", epoch=1), 5_020, now_ms=120) is None  # not yet
    assert new_master in events.awaiting_heartbeat
    assert events.heartbeat_heard(Heartbeat(new_master, "h2:1", epoch=2), 5_030, now_ms=130) == 30
    assert new_master not in events.awaiting_heartbeat
    steps = [(e["step"], e["brokerId"], e["afterCommitMs"]) for e in events.page(1).events]
    assert steps == [("notified", 2, 12), ("heartbeat", 2, 30)]
    assert woken == [1, 2, 3]  # every record wakes the waiting readers


def test_a_refused_election_and_a_groups_first_master_are_no_failovers() -> None:
    command = ElectMaster("C", "g", Trigger.BROKER, 1, 0, 0, 5_000)
    new = BrokerGroup("C", "g", 2, {1: GroupReplica("h1:1", "c1")})
    first = BrokerGroup("C", "g", 2, new.replicas, master_id=1, master_epoch=1)
    assert not is_failover(ApplyResult(command, ApplyStatus.STALE_MASTER_EPOCH, new, new))
    assert not is_failover(ApplyResult(command, ApplyStatus.OK, new, first))


def test_an_events_request_is_read_within_its_bounds_and_answered_with_a_page() -> None:
    assert events_query(make_request(RMQC_EVENTS, 1, {})) == EventsQuery(0, 0, MAX_EVENTS_PER_PAGE)
    asked = make_request(RMQC_EVENTS, 1, {"after": 7, "waitMs": 10**9, "limit": 0})
    assert events_query(asked) == EventsQuery(7, 20_000, MAX_EVENTS_PER_PAGE)  # limit 0: the most
    assert events_query(make_request(RMQC_EVENTS, 1, {"limit": 3, "waitMs": ""})) == EventsQuery(0, 0, 3)
    for bad in ({"after": "-1"}, {"waitMs": "soon"}):
        with pytest.raises(BadEventsRequest, match="must be a non-negative integer"):
            events_query(make_request(RMQC_EVENTS, 1, bad))
    events = EventLog()
    events.record("alarm", 1, {"alarm": "disk_full"})
    answer = events_answer(asked, events.page(0))
    assert answer.code == ResponseCode.SUCCESS and orjson.loads(answer.body or b"")["lastSeq"] == 1
