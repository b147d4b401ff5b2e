"""Peer authentication over sockets (the exchange itself: tests/peerwire/test_peerwire_auth.py): the
secret file (rotation, reload, bad files), secure by default start-up checks, and real TCP links on
127.0.0.1 between nodes with matching, rotated and wrong secrets, plus raw connections that forge a
member's handshake."""

from __future__ import annotations

import itertools
import os
import random
import struct
from pathlib import Path

import pytest
import trio
from node_helpers import free_ports, wait_until
from test_node_transport import Recorder, start_node

from rmqc.config import NodeConfig, is_loopback, parse_peers
from rmqc.errors import ConfigError
from rmqc.node import _peer_auth
from rmqc.node._peer_auth import PeerSecrets
from rmqc.node._peers import PeerLinks
from rmqc.peerwire import (
    PEER_PROTOCOL_VERSION,
    PROOF_BYTES,
    FrameKind,
    Handshake,
    encode_frame,
    encode_handshake,
    encode_messages,
    proof,
)
from rmqc.raft._types import Entry, Message, MessageType

OLD = "old-secret-0123456789abcdef"
NEW = "new-secret-fedcba9876543210"


def test_secret_file_is_reloaded_when_changed_and_a_broken_change_keeps_the_old(tmp_path: Path) -> None:
    path = tmp_path / "peer.secret"
    path.write_text(OLD + "\n")
    os.chmod(path, 0o600)
    secrets = PeerSecrets(str(path))
    assert secrets.keys() == (OLD.encode(),)
    path.write_text(f"{NEW}\n{OLD}\n")
    assert secrets.keys() == (NEW.encode(), OLD.encode())
    path.write_text("too short\n")  # an operator's typo must not lock the cluster's links out
    assert secrets.keys() == (NEW.encode(), OLD.encode())
    path.unlink()
    assert secrets.keys() == (NEW.encode(), OLD.encode())
    with pytest.raises(ConfigError, match="peer_secret_file: cannot read"):
        PeerSecrets(str(path))


def remote_peers() -> str:
    return "n0-10.0.0.1:9878;n1-10.0.0.2:9878;n2-10.0.0.3:9878"


def test_a_node_with_remote_peers_and_no_secret_refuses_to_start_and_says_how(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"peer_secret_file: not set, and peer n0 at 10.0.0.1:9878 is not on "
                                          r"loopback.*head -c 32 /dev/urandom.*allow_insecure_peers"):
        NodeConfig(node_id="n0", peers=parse_peers(remote_peers()))
    NodeConfig(node_id="n0", peers=parse_peers(remote_peers()), allow_insecure_peers=True)
    NodeConfig(node_id="n0", peers=parse_peers(remote_peers()), peer_secret_file=str(tmp_path / "s"))
    # loopback clusters (and a single node) start as before, without any secret
    NodeConfig(node_id="n0", peers=parse_peers("n0-127.0.0.1:1;n1-127.0.0.2:2;n2-127.255.0.3:3;n3-localhost:4"))
    assert is_loopback("::1") and is_loopback("[::1]") and not is_loopback("10.0.0.1")
    with pytest.raises(ConfigError, match=r"peer n1 at db.internal:9878"):
        NodeConfig(node_id="n0", peers=parse_peers("n0-127.0.0.1:1;n1-db.internal:9878"))


def write_secret(tmp_path: Path, name: str, *lines: str) -> str:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    os.chmod(path, 0o600)
    return str(path)


def configs(tmp_path: Path, lines_a: tuple[str, ...], lines_b: tuple[str, ...]) -> tuple[NodeConfig, NodeConfig]:
    port_a, port_b = free_ports(2)
    peers = parse_peers(f"n0-127.0.0.1:{port_a};n1-127.0.0.1:{port_b}")
    return (NodeConfig(node_id="n0", peers=peers, peer_secret_file=write_secret(tmp_path, "a", *lines_a)),
            NodeConfig(node_id="n1", peers=peers, peer_secret_file=write_secret(tmp_path, "b", *lines_b)))


