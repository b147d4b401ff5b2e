"""Errors of the controller state machine."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, ProtocolError


class CommandDecodeError(ProtocolError):
    """A log entry payload or a snapshot could not be decoded into commands / state.

    The message names what was wrong (which command position, which field), so a corrupt or
    foreign entry found by `rmqc log dump` or on apply is reported, never half-applied.
    """


class TooManyCommands(BoundExceeded):
    """More commands than MAX_COMMANDS_PER_ENTRY were put into one log entry."""
