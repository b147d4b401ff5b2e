"""Config.commit_broadcast (issue 21): with it off, a moved commit index reaches the followers
with the next append or heartbeat instead of an empty append of its own, except a committed
membership change and a term's first commit, which still go out at once."""

from __future__ import annotations

from rmqc.raft import ConfChange, ConfChangeType, MessageType

from .raftnet import Network, elected

MT = MessageType


def empty_appends(net: Network, since: int) -> list[tuple[str, int]]:
    """(follower, commit) of the entry-less appends the leader sent after delivery `since`."""
    return [(m.to, m.commit) for m in net.delivered[since:] if m.type is MT.APP and not m.entries]


def commits(net: Network) -> dict[str, int]:
    return {node_id: node.status().commit for node_id, node in net.nodes.items()}


def test_with_commit_broadcast_on_followers_learn_the_commit_at_once() -> None:
    net = elected(["n1", "n2", "n3"])
    since = len(net.delivered)
    net.propose("n1", b"x")
    leader_commit = net.nodes["n1"].status().commit
    assert commits(net) == {"n1": leader_commit, "n2": leader_commit, "n3": leader_commit}
    assert sorted(empty_appends(net, since)) == [("n2", leader_commit), ("n3", leader_commit)]


def test_with_commit_broadcast_off_a_write_costs_one_append_per_follower() -> None:
    net = elected(["n1", "n2", "n3"], commit_broadcast=False)
    since = len(net.delivered)
    net.propose("n1", b"x")
    leader_commit = net.nodes["n1"].status().commit
    assert net.payloads("n1") == [b"x"], "the leader commits and applies without waiting"
    assert empty_appends(net, since) == []
    assert commits(net)["n2"] == commits(net)["n3"] == leader_commit - 1
    net.tick(ticks=1)  # heartbeat_tick 1: the heartbeat carries the commit index
    assert commits(net) == {"n1": leader_commit, "n2": leader_commit, "n3": leader_commit}
    assert net.payloads("n2") == net.payloads("n3") == [b"x"]


def test_with_commit_broadcast_off_the_next_append_carries_the_commit() -> None:
    net = elected(["n1", "n2", "n3"], commit_broadcast=False)
    net.propose("n1", b"x")
    net.propose("n1", b"y")
    assert net.payloads("n2") == [b"x"], "the append of y carried the commit of x"


def test_with_commit_broadcast_off_a_membership_change_is_still_broadcast() -> None:
    net = elected(["n1", "n2", "n3"], commit_broadcast=False)
    net.nodes["n1"].propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, "n3"))
    net.stabilize()
    leader_commit = net.nodes["n1"].status().commit
    # n3 gets no heartbeat once removed: it learns its removal from this append or never
    assert commits(net)["n3"] == leader_commit
    assert commits(net)["n2"] == leader_commit


def test_with_commit_broadcast_off_a_new_leaders_first_commit_is_broadcast() -> None:
    net = Network(["n1", "n2", "n3"], commit_broadcast=False)
    net.elect("n1")
    leader_commit = net.nodes["n1"].status().commit
    assert leader_commit > 0
    assert commits(net) == {"n1": leader_commit, "n2": leader_commit, "n3": leader_commit}