async def linked_both_ways(tmp_path: Path, lines_a: tuple[str, ...], lines_b: tuple[str, ...]) -> bool:
    """Start two nodes; True if a heartbeat crosses each way, False if both refuse each other."""
    config_a, config_b = configs(tmp_path, lines_a, lines_b)
    a, b = Recorder(), Recorder()
    async with trio.open_nursery() as nursery:
        links_a = await start_node(nursery, config_a, a)
        links_b = await start_node(nursery, config_b, b)
        await wait_until(lambda: links_a.refused_peers + links_b.refused_peers >= 2
                         or ("n1" in links_a.connected and "n0" in links_b.connected), what="links settle")
        if links_a.refused_peers or links_b.refused_peers:
            await wait_until(lambda: links_a.refused_peers >= 1 and links_b.refused_peers >= 1,
                             what="both sides refused")
            assert a.messages == [] and b.messages == []
            nursery.cancel_scope.cancel()
            return False
        links_a.send_messages([Message(type=MessageType.HEARTBEAT, to="n1", frm="n0", term=3)])
        links_b.send_messages([Message(type=MessageType.HEARTBEAT, to="n0", frm="n1", term=3)])
        await wait_until(lambda: a.messages and b.messages, what="a heartbeat each way")
        nursery.cancel_scope.cancel()
    return True


async def test_matching_secrets_link_and_different_ones_are_refused_both_ways(tmp_path: Path) -> None:
    assert await linked_both_ways(tmp_path, (OLD,), (OLD,))
    assert not await linked_both_ways(tmp_path, (OLD,), (NEW,))


async def test_rotation_every_step_keeps_the_links_up(tmp_path: Path) -> None:
    """docs/security.md's rotation: add the new secret second, move it first, drop the old. Nodes
    change one at a time, so each step is a pair of neighbouring stages."""
    stages = [(OLD,), (OLD, NEW), (NEW, OLD), (NEW,)]
    for before, after in itertools.pairwise(stages):
        assert await linked_both_ways(tmp_path, before, after), (before, after)
    assert not await linked_both_ways(tmp_path, (OLD,), (NEW,))  # skipping a step would split the cluster


