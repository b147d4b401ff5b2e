"""The peer links' decisions: which links a node keeps as the membership changes, where messages go,
when a lost link is dialled again and when its peer is down, and what a connected link writes next."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from rmqc.config import Peer
from rmqc.peerwire import (
    RECONNECT_MAX_S,
    RECONNECT_MIN_S,
    FrameKind,
    LinkTable,
    LinkWrites,
    PeerFrameDecoder,
    PeerOutbox,
    Reconnection,
    decode_messages,
    encode_frame,
    is_refusal,
    link_outbox,
    return_address,
)
from rmqc.raft import Entry, Message, MessageType


@dataclass(eq=False)
class Link:
    peer: Peer
    outbox: PeerOutbox = field(default_factory=lambda: link_outbox(16, 1 << 20))


def new_link(peer_id: str, host: str, port: int) -> Link:
    return Link(Peer(peer_id, host, port))


def queued(link: Link | None) -> list[Message]:
    assert link is not None
    data, _snapshots = link.outbox.take_batch()
    return [message for frame in PeerFrameDecoder(1 << 20).feed(data) for message in decode_messages(frame.payload)]


def ids(links: list[Link]) -> list[str]:
    return [link.peer.id for link in links]


def table_of(addresses: dict[str, str], node_id: str = "n0") -> LinkTable[Link, str]:
    table: LinkTable[Link, str] = LinkTable(node_id)
    table.set_members(addresses, True, new_link)
    return table


def test_a_member_opens_a_link_to_every_other_member_and_accepts_exactly_them() -> None:
    table: LinkTable[Link, str] = LinkTable("n0")
    opened, closed, cut = table.set_members({"n0": "h0:1", "n1": "h1:1", "n2": "h2:1"}, True, new_link)
    assert (ids(opened), closed, cut) == (["n1", "n2"], [], [])
    assert table.members == {"n1": "h1:1", "n2": "h2:1"} and table.dialled == opened
    assert table.accepted == frozenset({"n1", "n2"})
    assert [table.accepts(peer_id) for peer_id in ("n1", "n2", "n3", "n0")] == [True, True, False, False]


def test_a_change_opens_exactly_the_added_and_closes_exactly_the_removed_and_the_moved() -> None:
    table = table_of({"n1": "h1:1", "n2": "h2:1", "n3": "h3:1"})
    kept = table.dialled_to("n1")
    for connection, peer_id in [("a", "n1"), ("b", "n2"), ("c", "n2"), ("d", "n3"), ("e", "n9")]:
        table.add_inbound(peer_id, connection)
    table.drop_inbound("n2", "c")
    opened, closed, cut = table.set_members({"n0": "h0:1", "n1": "h1:0001", "n3": "h3:2", "n4": "h4:1"}, True,
                                            new_link)
    assert sorted(cut) == ["b", "e"]  # n3's connection stays: it is still a member, at another address
    assert ids(closed) == ["n2", "n3"]  # n2 removed; n3 moved: dialled again at its new address
    assert [link.peer for link in opened] == [Peer("n3", "h3", 2), Peer("n4", "h4", 1)]
    assert table.dialled_to("n1") is kept  # the same address, however written: the link stays
    assert table.members == {"n1": "h1:1", "n3": "h3:2", "n4": "h4:1"}
    assert table.set_members({"n1": "h1:1", "n3": "h3:2", "n4": "h4:1"}, True, new_link) == ([], [], [])


def test_a_node_outside_the_membership_dials_no_one_and_accepts_any_id() -> None:
    table = table_of({"n1": "h1:1", "n2": "h2:1"})
    table.add_inbound("n1", "a")
    opened, closed, cut = table.set_members({"n1": "h1:1", "n2": "h2:1"}, False, new_link)
    assert (opened, ids(closed), cut) == ([], ["n1", "n2"], [])
    assert table.members == {} and table.accepted is None
    assert table.accepts("n7") and table.accepts("n0")


def test_messages_go_to_the_dialled_link_else_the_return_link_else_nowhere() -> None:
    table = table_of({"n1": "h1:1"})
    back = new_link("n2", *return_address("10.0.0.2:40000"))
    table.add_return(back)
    to = [Message(type=MessageType.HEARTBEAT, to=peer_id, frm="n0", term=number)
          for number, peer_id in enumerate(["n2", "n1", "n9", "n2"])]
    links, unknown = table.queue(to)
    assert links == [back, table.dialled_to("n1")] and unknown == [to[2]]
    assert queued(back) == [to[0], to[3]] and queued(table.dialled_to("n1")) == [to[1]]
    assert back.peer == Peer("n2", "10.0.0.2", 40000)
    table.set_members({"n1": "h1:1", "n2": "h2:1"}, True, new_link)
    assert table.link_to("n2") is table.dialled_to("n2") is not back  # our own link wins


def test_a_return_link_is_dropped_only_if_no_newer_connection_of_its_peer_replaced_it() -> None:
    table: LinkTable[Link, str] = LinkTable("n0")
    old, new = new_link("n1", "h", 1), new_link("n1", "h", 2)
    table.add_return(old)
    table.add_return(new)
    table.drop_return(old)
    assert table.link_to("n1") is new
    table.drop_return(new)
    assert table.link_to("n1") is None
    assert return_address("[::1]:x") == ("[::1]", 0)


def test_connected_follows_the_current_link_of_each_peer() -> None:
    table = table_of({"n1": "h1:1", "n2": "h2:1"})
    first = table.dialled_to("n1")
    assert first is not None
    table.link_up(first)
    table.link_up(table.dialled_to("n2"))  # type: ignore[arg-type]
    table.set_members({"n1": "h1:2"}, True, new_link)  # n1 moves, n2 leaves: neither is connected
    assert table.connected == set()
    moved = table.dialled_to("n1")
    assert moved is not None
    table.link_up(moved)
    table.link_lost(first)  # the closed link's task winds down: the new link stays up
    assert table.connected == {"n1"}
    table.queue([Message(type=MessageType.HEARTBEAT, to="n1", frm="n0")])
    table.link_lost(moved)
    assert table.connected == set()
    assert queued(moved) == [] and moved.outbox.stats.raft_dropped == 1  # stale once the link is back


def test_a_links_raft_frames_are_at_most_half_the_frame_bound() -> None:
    outbox = link_outbox(100, 4000)
    for index in range(10):
        outbox.put_message(Message(type=MessageType.APP, to="n1", frm="n0", index=index,
                                   entries=(Entry(index + 1, 1, data=b"x" * 300),)))
    frames = PeerFrameDecoder(1 << 20).feed(outbox.take_batch()[0])
    assert len(frames) > 1 and all(len(frame.payload) <= 2000 + 500 for frame in frames)
    assert sum(len(decode_messages(frame.payload)) for frame in frames) == 10


def reconnection(seed: int = 7) -> tuple[Reconnection, random.Random]:
    return (Reconnection(min_s=0.01, max_s=0.1, stable_s=1.0, random=random.Random(seed).random),
            random.Random(seed))


def test_failed_attempts_wait_twice_as_long_each_time_up_to_the_cap_jittered_by_the_rng() -> None:
    policy, same_rng = reconnection()
    waits = []
    for _attempt in range(7):
        assert not policy.connect_failed(refused=True)  # never connected: not "down"
        waits.append(policy.wait_s())
        policy.waited(cut_short=False)
    delays = [0.01, 0.02, 0.04, 0.08, 0.1, 0.1, 0.1]
    assert waits == [delay * (0.5 + same_rng.random()) for delay in delays]
    assert all(0.5 * delay <= wait < 1.5 * delay for wait, delay in zip(waits, delays, strict=True))


def test_a_wait_cut_short_by_the_peer_dialling_us_starts_over_from_the_minimum() -> None:
    policy, same_rng = reconnection()
    for _attempt in range(4):
        policy.wait_s()
        same_rng.random()
        policy.waited(cut_short=False)
    policy.waited(cut_short=True)
    assert policy.wait_s() == 0.01 * (0.5 + same_rng.random())


def test_a_stable_connection_is_dialled_again_at_once_a_short_one_after_the_wait() -> None:
    policy, same_rng = reconnection()
    for _attempt in range(3):
        policy.waited(cut_short=False)
    assert not policy.connection_lost(lived_s=0.999)  # refused at handshake, say: keep backing off
    assert policy.wait_s() == 0.08 * (0.5 + same_rng.random())
    assert policy.connection_lost(lived_s=1.0)
    assert policy.wait_s() == 0.01 * (0.5 + same_rng.random())


def test_the_peer_is_down_once_when_its_port_refuses_us_after_a_connection_was_lost() -> None:
    policy, _rng = reconnection()
    assert not policy.connect_failed(refused=True)
    policy.connection_lost(lived_s=5.0)
    assert not policy.connect_failed(refused=False)  # a timeout: slow or partitioned, not gone
    assert policy.connect_failed(refused=True)
    assert not policy.connect_failed(refused=True)  # told once per lost connection
    policy.connection_lost(lived_s=0.1)
    assert policy.connect_failed(refused=True)


def test_the_reconnect_bounds_keep_a_link_back_well_inside_an_election_timeout() -> None:
    assert 0 < RECONNECT_MIN_S < RECONNECT_MAX_S and 1.5 * RECONNECT_MAX_S < 0.5


def refused_on_every_address(*errors: OSError) -> OSError:
    error = OSError("all attempts to connect failed")
    error.__cause__ = ExceptionGroup("attempts", list(errors))
    return error


@pytest.mark.parametrize(("error", "refusal"), [
    (ConnectionRefusedError(), True),
    (refused_on_every_address(ConnectionRefusedError(), ConnectionRefusedError()), True),
    (refused_on_every_address(ConnectionRefusedError(), TimeoutError()), False),
    (OSError("no route to host"), False),
    (TimeoutError(), False),
])
def test_only_a_refusal_on_every_address_counts_as_a_refusal(error: OSError, refusal: bool) -> None:
    assert is_refusal(error) is refusal


def outbox_with(*payloads: bytes) -> PeerOutbox:
    outbox = PeerOutbox(16, 16, 1 << 20)
    for payload in payloads:
        outbox.put_control(FrameKind.DIGEST, payload)
    return outbox


def test_a_direct_write_that_the_socket_took_in_part_leaves_the_rest_to_go_first() -> None:
    writes = LinkWrites(7, "stream", encode=lambda data: b"<" + data + b">")
    outbox = outbox_with(b"b")
    assert writes.may_write_directly() and writes.idle(outbox_with())
    assert writes.wrote_directly(b"whole", 5, ["n1"])
    assert not writes.wrote_directly(b"abcdef", 2, ["n2"])
    assert not writes.may_write_directly() and not writes.idle(outbox_with())
    assert writes.take_next(outbox) == (b"cdef", ["n2"])  # the rest, not re-encoded, before the outbox
    assert writes.take_next(outbox) == (b"<" + encode_frame(FrameKind.DIGEST, b"b") + b">", [])
    assert writes.idle(outbox) and writes.take_next(outbox) == (b"", [])


def test_nothing_is_written_directly_while_the_task_sends_nor_to_a_stream_without_a_socket() -> None:
    writes = LinkWrites(7, "stream")
    writes.sending = True
    assert not writes.may_write_directly()
    assert not LinkWrites(-1, "stream").may_write_directly()
