"""The one error hierarchy of rmqc.

Every error rmqc raises on purpose derives from `RmqcError`, so callers (the server, the CLI) can tell
our named failures from bugs. Packages subclass the branch that fits; each class says what went wrong
in its message, with the index, field or bound involved.
"""


class RmqcError(Exception):
    """Base of every error rmqc raises on purpose."""


class BoundExceeded(RmqcError):
    """A configured bound (frame size, queue length, in-flight window, retries) was exceeded."""


class ProtocolError(RmqcError):
    """Bytes from a peer could not be decoded; the message names what was wrong and where."""


class RaftError(RmqcError):
    """Errors raised by the Raft core."""


class ProposalDropped(RaftError):
    """A proposal was refused (no leader, transfer in progress, uncommitted-bytes bound exceeded)."""


class StorageError(RmqcError):
    """Errors of the log and snapshot store."""


class CompactedError(StorageError):
    """The requested index lies behind the snapshot: the entries were compacted away."""


class UnavailableError(StorageError):
    """The requested index lies beyond the last stored entry."""


class SnapshotOutOfDateError(StorageError):
    """The snapshot offered is older than the one already stored."""


class CorruptionError(StorageError):
    """Stored data failed a check (checksum, index gap, term going backwards)."""

    def __init__(self, index: int, what: str) -> None:
        super().__init__(f"corrupt log at index {index}: {what}")
        self.index = index
        self.what = what

    def __reduce__(self) -> tuple[type, tuple[int, str]]:  # pickled across processes (storage's verify)
        return type(self), (self.index, self.what)


class ConfigError(RmqcError):
    """Configuration that cannot be used; the message names the option and the value."""
