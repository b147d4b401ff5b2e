"""The peer links follow the applied membership (issue 16), over real TCP on 127.0.0.1: a member
added is dialled, a removed one's link and inbound connections are closed and its new connections
refused, and a node outside the membership (joining) dials no one, accepts any member of its group
and answers a member on the connection that member opened."""

from __future__ import annotations

import trio
from node_helpers import free_ports, wait_until
from test_node_transport import Recorder, start_node

from rmqc.config import NodeConfig, parse_peers
from rmqc.raft._types import Message, MessageType


def configs(count: int) -> list[NodeConfig]:
    ports = free_ports(count)
    return [NodeConfig(node_id=f"n{i}", peers=parse_peers(f"n{i}-127.0.0.1:{port}")) for i, port in enumerate(ports)]


def book(*nodes: NodeConfig) -> dict[str, str]:
    return {node.node_id: node.listen_address for node in nodes}


def heartbeat(frm: str, to: str) -> Message:
    return Message(type=MessageType.HEARTBEAT, to=to, frm=frm, term=1)


async def test_links_follow_the_membership_added_then_removed() -> None:
    n0, n1 = configs(2)
    r0, r1 = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links0 = await start_node(nursery, n0, r0)
        links1 = await start_node(nursery, n1, r1)
        assert links0.members == {} and links0.connected == set()  # alone: nothing to dial
        links1.send_messages([heartbeat("n1", "n0")])  # not a member of n1's book: dropped
        links0.set_members(book(n0, n1))
        links1.set_members(book(n0, n1))
        assert links0.members == {"n1": n1.listen_address}
        await wait_until(lambda: "n1" in links0.connected and "n0" in links1.connected, what="links up both ways")
        links0.send_messages([heartbeat("n0", "n1")])
        await wait_until(lambda: len(r1.messages) == 1, what="n0's heartbeat at n1")

        links0.set_members(book(n0))  # n1 removed, as n0 applied it
        assert links0.members == {} and "n1" not in links0.connected
        links0.send_messages([heartbeat("n0", "n1")])  # no link any more: dropped, not queued
        # n1's link to n0 is refused from now on (n1 is not in n0's book), and its open inbound
        # connection at n0 was closed: nothing n1 sends reaches n0's handler
        refused_before = links0.refused_peers
        links1.send_messages([heartbeat("n1", "n0")])
        await wait_until(lambda: links0.refused_peers > refused_before, what="n1 refused by n0")
        assert r0.messages == []
        nursery.cancel_scope.cancel()


async def test_a_joining_node_accepts_any_member_of_its_group_until_it_is_in() -> None:
    leader, joiner = configs(2)
    joiner = joiner.with_changes(join_address=leader.listen_address)
    r_leader, r_joiner = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links_joiner = await start_node(nursery, joiner, r_joiner)
        links_leader = await start_node(nursery, leader, r_leader)
        links_leader.set_members(book(leader, joiner))  # the leader applied "add n1 as a learner"
        links_leader.send_messages([heartbeat("n0", "n1")])
        await wait_until(lambda: r_joiner.messages, what="the leader's heartbeat at the joiner")
        assert r_joiner.messages[0][0] == "n0" and links_joiner.refused_peers == 0
        # it does not know the leader's address yet: its answer goes back on the leader's connection
        assert links_joiner.members == {}
        links_joiner.send_messages([heartbeat("n1", "n0")])
        await wait_until(lambda: r_leader.messages, what="the joiner's answer at the leader")
        assert r_leader.messages[0][0] == "n1"

        links_joiner.set_members(book(leader, joiner))  # the joiner applied the membership
        await wait_until(lambda: "n0" in links_joiner.connected, what="the joiner's link to the leader")
        links_joiner.send_messages([heartbeat("n1", "n0")])
        await wait_until(lambda: len(r_leader.messages) == 2, what="the joiner's message on its own link")
        nursery.cancel_scope.cancel()


async def test_a_member_at_a_new_address_is_dialled_there() -> None:
    n0, n1, n1_moved = configs(3)
    n1_moved = NodeConfig(node_id="n1", peers=parse_peers(f"n1-{n1_moved.listen_address}"))
    r0, r_moved = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links0 = await start_node(nursery, n0, r0)
        links_moved = await start_node(nursery, n1_moved, r_moved)
        links_moved.set_members(book(n0, n1_moved))
        links0.set_members(book(n0, n1))  # n1 at its old address: nothing listens there
        links0.set_members(book(n0, n1_moved))
        assert links0.members == {"n1": n1_moved.listen_address}
        await wait_until(lambda: "n1" in links0.connected, what="the link to n1 at its new address")
        nursery.cancel_scope.cancel()
