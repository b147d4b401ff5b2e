"""Peer authentication: the cluster's shared secret, proven both ways by HMAC challenge-response.

    dialer   -> acceptor  handshake: "RMQP" | version | dialer id | group | acceptor id | dialer nonce
    acceptor -> dialer    acceptor nonce (32 bytes) | acceptor proof (32 bytes)
    dialer   -> acceptor  dialer proof (32 bytes)

    proof = HMAC-SHA256(secret, role | version | group | dialer id | acceptor id | both nonces)

Both nonces are fresh random bytes, so a recorded exchange proves nothing the next time; the role
label keeps an acceptor's proof (which anyone who connects can obtain for a nonce of their choosing)
from ever passing as a dialer's. The proof binds the ids and the group, so a member's secret cannot
be used to speak as another id in this exchange. Until the dialer's proof has been checked, nothing
it sent is decoded, let alone handed to the Raft core.

Without a peer secret (a loopback cluster, or allow_insecure_peers) the same exchange runs with an
empty key: it then proves nothing, but one code path serves both and a node with a secret refuses a
node without one.

This authenticates the start of a connection against anyone who can merely reach the port; an
attacker on the path who can inject into an established TCP stream is beyond it (docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import stat
import struct
from collections.abc import Callable

import trio

from rmqc.errors import ConfigError, RmqcError
from rmqc.raft._types import Message

from ._config import NodeConfig, Peer
from ._peer_codec import (
    MAX_HANDSHAKE_BYTES,
    NONCE_BYTES,
    PEER_PROTOCOL_VERSION,
    Handshake,
    PeerProtocolError,
    decode_handshake,
    encode_handshake,
)
from ._watched_file import Stamp, current_stamp, read_watched_text, stamp_of

log = logging.getLogger("rmqc.node.peer_auth")

PROOF_BYTES = hashlib.sha256().digest_size
CHALLENGE_BYTES = NONCE_BYTES + PROOF_BYTES
# A member answers within milliseconds; whoever holds a connection open mid-handshake longer than
# this is stalling (slowloris) and is cut off.
HANDSHAKE_TIMEOUT_S = 5.0
# A secret file is a few lines; a large file is a wrong path, not a secret.
MAX_SECRET_FILE_BYTES = 64 * 1024
MAX_SECRETS = 16
# 16 bytes = 128 bits: below this a secret can be guessed offline from one recorded exchange.
MIN_SECRET_BYTES = 16
_DIALER, _ACCEPTOR = b"rmqc-peer-dialer", b"rmqc-peer-acceptor"


class PeerAuthError(RmqcError):
    """A peer connection refused during the handshake; the message says why, never a secret."""


def proof(key: bytes, role: bytes, group: str, dialer_id: str, acceptor_id: str,
          dialer_nonce: bytes, acceptor_nonce: bytes) -> bytes:
    """HMAC-SHA256 over every field the exchange binds, each length-prefixed so no two field
    sequences share a transcript."""
    parts = [role, struct.pack(">H", PEER_PROTOCOL_VERSION)]
    for field in (group.encode(), dialer_id.encode(), acceptor_id.encode(), dialer_nonce, acceptor_nonce):
        parts.append(struct.pack(">I", len(field)) + field)
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def matches_any(keys: tuple[bytes, ...], expected_for: Callable[[bytes], bytes], received: bytes) -> bool:
    """Whether `received` is the proof under one of `keys`; every key is tried (no early exit on a
    match), each comparison in constant time, so timing says nothing about which key or byte."""
    found = False
    for key in keys:
        found |= hmac.compare_digest(expected_for(key), received)
    return found


def parse_secrets(text: str) -> tuple[bytes, ...]:
    """Secrets of a peer_secret_file: one per line, `#` comments and blank lines skipped."""
    keys = tuple(line.strip().encode() for line in text.splitlines()
                 if line.strip() and not line.strip().startswith("#"))
    if not keys:
        raise ValueError("no secret in it")
    if len(keys) > MAX_SECRETS:
        raise ValueError(f"{len(keys)} secrets; at most {MAX_SECRETS} (one signs, the rest verify)")
    short = [number for number, key in enumerate(keys, 1) if len(key) < MIN_SECRET_BYTES]
    if short:
        raise ValueError(f"secret {short[0]} is shorter than {MIN_SECRET_BYTES} bytes")
    return keys


class PeerSecrets:
    """The keys of `peer_secret_file`: the first signs, every one verifies, so a secret is rotated
    by adding the new one second, then moving it first, then dropping the old (docs/security.md).
    The file is re-read when it changes; a changed file that is unusable keeps the previous keys."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._stamp: Stamp | None = None
        self._keys: tuple[bytes, ...] = (b"",)
        if path:
            self._keys = self._read()

    @property
    def enabled(self) -> bool:
        return bool(self._path)

    def keys(self) -> tuple[bytes, ...]:
        if self._path and self._changed():
            try:
                self._keys = self._read()
                log.info("peer secrets reloaded from %s (%d)", self._path, len(self._keys))
            except ConfigError as error:
                log.error("%s; keeping the previous peer secrets", error)
        return self._keys

    def _changed(self) -> bool:
        stamp = current_stamp(self._path)
        return stamp is None or stamp != self._stamp

    def _read(self) -> tuple[bytes, ...]:
        text, status = read_watched_text("peer_secret_file", self._path, MAX_SECRET_FILE_BYTES)
        try:
            keys = parse_secrets(text)
        except ValueError as error:
            raise ConfigError(f"peer_secret_file: {self._path}: {error}") from error
        if status.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("peer_secret_file %s is readable by other users (chmod 600 it)", self._path)
        self._stamp = stamp_of(status)
        return keys


