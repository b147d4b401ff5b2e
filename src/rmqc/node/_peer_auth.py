"""Peer authentication over a stream: the exchange of rmqc.peerwire (its messages and decisions)
moved over the socket, with fresh nonces and a time bound; and the peer secret file, re-read when
it changes."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import trio

from rmqc.config import NodeConfig, Peer
from rmqc.peerwire import (
    MAX_HANDSHAKE_BYTES,
    NONCE_BYTES,
    AcceptorExchange,
    DialerExchange,
    PeerAuthError,
    parse_secrets,
)

from ._watched_file import WatchedFile

# A member answers within milliseconds; whoever holds a connection open mid-handshake longer than
# this is stalling (slowloris) and is cut off.
HANDSHAKE_TIMEOUT_S = 5.0
# A secret file is a few lines; a large file is a wrong path, not a secret.
MAX_SECRET_FILE_BYTES = 64 * 1024
# The challenge and the proof are 64 and 32 bytes: one read takes them (and frames right after).
_RECEIVE_BYTES = 65536


class PeerSecrets:
    """The keys of `peer_secret_file`: the first signs, every one verifies, so a secret is rotated
    by adding the new one second, then moving it first, then dropping the old (docs/security.md).
    The file is re-read when it changes; a changed file that is unusable keeps the previous keys
    (WatchedFile)."""

    def __init__(self, path: str) -> None:
        self._file = WatchedFile("peer_secret_file", path, MAX_SECRET_FILE_BYTES, parse_secrets,
                                 lambda keys: f"{len(keys)} secrets", private=True) if path else None

    def keys(self) -> tuple[bytes, ...]:
        return (b"",) if self._file is None else self._file.content()


async def dial(stream: trio.abc.Stream, config: NodeConfig, secrets_: PeerSecrets, peer: Peer) -> bytes:
    """The dialer's side: returns bytes that arrived after the challenge (frames to decode)."""
    exchange = DialerExchange(config.group, config.node_id, peer.id, peer.address,
                              secrets.token_bytes(NONCE_BYTES))
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await stream.send_all(exchange.hello())
            await _receive_until(stream, exchange.take_challenge, b"", _RECEIVE_BYTES)
            await stream.send_all(exchange.answer(secrets_.keys()))
    except trio.TooSlowError:
        raise PeerAuthError(f"peer {peer.id} at {peer.address}: handshake not completed within "
                            f"{HANDSHAKE_TIMEOUT_S:g} s") from None
    return exchange.rest


async def accept(stream: trio.abc.Stream, first_bytes: bytes, config: NodeConfig, secrets_: PeerSecrets,
                 members: frozenset[str] | None) -> tuple[str, bytes]:
    """The acceptor's side: the proven peer id and the bytes after its proof (its first frames).
    `members`: the ids accepted (the applied membership but this node); None: any id of the group
    (a joining node, which learns the membership from the leader that dials it)."""
    exchange = AcceptorExchange(config.group, config.node_id, members)
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await _receive_until(stream, exchange.take_hello, first_bytes, MAX_HANDSHAKE_BYTES)
            await stream.send_all(exchange.challenge(secrets.token_bytes(NONCE_BYTES), secrets_.keys()))
            await _receive_until(stream, exchange.take_proof, b"", _RECEIVE_BYTES)
    except trio.TooSlowError:
        raise PeerAuthError(f"handshake not completed within {HANDSHAKE_TIMEOUT_S:g} s") from None
    return exchange.finish()


async def _receive_until(stream: trio.abc.Stream, complete_with: Callable[[bytes], bool], first: bytes,
                         max_bytes: int) -> None:
    """Feed `first`, then what the stream brings, to `complete_with` until it says the message is whole."""
    data = first
    while not complete_with(data):
        data = bytes(await stream.receive_some(max_bytes))  # a handshake's few hundred bytes
        if not data:
            raise PeerAuthError("connection closed during the handshake (by the other node: see its log; "
                                "or by something between, a proxy or a firewall)")
