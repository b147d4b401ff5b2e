"""What a new connection to the port is, told from its first bytes (sans-IO).

One port serves the members' peer links, RocketMQ remoting clients and, unless tls_mode is disabled,
TLS connections carrying either (RocketMQ's TlsMode: DISABLED, PERMISSIVE, ENFORCING). A connection
whose first four bytes are the peer magic is a peer; anything else is a remoting stream. A TLS
connection starts with a handshake record (first byte 0x16); no remoting frame length and no peer
magic does (that would be a frame of over 369 MB, above every frame bound), so in permissive mode
the first byte tells TLS from plain, as RocketMQ's TlsModeHandler does, and the plaintext's first
bytes are told apart in turn. Enforcing refuses plain connections; disabled treats every connection
as plain.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["FIRST_BYTES_TIMEOUT_S", "TLS_HANDSHAKE_RECORD", "Opening", "classify_opening", "first_bytes_timeout_s"]

TLS_HANDSHAKE_RECORD = 0x16  # the content type byte of a TLS record that opens a handshake
# Bytes that must arrive before we can tell a peer from a broker; a silent client is dropped after.
FIRST_BYTES_TIMEOUT_S = 30.0


class Opening(Enum):
    PEER = "peer"
    REMOTING = "remoting"
    TLS = "tls"  # unwrap it, then classify the plaintext's first bytes
    PLAIN_REFUSED = "plain refused"  # not TLS while tls_mode is enforcing


def classify_opening(first: bytes, peer_magic: bytes, tls_mode: str = "disabled") -> Opening:
    """What the connection opening with `first` (at least `len(peer_magic)` bytes) is. The peer
    magic is passed in rather than imported: rmqc.peerwire loads the Raft core, which the clients
    of this package do not need. The plaintext inside TLS is classified with tls_mode disabled."""
    if tls_mode != "disabled":
        if first[0] == TLS_HANDSHAKE_RECORD:
            return Opening.TLS
        if tls_mode == "enforcing":
            return Opening.PLAIN_REFUSED
    return Opening.PEER if first[: len(peer_magic)] == peer_magic else Opening.REMOTING


def first_bytes_timeout_s(idle_timeout_s: float) -> float:
    """How long a new connection may take to send its first bytes: idle_timeout_ms bounds it too."""
    return min(FIRST_BYTES_TIMEOUT_S, idle_timeout_s)
