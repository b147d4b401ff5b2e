"""Errors of the controller client; all derive from rmqc.errors so callers can tell them from bugs."""

from __future__ import annotations

from rmqc.errors import BoundExceeded, RmqcError

__all__ = [
    "ClientClosed",
    "ClientError",
    "ConnectionLost",
    "NoLeaderError",
    "NotLeaderError",
    "RequestTimeout",
    "RetriesExhausted",
    "TooManyConnections",
    "TooManyInFlight",
]


class ClientError(RmqcError):
    """A request the client could not complete (every client error derives from this)."""


class ClientClosed(ClientError):
    """The client is used outside its `async with` block."""


class RequestTimeout(ClientError, TimeoutError):
    """No answer within the request's timeout (retries and leader discovery included)."""


class ConnectionLost(ClientError):
    """The connection could not be opened, or closed before the answer arrived."""


class NoLeaderError(ClientError):
    """No controller named a leader in answer to CONTROLLER_GET_METADATA_INFO (1005)."""


class NotLeaderError(ClientError):
    """The node taken for the leader answered CONTROLLER_NOT_LEADER (2007)."""


class TooManyInFlight(ClientError, BoundExceeded):
    """More requests at once than `max_in_flight` allows."""


class TooManyConnections(ClientError, BoundExceeded):
    """More controller addresses in use at once than the client keeps connections to."""


class RetriesExhausted(ClientError, BoundExceeded):
    """Every attempt failed; `last_error` says how the last one did."""

    def __init__(self, message: str, last_error: Exception) -> None:
        super().__init__(f"{message}: {last_error}")
        self.last_error = last_error