class Forger:
    """A raw connection speaking the peer protocol by hand, as an attacker would."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream

    async def hello(self, claimed: str, group: str = "rmqc", receiver: str = "n0") -> tuple[bytes, bytes]:
        nonce = b"\x01" * 32
        await self.stream.send_all(encode_handshake(Handshake(claimed, group, receiver, nonce)))
        challenge = b""
        while len(challenge) < 64:
            chunk = await self.stream.receive_some(64 - len(challenge))
            assert chunk, "closed before the challenge"
            challenge += chunk
        return nonce, challenge[:32]

    async def closed_by_server(self) -> bool:
        try:
            with trio.fail_after(_peer_auth.HANDSHAKE_TIMEOUT_S + 5):
                while await self.stream.receive_some(4096):
                    pass
        except trio.BrokenResourceError:
            pass  # reset: refused just the same
        finally:
            await self.stream.aclose()
        return True


def higher_term_vote_and_append(claimed: str) -> bytes:
    vote = Message(type=MessageType.VOTE, to="n0", frm=claimed, term=99, log_term=99, index=99)
    append = Message(type=MessageType.APP, to="n0", frm=claimed, term=99, log_term=0, index=0, commit=1,
                     entries=(Entry(1, 99, data=b"forged"),))
    return encode_frame(FrameKind.RAFT, encode_messages([vote, append]))


async def start_secured_n0(nursery: trio.Nursery, tmp_path: Path) -> tuple[PeerLinks, Recorder, NodeConfig]:
    config, _ = configs(tmp_path, (OLD,), (OLD,))
    recorder = Recorder()
    return await start_node(nursery, config, recorder), recorder, config


async def test_forged_handshakes_are_refused_and_nothing_reaches_the_handler(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        links, recorder, config = await start_secured_n0(nursery, tmp_path)

        async def forger() -> Forger:
            return Forger(await trio.open_tcp_stream("127.0.0.1", config.self_peer.port))

        # 1. a member's id and a made-up proof, frames right behind it
        attacker = await forger()
        await attacker.hello("n1")
        await attacker.stream.send_all(b"\x00" * PROOF_BYTES + higher_term_vote_and_append("n1"))
        assert await attacker.closed_by_server()
        # 2. a genuine member's proof, recorded off the wire and replayed: the acceptor's nonce is new
        genuine = await forger()
        dialer_nonce, acceptor_nonce = await genuine.hello("n1")
        recorded = proof(OLD.encode(), b"rmqc-peer-dialer", "rmqc", "n1", "n0", dialer_nonce, acceptor_nonce)
        await genuine.stream.send_all(recorded)
        await genuine.stream.aclose()
        replay = await forger()
        await replay.hello("n1")  # the same dialer nonce as the genuine exchange: the best case for a replay
        await replay.stream.send_all(recorded + higher_term_vote_and_append("n1"))
        assert await replay.closed_by_server()
        # 3. even with the secret: an id that is not a member, another group, or our own id
        for claimed, group in (("n9", "rmqc"), ("n1", "other"), ("n0", "rmqc")):
            stranger = await forger()
            await stranger.stream.send_all(encode_handshake(Handshake(claimed, group, "n0", b"\x02" * 32)))
            assert await stranger.closed_by_server()
        assert recorder.messages == []
        assert links.refused_peers == 5
        nursery.cancel_scope.cancel()


async def test_with_the_secret_a_member_cannot_speak_for_another(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        _links, recorder, config = await start_secured_n0(nursery, tmp_path)
        member = Forger(await trio.open_tcp_stream("127.0.0.1", config.self_peer.port))
        dialer_nonce, acceptor_nonce = await member.hello("n1")
        good = proof(OLD.encode(), b"rmqc-peer-dialer", "rmqc", "n1", "n0", dialer_nonce, acceptor_nonce)
        heartbeat = Message(type=MessageType.HEARTBEAT, to="n0", frm="n1", term=1)
        await member.stream.send_all(good + encode_frame(FrameKind.RAFT, encode_messages([heartbeat])))
        await wait_until(lambda: len(recorder.messages) == 1, what="the proven member's heartbeat")
        await member.stream.send_all(higher_term_vote_and_append("n2"))  # frm n2 on n1's link
        assert await member.closed_by_server()
        assert recorder.messages == [("n1", heartbeat)]
        nursery.cancel_scope.cancel()


async def test_a_stalled_or_oversized_handshake_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_peer_auth, "HANDSHAKE_TIMEOUT_S", 0.3)
    async with trio.open_nursery() as nursery:
        links, recorder, config = await start_secured_n0(nursery, tmp_path)
        stalled = Forger(await trio.open_tcp_stream("127.0.0.1", config.self_peer.port))
        magic_and_version = b"RMQP" + struct.pack(">H", PEER_PROTOCOL_VERSION)
        await stalled.stream.send_all(magic_and_version)  # and then nothing (slowloris)
        assert await stalled.closed_by_server()
        silent_after_challenge = Forger(await trio.open_tcp_stream("127.0.0.1", config.self_peer.port))
        await silent_after_challenge.hello("n1")
        assert await silent_after_challenge.closed_by_server()
        huge = Forger(await trio.open_tcp_stream("127.0.0.1", config.self_peer.port))
        await huge.stream.send_all(magic_and_version + struct.pack(">B", 255) + b"x" * 255 + b"\xff" * 4096)
        assert await huge.closed_by_server()
        assert links.refused_peers == 3 and recorder.messages == []
        nursery.cancel_scope.cancel()


async def test_a_dialer_refuses_an_acceptor_that_cannot_prove_the_secret(tmp_path: Path) -> None:
    """Mutual: a node never sends its Raft traffic to an impostor listening on a member's address."""
    config_a, config_b = configs(tmp_path, (OLD,), (NEW,))
    impostor_saw = bytearray()
    hung_up = trio.Event()

    async def impostor(stream: trio.SocketStream) -> None:
        impostor_saw.extend(await stream.receive_some(4096))
        await stream.send_all(os.urandom(64))  # a nonce and a guessed proof
        try:
            while chunk := await stream.receive_some(4096):
                impostor_saw.extend(chunk)
        except trio.BrokenResourceError:
            pass
        hung_up.set()

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(config_b.self_peer.port, host="127.0.0.1")
        nursery.start_soon(trio.serve_listeners, impostor, listeners)
        links_a = PeerLinks(config_a, Recorder(), random.Random(1))
        await nursery.start(links_a.run)
        links_a.send_messages([Message(type=MessageType.APP, to="n1", frm="n0", term=5,
                                       entries=(Entry(1, 5, data=b"secret-data"),))])
        with trio.fail_after(10):
            await hung_up.wait()  # n0 hung up on the impostor after its failed proof
        assert impostor_saw.startswith(b"RMQP") and b"secret-data" not in impostor_saw
        assert links_a.connected == set()
        nursery.cancel_scope.cancel()
