"""Pacing of a lagging follower's catch-up (issue 13): one small probe at a time, no resend of a
range that is still in flight, and a window bounded in messages and bytes."""

from __future__ import annotations

from rmqc.raft import Config
from rmqc.raft._core import PROBE_ENTRIES
from rmqc.raft._progress import Progress, ProgressState
from rmqc.raft._types import MessageType as MT

from .raftnet import elected, msg

ET = Config(id="x").election_tick


def lagging_leader(entries: int, **config: object):  # type: ignore[no-untyped-def]
    """n1 leads n1..n3; n3 missed `entries` appends and is back in PROBE (as after a pause)."""
    net = elected(["n1", "n2", "n3"], **config)
    net.isolate("n3")
    for i in range(entries):
        net.propose("n1", b"%0100d" % i)
    net.recover()
    leader = net.nodes["n1"]
    leader.report_unreachable("n3")
    return net, leader


def appends_to(messages: list, peer: str) -> list:  # type: ignore[type-arg]
    return [m for m in messages if m.type is MT.APP and m.to == peer]


def test_probe_carries_few_entries() -> None:
    net, leader = lagging_leader(200)
    pr = leader.raft.progress["n3"]
    assert pr.state is ProgressState.PROBE
    net.tick(["n1"])  # a heartbeat round; n3 answers it
    sent = appends_to(net.delivered, "n3")
    assert len(sent[0].entries) <= PROBE_ENTRIES  # the probe; once accepted, full batches follow
    assert net.nodes["n3"].raft.log.last_index() == leader.raft.log.last_index()


def test_heartbeat_replies_do_not_resend_an_outstanding_probe() -> None:
    """A resumed follower answers every heartbeat queued while it slept at once: the leader must
    not answer each of them with another copy of the probe."""
    net, leader = lagging_leader(50)
    raft = leader.raft
    pr = raft.progress["n3"]
    term = raft.term
    leader.step(msg(MT.HEARTBEAT_RESP, "n3", "n1", term=term))
    first = appends_to(net.process_ready("n1"), "n3")
    assert len(first) == 1 and pr.flow_paused
    for _ in range(20):  # the backlog of heartbeat replies, all within one tick
        leader.step(msg(MT.HEARTBEAT_RESP, "n3", "n1", term=term))
    assert appends_to(net.process_ready("n1"), "n3") == []
    probe_round = pr.probe_round
    for _ in range(5):  # ticks pass; the follower works through rounds sent before the probe
        leader.tick()
    net.process_ready("n1")
    for round_id in range(1, probe_round + 1):
        leader.step(msg(MT.HEARTBEAT_RESP, "n3", "n1", term=term, context=round_id.to_bytes(8, "big")))
    assert appends_to(net.process_ready("n1"), "n3") == []


def test_a_lost_probe_is_sent_again_after_probe_retry_ticks() -> None:
    net, leader = lagging_leader(50)
    raft = leader.raft
    pr = raft.progress["n3"]
    leader.step(msg(MT.HEARTBEAT_RESP, "n3", "n1", term=raft.term))
    assert len(appends_to(net.process_ready("n1"), "n3")) == 1  # ...and lost
    for _ in range(raft.config.probe_retry_ticks):
        leader.tick()  # heartbeat rounds sent after the probe
    net.process_ready("n1")
    later_round = (raft.heartbeat_round).to_bytes(8, "big")
    leader.step(msg(MT.HEARTBEAT_RESP, "n3", "n1", term=raft.term, context=later_round))
    again = appends_to(net.process_ready("n1"), "n3")
    assert len(again) == 1 and again[0].index == pr.next - 1


def test_catch_up_stays_within_the_window_until_acks_return() -> None:
    net, leader = lagging_leader(3000, max_entries_per_msg=100, max_inflight_msgs=4)
    raft = leader.raft
    pr = raft.progress["n3"]
    net.hook = lambda m: None if (m.type is MT.APP_RESP and m.frm == "n3" and not m.reject
                                  and m.index > 200) else m
    net.tick(["n1"], ticks=3)  # the probe is accepted, then the window fills and acks stop
    assert pr.state is ProgressState.REPLICATE
    assert len(pr.inflights) <= 4 and pr.next - 1 - pr.match <= 4 * 100
    net.hook = None
    net.tick_until(lambda: net.nodes["n3"].raft.log.last_index() == raft.log.last_index(), 20 * ET)


