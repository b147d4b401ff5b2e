from rmqc.raft import Role

from .raftnet import Network


def test_three_nodes_elect_and_replicate() -> None:
    net = Network(["n1", "n2", "n3"], seed=1)
    net.elect("n1")
    net.propose("n1", b"x")
    for node_id in net.ids:
        assert net.payloads(node_id) == [b"x"], net.describe()


def test_election_by_ticks() -> None:
    net = Network(["n1", "n2", "n3"], seed=2)
    net.tick_until(lambda: net.leader() is not None, 40)
    leader = net.leader()
    assert leader is not None
    assert sum(n.raft.role is Role.LEADER for n in net.nodes.values()) == 1
