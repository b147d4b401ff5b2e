"""RawNode: the application's handle on the Raft core.

Contract (the order matters; it is what makes the core safe):

1. Feed inputs: `tick()`, `step(msg)`, `propose*`, `read_index`, `campaign`, `transfer_leader`...
2. When `has_ready()`, take `rd = ready()` and, in this order:
   a. persist: `storage.save(rd.hard_state, rd.entries, rd.snapshot)` (one atomic, durable write);
      `rd.messages` may be sent before or during this step, `rd.persist_messages` only after it;
   b. send the messages;
   c. apply `rd.snapshot` (if any) and then `rd.committed_entries` to the state machine, calling
      `apply_conf_change(cc)` for each CONF_CHANGE entry (and `storage.save_conf_state` with the
      result); serve `rd.read_states` once the applied index reaches each one's index;
   d. `advance(rd)`.
3. Only one Ready may be outstanding: `has_ready()` is False and `ready()` raises until `advance`
   (or `not_persisted`).
   While the write of step a goes on (a slow disk), the app may keep feeding inputs (1.) and
   send what `take_early()` returns: the messages that need no write (heartbeats, appends, vote
   requests, read-index answers) and the read states made meanwhile; everything else waits for
   `advance`.
4. If the write of step a fails cleanly (a full disk: nothing of it was stored), skip b-d for
   `rd.persist_messages` and `rd.committed_entries` and call `not_persisted(rd)` instead of
   `advance`: the next Ready offers the same state to persist again.

Bootstrap: `peers` starts a brand-new group (empty storage). The voters enter the log as committed
ADD_VOTER entries at term 1 (the first Ready persists them), so nodes added later rebuild the
membership by replaying the log. A restarted node takes its membership from
`storage.initial_state()`; if that is empty, `peers` (when given) is used.

Reads: `read_index(ctx)` batches by itself on the leader (one heartbeat round serves every read
queued meanwhile); a follower forwards one READ_INDEX per call, so give it one context per batch of
client reads. `lease_read()` answers at once on a leader whose lease holds (else None: fall back
to `read_index`). Serve a read only once the applied index reaches the returned index.

Proposals raise `ProposalDropped` subclasses (NoLeader, NotLeader, TransferInProgress,
UncommittedSizeExceeded, ConfChangeRefused); the core never forwards proposals.

Reading the core: the application reads it only through these, never through `RawNode.raft`:
`status()` (everything, with the leader's progress table: for reports), and the cheap reads of a
driver pass or a check: `role`, `term`, `leader`, `committed`, `applied`, `last_index()`,
`entries(lo, hi)`; `ticks` (the core's tick count: its only clock), `quiet_ticks()` (how many next
ticks act on nothing, so may be fed late), `lease` (a LeaseStatus), `commit_blocked_until_tick` (a
takeover leader's wait; 0: none); `progress_of(node_id)` (a ProgressStatus, None for an unknown
node; meaningful on the leader); `pending_conf_index` and `conf_change_pending()` (the last
membership change appended, and whether it is not applied yet); `conf_state`; `repair()`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ._config import Config, Role
from ._core import CampaignType, RaftCore, RepairState
from ._errors import ReadyMisuse
from ._progress import Progress
from ._ready import LeaseStatus, ProgressStatus, ReadState, Ready, SoftState, Status
from ._storage import Storage
from ._types import ConfChange, ConfState, Entry, Message, MessageType


class RawNode:
    def __init__(
        self,
        config: Config,
        storage: Storage,
        rng: random.Random,
        peers: Sequence[str] = (),
        contexts: Mapping[str, bytes] | None = None,
    ) -> None:
        self.raft = RaftCore(config, storage, rng, peers, contexts)
        self._prev_soft = self._soft_state()
        self._prev_hard = storage.initial_state()[0]  # a bootstrap's hard state still needs saving
        self._outstanding: Ready | None = None

    # -- inputs --------------------------------------------------------------------------------
    def tick(self) -> None:
        self.raft.tick()

    def step(self, msg: Message) -> None:
        self.raft.step(msg)

    def propose(self, data: bytes, decided_term: int | None = None) -> None:
        """Append one payload (leader only). `decided_term`: the term in which the caller decided
        it (e.g. from local liveness); a different current term drops it (StaleTermProposal)."""
        self.raft.propose_batch([data], decided_term)

    def propose_batch(self, datas: Sequence[bytes], decided_term: int | None = None) -> None:
        """Group commit: every payload is appended at once and leaves in ONE broadcast."""
        self.raft.propose_batch(datas, decided_term)

    def propose_conf_change(self, cc: ConfChange) -> None:
        self.raft.propose_conf_change(cc)

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        return self.raft.apply_conf_change(cc)

    def read_index(self, ctx: bytes) -> None:
        self.raft.read_index(ctx)

    def lease_read(self) -> int | None:
        return self.raft.lease_read()

    def campaign(self) -> None:
        pre_vote = self.raft.config.pre_vote
        self.raft.hup(CampaignType.PRE_ELECTION if pre_vote else CampaignType.ELECTION)

    def transfer_leader(self, target: str) -> None:
        self.raft.transfer_leader(target)

    def take_over(self, departed: str) -> None:
        """Campaign at once because our leader `departed` seems gone (e.g. its port refuses us);
        the winner waits out its lease before committing (RaftCore.take_over)."""
        self.raft.take_over(departed)

    def report_unreachable(self, node_id: str) -> None:
        self.raft.step(Message(MessageType.UNREACHABLE, self.raft.id, node_id))

    def report_snapshot(self, node_id: str, ok: bool) -> None:
        self.raft.step(Message(MessageType.SNAP_STATUS, self.raft.id, node_id, reject=not ok))

    # -- Ready ---------------------------------------------------------------------------------
    def take_ended_repair(self) -> RepairState | None:
        """A repairing node's repair that just ended, once (the app then records that it is over)."""
        ended, self.raft.ended_repair = self.raft.ended_repair, None
        return ended

    def repair(self) -> RepairState | None:
        """The repair under way (None: not repairing)."""
        return self.raft.repair

    def _soft_state(self) -> SoftState:
        return SoftState(self.raft.lead, self.raft.role)

    def has_ready(self) -> bool:
        if self._outstanding is not None:
            return False
        r, soft, hard = self.raft, self._prev_soft, self._prev_hard
        return bool(
            r.lead != soft.leader
            or r.role is not soft.role
            or r.term != hard.term
            or r.vote != hard.vote
            or r.log.committed != hard.commit
            or r.log.unstable.entries
            or r.log.unstable.snapshot is not None
            or r.msgs
            or r.msgs_after_persist
            or r.read_states
            or r.log.has_next_committed_entries()
        )

    def ready(self) -> Ready:
        if self._outstanding is not None:
            raise ReadyMisuse("ready() called again before advance() of the previous Ready")
        r = self.raft
        prev_soft, prev_hard = self._prev_soft, self._prev_hard
        # built only when changed (most Readies of a write carry neither)
        soft = self._soft_state() if r.lead != prev_soft.leader or r.role is not prev_soft.role else None
        hard_changed = r.term != prev_hard.term or r.vote != prev_hard.vote or r.log.committed != prev_hard.commit
        hard = r.hard_state() if hard_changed else None
        rd = Ready(
            soft_state=soft,
            hard_state=hard,
            entries=tuple(r.log.unstable.entries),
            snapshot=r.log.unstable.snapshot,
            committed_entries=tuple(r.log.next_committed_entries(r.config.max_size_per_msg)),
            messages=tuple(r.msgs),
            persist_messages=tuple(r.msgs_after_persist),
            read_states=tuple(r.read_states),
            # an fsync for new entries or a snapshot, or a term or vote change; a commit move alone is not
            must_sync=(bool(r.log.unstable.entries) or r.log.unstable.snapshot is not None
                       or r.term != prev_hard.term or r.vote != prev_hard.vote),
        )
        r.msgs.clear()
        r.msgs_after_persist.clear()
        r.read_states.clear()
        self._outstanding = rd
        return rd

    def take_early(self) -> tuple[tuple[Message, ...], tuple[ReadState, ...]]:
        """While the outstanding Ready is being persisted: the messages made since that may leave
        before anything is durable (never those of `msgs_after_persist`: acknowledgements and votes
        wait for the write that makes them true) and the read states made since. A leader's
        heartbeats and appends go on during a slow write: its followers neither time out nor wait
        for their entries, and their acknowledgements commit without the leader's own write."""
        r = self.raft
        messages, read_states = tuple(r.msgs), tuple(r.read_states)
        r.msgs.clear()
        r.read_states.clear()
        return messages, read_states

    def advance(self, rd: Ready) -> None:
        if rd is not self._outstanding:
            raise ReadyMisuse("advance() must be given the Ready returned by the last ready()")
        self._outstanding = None
        r = self.raft
        if rd.soft_state is not None:
            self._prev_soft = rd.soft_state
        if rd.hard_state is not None:
            self._prev_hard = rd.hard_state
        if rd.snapshot is not None:
            r.log.stable_snapshot_to(rd.snapshot.meta.index)
        if rd.entries:
            r.log.stable_to(rd.entries[-1].index, rd.entries[-1].term)
            r.on_persisted(r.log.stable_last_index())
        if rd.entries or rd.snapshot is not None:
            r.maybe_end_repair()
        if rd.committed_entries:
            r.log.applied_to(rd.committed_entries[-1].index)

    def not_persisted(self, rd: Ready) -> tuple[Entry, ...]:
        """Instead of `advance`: the app could not persist `rd` and did nothing that depends on it
        (no persist_messages sent, nothing applied). Its hard state, entries, snapshot, soft state
        and committed entries stay pending and come again in the next Ready. Its messages and read
        states were the app's to use (they depend on no write); its persist_messages are dropped,
        which Raft tolerates like any lost message (appends are resent, votes asked again).
        Returned: the committed entries of `rd`, now counted as applied: the app applies them at
        once, or a read index or an answer waiting for them would wait for the disk (a full disk
        refuses every later write). Committed means durable on a quorum (a leader counts itself
        only once persisted, `on_persisted`), and a committed entry is never truncated, so applying
        one this node holds only in memory loses nothing: a leader whose disk is full still
        answers the writes its followers' acknowledgements commit."""
        if rd is not self._outstanding:
            raise ReadyMisuse("not_persisted() must be given the Ready returned by the last ready()")
        self._outstanding = None
        if rd.committed_entries:
            self.raft.log.applied_to(rd.committed_entries[-1].index)
        return rd.committed_entries

    # -- introspection ---------------------------------------------------------------------------
    def status(self) -> Status:
        r = self.raft
        progress = {}
        if r.role is Role.LEADER:
            progress = {pid: _progress_status(pr) for pid, pr in sorted(r.progress.items())}
        return Status(
            id=r.id,
            term=r.term,
            vote=r.vote,
            role=r.role,
            leader=r.lead,
            commit=r.log.committed,
            applied=r.log.applied,
            last_index=r.log.last_index(),
            is_learner=r.id in r.learners,
            voters=tuple(sorted(r.voters)),
            learners=tuple(sorted(r.learners)),
            lead_transferee=r.lead_transferee,
            lease_valid=r._lease_valid(),
            uncommitted_size=r.uncommitted_size,
            progress=progress,
        )

    @property
    def conf_state(self) -> ConfState:
        return self.raft.conf_state()

    @property
    def role(self) -> Role:
        return self.raft.role

    @property
    def term(self) -> int:
        return self.raft.term

    @property
    def leader(self) -> str | None:
        """The leader this node knows of (None: none)."""
        return self.raft.lead

    @property
    def committed(self) -> int:
        return self.raft.log.committed

    @property
    def applied(self) -> int:
        """The index the core counts as applied (a bootstrap's entries count at once)."""
        return self.raft.log.applied

    def last_index(self) -> int:
        return self.raft.log.last_index()

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """The log's entries in [lo, hi) (CompactedError below its first index)."""
        return self.raft.log.entries(lo, hi)

    @property
    def ticks(self) -> int:
        """How many ticks the core was fed: its only clock."""
        return self.raft.ticks

    def quiet_ticks(self) -> int:
        """How many next ticks act on nothing: the app may feed them late, in one burst before its
        next input, and need not wake up for them (RaftCore.quiet_ticks)."""
        return self.raft.quiet_ticks()

    @property
    def lease(self) -> LeaseStatus:
        """The leader's lease now (`ticks`); a lease read also needs `lease_read()`'s other rules."""
        r = self.raft
        lease = r.lease
        return LeaseStatus(lease.start_tick, lease.duration_ticks, lease.remaining_ticks(r.ticks))

    @property
    def commit_blocked_until_tick(self) -> int:
        """A leader that took over commits nothing before this tick (0: no such wait)."""
        return self.raft.commit_blocked_until_tick

    def progress_of(self, node_id: str) -> ProgressStatus | None:
        """What this node's core tracks of `node_id`'s replication (None: not a member); only the
        leader's is kept up to date."""
        pr = self.raft.progress.get(node_id)
        return None if pr is None else _progress_status(pr)

    @property
    def pending_conf_index(self) -> int:
        """The index of the last membership change this node appended as leader (a new leader
        counts its whole inherited tail: its last index when elected)."""
        return self.raft.pending_conf_index

    def conf_change_pending(self) -> bool:
        """A membership change is in the log and not applied yet: no other may be proposed."""
        return self.raft.conf_change_pending()


def _progress_status(pr: Progress) -> ProgressStatus:
    return ProgressStatus(pr.match, pr.next, pr.state, len(pr.inflights), pr.recent_active, pr.pending_snapshot)


