"""Peer authentication's messages and decisions: the cluster's shared secret, proven both ways by
HMAC challenge-response. Bytes in, bytes out; the shell (node/_peer_auth.py) moves them over the
socket, draws the nonces and bounds the exchange in time.

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
import struct
from collections.abc import Callable

from rmqc.errors import RmqcError
from rmqc.raft import Message

from ._codec import (
    MAX_HANDSHAKE_BYTES,
    NONCE_BYTES,
    PEER_PROTOCOL_VERSION,
    Handshake,
    PeerProtocolError,
    decode_handshake,
    encode_handshake,
)

PROOF_BYTES = hashlib.sha256().digest_size
CHALLENGE_BYTES = NONCE_BYTES + PROOF_BYTES
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


def check_senders(messages: list[Message], sender: str) -> list[Message]:
    """The link proved `sender`; a Raft message on it that names another sender is a lie (it would
    let one member speak for another), so the whole connection is dropped."""
    for message in messages:
        if message.frm != sender:
            raise PeerProtocolError(f"raft message from {sender} claims to be from {message.frm!r}")
    return messages


class DialerExchange:
    """The dialer's side: send `hello()`, feed what comes back to `take_challenge` until it is whole,
    then send `answer(keys)` (which first checks the acceptor's proof). `rest` is what followed the
    challenge: the first frames of the connection. The first of `keys` signs, every one verifies."""

    def __init__(self, group: str, dialer_id: str, acceptor_id: str, acceptor_address: str,
                 dialer_nonce: bytes) -> None:
        self._hello = Handshake(dialer_id, group, acceptor_id, dialer_nonce)
        self._acceptor_address = acceptor_address
        self._received = bytearray()

    def hello(self) -> bytes:
        return encode_handshake(self._hello)

    def take_challenge(self, data: bytes) -> bool:
        """Whether the acceptor's nonce and proof have arrived, with `data`."""
        self._received += data
        return len(self._received) >= CHALLENGE_BYTES

    @property
    def rest(self) -> bytes:
        return bytes(self._received[CHALLENGE_BYTES:])

    def answer(self, keys: tuple[bytes, ...]) -> bytes:
        hello = self._hello
        acceptor_nonce = bytes(self._received[:NONCE_BYTES])

        def expected(role: bytes, key: bytes) -> bytes:
            return proof(key, role, hello.group, hello.sender_id, hello.receiver_id, hello.nonce, acceptor_nonce)

        acceptor_proof = bytes(self._received[NONCE_BYTES:CHALLENGE_BYTES])
        if not matches_any(keys, lambda key: expected(_ACCEPTOR, key), acceptor_proof):
            raise PeerAuthError(f"peer {hello.receiver_id} at {self._acceptor_address} failed the peer secret "
                                "proof (a different or missing peer_secret_file there, or not a member)")
        return expected(_DIALER, keys[0])


class AcceptorExchange:
    """The acceptor's side: feed bytes to `take_hello` until it returns True (the dialer's claim is
    then checked), send `challenge(nonce, keys)`, feed bytes to `take_proof` until it returns True,
    then `finish()` checks the dialer's proof and names the proven sender and the bytes after it.
    `members`: the ids accepted (the applied membership but this node); None: any id of the group
    (a joining node, which learns the membership from the leader that dials it)."""

    def __init__(self, group: str, acceptor_id: str, members: frozenset[str] | None) -> None:
        self._group = group
        self._acceptor_id = acceptor_id
        self._members = members
        self._received = bytearray()
        self._hello: Handshake | None = None
        self._acceptor_nonce = b""
        self._keys: tuple[bytes, ...] = ()

    def take_hello(self, data: bytes) -> bool:
        self._received += data
        decoded = decode_handshake(self._received)
        if decoded is None:
            if len(self._received) > MAX_HANDSHAKE_BYTES:
                raise PeerAuthError(f"handshake longer than {MAX_HANDSHAKE_BYTES} bytes")
            return False
        self._hello, length = decoded
        del self._received[:length]
        self._check_claim(self._hello)
        return True

    def challenge(self, acceptor_nonce: bytes, keys: tuple[bytes, ...]) -> bytes:
        self._acceptor_nonce, self._keys = acceptor_nonce, keys
        return acceptor_nonce + self._expected(_ACCEPTOR, keys[0])

    def take_proof(self, data: bytes) -> bool:
        self._received += data
        return len(self._received) >= PROOF_BYTES

    def finish(self) -> tuple[str, bytes]:
        hello = self._claimed_hello()
        if not self._keys:
            raise PeerAuthError("the exchange sent no challenge yet (challenge first)")
        if not matches_any(self._keys, lambda key: self._expected(_DIALER, key), bytes(self._received[:PROOF_BYTES])):
            raise PeerAuthError(f"claims to be {hello.sender_id} but failed the peer secret proof")
        return hello.sender_id, bytes(self._received[PROOF_BYTES:])

    def _expected(self, role: bytes, key: bytes) -> bytes:
        hello = self._claimed_hello()
        return proof(key, role, self._group, hello.sender_id, self._acceptor_id, hello.nonce, self._acceptor_nonce)

    def _claimed_hello(self) -> Handshake:
        if self._hello is None:
            raise PeerAuthError("the exchange has no handshake yet (take_hello first)")
        return self._hello

    def _check_claim(self, hello: Handshake) -> None:
        if hello.group != self._group:
            raise PeerAuthError(f"claims {hello.sender_id} of group {hello.group!r}; we are group {self._group!r}")
        members = self._members
        if hello.sender_id == self._acceptor_id or (members is not None and hello.sender_id not in members):
            known = ", ".join(sorted(members or ()))
            raise PeerAuthError(f"claims id {hello.sender_id!r}, which is not another member ({known or 'none'})")
        if hello.receiver_id != self._acceptor_id:
            raise PeerAuthError(f"{hello.sender_id} dialled {hello.receiver_id!r}, but this is {self._acceptor_id!r}")
