"""The idle leader (issue 21): with idle_heartbeat_tick set, a leader that no write, ReadIndex or
lease read wanted for an election timeout heartbeats every idle_heartbeat_tick ticks, and the
ticks between are quiet (RaftCore.quiet_ticks); whatever wants the lease brings back a heartbeat
every heartbeat_tick at once. Followers' quiet ticks run until their election timeout."""

from __future__ import annotations

import itertools

from rmqc.raft import Role

from .raftnet import Network, elected

ET = 10
IDLE = 3


def heartbeats_sent(net: Network, ticks: int) -> list[int]:
    """The ticks (1-based) on which the leader n1 sent a heartbeat round."""
    sent = []
    for tick in range(1, ticks + 1):
        net.tick()
        if net.nodes["n1"].raft.heartbeat_elapsed == 0:
            sent.append(tick)
    return sent


def idle_leader() -> Network:
    net = elected(["n1", "n2", "n3"], idle_heartbeat_tick=IDLE)
    net.tick(ticks=ET)  # the election's no-op wanted the lease for one election timeout
    return net


def test_an_idle_leader_heartbeats_every_idle_heartbeat_tick_and_quiet_ticks_say_when() -> None:
    net = idle_leader()
    raft = net.nodes["n1"].raft
    sent = heartbeats_sent(net, 4 * ET)
    gaps = {b - a for a, b in itertools.pairwise(sent)}
    assert gaps == {IDLE}
    # quiet until the next idle heartbeat or CheckQuorum, whichever comes first
    assert raft.quiet_ticks() == min(IDLE - raft.heartbeat_elapsed, ET - raft.election_elapsed) - 1
    assert raft.role is Role.LEADER
    assert all(net.nodes[node_id].raft.lead == "n1" for node_id in ("n2", "n3"))


def test_a_write_or_a_read_brings_back_a_heartbeat_every_tick() -> None:
    for want in ("propose", "read_index", "lease_read"):
        net = idle_leader()
        leader = net.nodes["n1"]
        if want == "propose":
            net.propose("n1", b"x")
        elif want == "read_index":
            leader.read_index(b"ctx")
            net.stabilize()
        else:
            leader.lease_read()
        assert leader.raft.quiet_ticks() == 0, want
        assert heartbeats_sent(net, ET - 1) == list(range(1, ET)), want


def test_idle_heartbeats_are_off_by_default() -> None:
    net = elected(["n1", "n2", "n3"])
    net.tick(ticks=ET)
    assert heartbeats_sent(net, ET) == list(range(1, ET + 1))
    assert net.nodes["n1"].raft.quiet_ticks() == 0


def test_followers_are_quiet_until_their_election_timeout() -> None:
    net = idle_leader()
    follower = net.nodes["n2"].raft
    assert follower.quiet_ticks() == follower.randomized_election_timeout - follower.election_elapsed - 1
    net.isolate("n2")
    quiet = follower.quiet_ticks()
    net.tick(["n2"], ticks=quiet)
    assert follower.role is Role.FOLLOWER and follower.quiet_ticks() == 0
    net.tick(["n2"])
    assert follower.role is Role.PRE_CANDIDATE  # the campaign the quiet ticks led up to
