from __future__ import annotations

from rmqc.raft import describe_message, describe_ready

from .raftnet import Network


def test_describe_ready_and_messages_of_a_proposal() -> None:
    net = Network(["n1", "n2", "n3"])
    net.elect("n1")
    net.nodes["n1"].propose(b"abc")
    rd = net.nodes["n1"].ready()
    text = describe_ready(rd)
    assert "entries: 2/5 3B" in text
    assert "send: n1->n2 APP term=2 log=2/4 commit=4 entries=[2/5 3B]" in text
    net.nodes["n1"].advance(rd)


def test_describe_bootstrap_conf_entries() -> None:
    net = Network(["n1", "n2"])
    node = net.nodes["n1"]
    rd = node.ready()
    assert describe_ready(rd) == (
        "hard: term=1 vote=None commit=2\nentries: 1/1 ADD_VOTER n1, 1/2 ADD_VOTER n2"
    )
    net.storages["n1"].save(rd.hard_state, rd.entries, rd.snapshot)
    node.advance(rd)
    net.elect("n1")
    vote = next(m for m in net.delivered if m.type.name == "VOTE")
    assert describe_message(vote) == "n1->n2 VOTE term=2 log=1/2"
