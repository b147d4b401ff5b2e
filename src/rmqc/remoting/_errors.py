"""Errors of the remoting codec: what was wrong with the peer's bytes, and where."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, ProtocolError

__all__ = ["FrameTooLarge", "RemotingProtocolError"]


class RemotingProtocolError(ProtocolError):
    """Bytes that are not a valid remoting frame or body.

    `offset` is the byte offset in the decoded input (for a FrameDecoder: in the whole stream fed so far;
    for a body: in the body) where the problem was found, or None when no offset applies (encoding our
    own commands). After one of these the connection is to be closed, as Java's NettyDecoder does.
    """

    def __init__(self, what: str, offset: int | None = None) -> None:
        where = "" if offset is None else f" at byte offset {offset}"
        super().__init__(f"{what}{where}")
        self.what = what
        self.offset = offset


class FrameTooLarge(RemotingProtocolError, BoundExceeded):
    """A frame longer than the configured maximum (16 MiB by default, Java's frameMaxLength)."""
