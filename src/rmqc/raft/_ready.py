"""What the core hands to the application (Ready) and reports about itself (Status)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqc._hot import hot_record

from ._config import Role
from ._progress import ProgressState
from ._types import Entry, HardState, Message, Snapshot


@hot_record
class SoftState:
    """Volatile state worth telling the application about; never persisted."""

    leader: str | None
    role: Role


@hot_record
class ReadState:
    """A linearizable read may be served once the local applied index reaches `index`."""

    index: int
    context: bytes


@hot_record
class Ready:
    """One batch of work. Order: persist (storage.save), send, apply, then RawNode.advance(ready).

    `messages` may leave before persistence (the leader's appends and heartbeats);
    `persist_messages` may leave only once this Ready's hard state, entries and snapshot are durable
    (votes, vote replies, append replies: thesis section 3.8).
    """

    soft_state: SoftState | None = None
    hard_state: HardState | None = None
    entries: tuple[Entry, ...] = ()
    snapshot: Snapshot | None = None
    committed_entries: tuple[Entry, ...] = ()
    messages: tuple[Message, ...] = ()
    persist_messages: tuple[Message, ...] = ()
    read_states: tuple[ReadState, ...] = ()
    must_sync: bool = False

    @property
    def all_messages(self) -> tuple[Message, ...]:
        return self.messages + self.persist_messages


@dataclass(frozen=True, slots=True)
class ProgressStatus:
    match: int
    next: int
    state: ProgressState
    inflight: int
    recent_active: bool
    pending_snapshot: int = 0  # in state SNAPSHOT: the index of the snapshot being sent


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    """The leader's lease at the core's tick count (RawNode.ticks). `start_tick`: the send tick of
    the last heartbeat round a quorum acked (None: no lease); `remaining_ticks`: how many more of
    the core's ticks it holds (0: it does not hold)."""

    start_tick: int | None
    duration_ticks: int
    remaining_ticks: int


@dataclass(frozen=True, slots=True)
class Status:
    id: str
    term: int
    vote: str | None
    role: Role
    leader: str | None
    commit: int
    applied: int
    last_index: int
    is_learner: bool
    voters: tuple[str, ...]
    learners: tuple[str, ...]
    lead_transferee: str | None
    lease_valid: bool
    uncommitted_size: int
    progress: dict[str, ProgressStatus] = field(default_factory=dict)
