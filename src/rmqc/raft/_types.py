"""Value types shared by the Raft core, its storages and the peer transport.

Node ids are strings (`"n0"`, as in the Java controller's `controllerDLegerPeers`). Indexes and terms
start at 1; index 0 / term 0 mean "nothing". These types are frozen so that a Ready handed to the
application cannot be changed under the core's feet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from rmqc._hot import hot_record


class EntryType(IntEnum):
    NORMAL = 0  # application payload; an empty NORMAL entry is the leader's no-op
    CONF_CHANGE = 1  # payload is an encoded ConfChange


@hot_record
class Entry:
    index: int
    term: int
    type: EntryType = EntryType.NORMAL
    data: bytes = b""

    def size_bytes(self) -> int:
        """Approximate wire size, used by the byte bounds (batches, in-flight, uncommitted)."""
        return len(self.data) + 24


@hot_record
class HardState:
    term: int = 0
    vote: str | None = None
    commit: int = 0


@dataclass(frozen=True, slots=True)
class ConfState:
    voters: tuple[str, ...] = ()
    learners: tuple[str, ...] = ()
    # The application's address book of the members, sorted (id, "host:port") pairs. The core
    # ignores it; it rides with the membership into storage and snapshots so that both always
    # name the same members (rmqc.replica._membership keeps it).
    addresses: tuple[tuple[str, str], ...] = ()

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(sorted({*self.voters, *self.learners}))


class ConfChangeType(IntEnum):
    ADD_VOTER = 0
    ADD_LEARNER = 1  # also demotes a voter to learner
    REMOVE_NODE = 2


@dataclass(frozen=True, slots=True)
class ConfChange:
    type: ConfChangeType
    node_id: str
    context: bytes = b""  # the application's data, e.g. the node's address


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    index: int = 0
    term: int = 0
    conf_state: ConfState = field(default_factory=ConfState)


@dataclass(frozen=True, slots=True)
class Snapshot:
    meta: SnapshotMeta = field(default_factory=SnapshotMeta)
    data: bytes = b""

    @property
    def is_empty(self) -> bool:
        return self.meta.index == 0


class MessageType(IntEnum):
    APP = 0
    APP_RESP = 1
    VOTE = 2
    VOTE_RESP = 3
    PRE_VOTE = 4
    PRE_VOTE_RESP = 5
    HEARTBEAT = 6
    HEARTBEAT_RESP = 7
    SNAP = 8
    TIMEOUT_NOW = 9
    READ_INDEX = 10  # follower -> leader: request a read index for `context`
    READ_INDEX_RESP = 11  # leader -> follower: `index` is the read index for `context`
    TRANSFER_LEADER = 12  # follower -> leader: please transfer leadership to `frm`... see core docs
    SNAP_STATUS = 13  # local only: the transport reports a snapshot send outcome (reject = failed)
    # follower -> leader: "my storage was damaged and repaired; I hold only up to `index`": the
    # leader forgets what it counted for us beyond it (RaftCore._leader_on_repair)
    REPAIR = 15
    # leader -> follower: "forgotten; my commit index is `commit` (term `log_term`)": the repair
    # ends once our log holds that entry durably
    REPAIR_ACK = 16
    # repairing node -> every voter: "what is your term?" (answered in every role and term), and
    # the answer: a repairing node takes the highest term a majority reports before it acts on
    # any append (RaftCore._fenced)
    REPAIR_PROBE = 17
    REPAIR_PROBE_RESP = 18
    UNREACHABLE = 14  # local only: the transport reports that `frm` could not be reached


@hot_record
class Message:
    type: MessageType
    to: str
    frm: str
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: Snapshot | None = None
    context: bytes = b""  # ReadIndex request id; heartbeat read-round id