async def dial(stream: trio.abc.Stream, config: NodeConfig, secrets_: PeerSecrets, peer: Peer) -> bytes:
    """The dialer's side: returns bytes that arrived after the challenge (frames to decode)."""
    dialer_nonce = secrets.token_bytes(NONCE_BYTES)
    hello = Handshake(config.node_id, config.group, peer.id, dialer_nonce)
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            await stream.send_all(encode_handshake(hello))
            received = await _receive_exactly(stream, CHALLENGE_BYTES, b"")
            acceptor_nonce, acceptor_proof = received[:NONCE_BYTES], received[NONCE_BYTES:CHALLENGE_BYTES]
            keys = secrets_.keys()

            def expected(key: bytes) -> bytes:
                return proof(key, _ACCEPTOR, config.group, config.node_id, peer.id, dialer_nonce, acceptor_nonce)

            if not matches_any(keys, expected, acceptor_proof):
                raise PeerAuthError(f"peer {peer.id} at {peer.address} failed the peer secret proof "
                                    "(a different or missing peer_secret_file there, or not a member)")
            await stream.send_all(proof(keys[0], _DIALER, config.group, config.node_id, peer.id,
                                        dialer_nonce, acceptor_nonce))
    except trio.TooSlowError:
        raise PeerAuthError(f"peer {peer.id} at {peer.address}: handshake not completed within "
                            f"{HANDSHAKE_TIMEOUT_S:g} s") from None
    return received[CHALLENGE_BYTES:]


async def accept(stream: trio.abc.Stream, first_bytes: bytes, config: NodeConfig, secrets_: PeerSecrets,
                 members: frozenset[str] | None) -> tuple[str, bytes]:
    """The acceptor's side: the proven peer id and the bytes after its proof (its first frames).
    `members`: the ids accepted (the applied membership but this node); None: any id of the group
    (a joining node, which learns the membership from the leader that dials it)."""
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT_S):
            hello, rest = await _read_hello(stream, first_bytes)
            _check_claim(hello, config, members)
            acceptor_nonce = secrets.token_bytes(NONCE_BYTES)
            keys = secrets_.keys()

            def expected(role: bytes, key: bytes) -> bytes:
                return proof(key, role, config.group, hello.sender_id, config.node_id, hello.nonce, acceptor_nonce)

            await stream.send_all(acceptor_nonce + expected(_ACCEPTOR, keys[0]))
            received = await _receive_exactly(stream, PROOF_BYTES, rest)
    except trio.TooSlowError:
        raise PeerAuthError(f"handshake not completed within {HANDSHAKE_TIMEOUT_S:g} s") from None
    if not matches_any(keys, lambda key: expected(_DIALER, key), received[:PROOF_BYTES]):
        raise PeerAuthError(f"claims to be {hello.sender_id} but failed the peer secret proof")
    return hello.sender_id, received[PROOF_BYTES:]


def check_senders(messages: list[Message], sender: str) -> list[Message]:
    """The link proved `sender`; a Raft message on it that names another sender is a lie (it would
    let one member speak for another), so the whole connection is dropped."""
    for message in messages:
        if message.frm != sender:
            raise PeerProtocolError(f"raft message from {sender} claims to be from {message.frm!r}")
    return messages


def _check_claim(hello: Handshake, config: NodeConfig, members: frozenset[str] | None) -> None:
    if hello.group != config.group:
        raise PeerAuthError(f"claims {hello.sender_id} of group {hello.group!r}; we are group {config.group!r}")
    if hello.sender_id == config.node_id or (members is not None and hello.sender_id not in members):
        known = ", ".join(sorted(members or ()))
        raise PeerAuthError(f"claims id {hello.sender_id!r}, which is not another member ({known or 'none'})")
    if hello.receiver_id != config.node_id:
        raise PeerAuthError(f"{hello.sender_id} dialled {hello.receiver_id!r}, but this is {config.node_id!r}")


async def _read_hello(stream: trio.abc.Stream, first_bytes: bytes) -> tuple[Handshake, bytes]:
    buffer = bytearray(first_bytes)
    while True:
        decoded = decode_handshake(buffer)
        if decoded is not None:
            hello, length = decoded
            return hello, bytes(buffer[length:])
        if len(buffer) > MAX_HANDSHAKE_BYTES:
            raise PeerAuthError(f"handshake longer than {MAX_HANDSHAKE_BYTES} bytes")
        buffer += await _receive(stream, MAX_HANDSHAKE_BYTES)


async def _receive_exactly(stream: trio.abc.Stream, count: int, already: bytes) -> bytes:
    """At least `count` bytes (those past it belong to what follows the handshake)."""
    data = bytearray(already)
    while len(data) < count:
        data += await _receive(stream, 65536)
    return bytes(data)


async def _receive(stream: trio.abc.Stream, max_bytes: int) -> bytes:
    chunk = await stream.receive_some(max_bytes)
    if not chunk:
        raise PeerAuthError("connection closed during the handshake (by the other node: see its log; "
                            "or by something between, a proxy or a firewall)")
    return chunk