def test_window_bytes_bound_the_catch_up() -> None:
    net, leader = lagging_leader(3000, max_inflight_bytes=8 * 1024, max_size_per_msg=2 * 1024)
    pr = leader.raft.progress["n3"]
    net.hook = lambda m: None if (m.type is MT.APP_RESP and m.frm == "n3" and m.index > 200) else m
    net.tick(["n1"], ticks=3)
    assert pr.inflights.bytes <= 8 * 1024 + 2 * 1024  # the last message may overshoot by itself
    net.hook = None


def test_may_resume_keeps_replicate_resumable_on_every_heartbeat() -> None:
    pr = Progress(next_index=1, max_inflight=1, max_inflight_bytes=1000)
    pr.become_replicate()
    pr.sent_append(1, 10, tick=5, heartbeat_round=3)
    assert pr.is_paused()
    pr.may_resume(tick=5, heartbeat_round=3, probe_retry_ticks=2)  # pitfall 36: a full window resumes
    assert not pr.is_paused()


def test_a_probe_is_resent_only_once_the_follower_has_read_past_it() -> None:
    pr = Progress(next_index=1, max_inflight=1, max_inflight_bytes=1000)
    pr.sent_append(None, 0, tick=7, heartbeat_round=40)  # PROBE: sent after round 40
    pr.may_resume(tick=50, heartbeat_round=40, probe_retry_ticks=2)  # a backlog: still before it
    assert pr.is_paused()
    pr.may_resume(tick=8, heartbeat_round=41, probe_retry_ticks=2)  # past it, but its answer may
    assert pr.is_paused()                                           # still wait for an fsync
    pr.may_resume(tick=9, heartbeat_round=41, probe_retry_ticks=2)  # lost: send it again
    assert not pr.is_paused()


def test_a_joining_learner_catches_up_within_the_window() -> None:
    """A learner added to a long log is caught up like a lagging follower: never more than the
    window's messages and bytes in flight to it (issue 13)."""
    from rmqc.raft import ConfChange, ConfChangeType

    net = elected(["n1", "n2", "n3"], max_entries_per_msg=100, max_inflight_msgs=4)
    for i in range(2000):
        net.nodes["n1"].propose(b"%0100d" % i)
    net.stabilize()
    net.add_node("n4")
    leader = net.nodes["n1"]
    in_flight: list[tuple[int, int]] = []

    def watch(m):  # type: ignore[no-untyped-def]
        pr = leader.raft.progress.get("n4")
        if pr is not None:
            in_flight.append((len(pr.inflights), pr.inflights.bytes))
        return m

    net.hook = watch
    leader.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, "n4"))
    net.stabilize()
    net.tick_until(lambda: net.nodes["n4"].raft.log.last_index() == leader.raft.log.last_index(), 20 * ET)
    assert net.nodes["n4"].status().is_learner
    assert max(count for count, _ in in_flight) <= 4
    config = leader.raft.config
    assert max(size for _, size in in_flight) <= config.max_inflight_bytes + config.max_size_per_msg


def test_simultaneous_pre_candidates_do_not_split_the_vote() -> None:
    """After a paused leader, both followers may time out on the same tick: the lower of the two
    pre-candidates steps back when it grants the other's pre-vote, so one election round does."""
    from rmqc.raft import Role

    for first, second in (("n2", "n3"), ("n3", "n2")):
        net = elected(["n1", "n2", "n3"])
        net.isolate("n1")
        a, b = net.nodes[first], net.nodes[second]
        for node in (a, b):
            node.raft.leader_contact_elapsed = ET  # both stopped hearing n1 long ago
            node.campaign()  # both pre-campaign before either hears the other
        net.stabilize()
        roles = sorted(node.raft.role.value for node in (a, b))
        assert roles == ["follower", "leader"], roles
        assert net.nodes["n3"].raft.role is Role.LEADER  # equal logs: the higher id goes on
        assert a.raft.term == b.raft.term == 3
