"""The driver: the only code that touches the Raft core. One pass takes every input that arrived
(ticks, peer messages, proposals from all connections: ONE propose_batch = group commit), then
handles a Ready in the order Raft requires: send what may go early, persist (one transaction +
fsync, through the shell's Saver), send what had to wait, apply committed entries, answer the
waiting requests, snapshot every N entries, advance. A run of Readies returns between two of them
so that the shell lets the rest of the node run (issue 13).

A save the Saver leaves to the background (a slow or stalled disk) keeps its Ready outstanding:
until `save_finished`, each pass feeds the core and sends only what needs no write (RawNode.
take_early), so the node goes on sending heartbeats and appends and answering what needs no commit
of its own; the Ready's acknowledgements, applies and answers wait for the write.

A snapshot from the leader is decoded the same way before its Ready is handled: one bounded step
per pass (fsm.ControllerState.decode_steps) into a new state while the live one serves, then saved,
adopted in O(1) and the old state freed a step per pass. Installing 100,000 groups and 250,000
topics held the node's loop for seconds in one restore."""

from __future__ import annotations

import gc
import logging
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from rmqc.controller import ControllerProcessor
from rmqc.errors import RmqcError
from rmqc.fsm import ApplyResult, ControllerState, decode_commands
from rmqc.raft import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    RawNode,
    Ready,
    RepairState,
    Snapshot,
    decode_conf_change,
)
from rmqc.storage import StorageFullError, StorageWriteFailed

from ._disk import Disk
from ._facts import RaftFacts, sole_voter
from ._failovers import FailoverHistory
from ._io import Observer, Outbox, ReplicaConfig, ReplicaStorage, Saver, SendRaft, SnapshotOutcome, WriteSnapshot
from ._membership import Membership, book_after, with_known_addresses
from ._operations import Operations
from ._proposals import Proposals
from ._reads import ReadPath

log = logging.getLogger("rmqc.replica")

# One pass of the driver steps at most this many peer messages, or messages carrying this many
# entries, before it persists, sends and lets the node's other tasks run: a peer's backlog (a
# resumed node's, a catch-up) is worked off in slices, never in one stall (issue 13).
FEED_MESSAGES = 512
FEED_ENTRIES = 4096
# A save (one transaction + fsync) slower than this is logged: the node answers nothing meanwhile.
SLOW_PERSIST_MS = 100
# Keep this many entries behind a snapshot so a briefly lagging follower catches up from the log.
COMPACTION_LAG_ENTRIES = 1_000


@dataclass(slots=True)
class Saving:
    """A save the Saver left to the background: the Ready it persists (None: a commit index alone,
    saved before a snapshot), its snapshot, and when it began."""

    ready: Ready | None
    snapshot: Snapshot | None
    entries: int
    started_ms: int


# A snapshot this large is decoded with the collector's objects frozen between steps (see
# ControllerState.decode_steps: the full collections its growing state triggers otherwise walk all
# of it in one call); smaller ones decode in a few steps either way.
FREEZE_DECODE_BYTES = 1 << 20


@dataclass(slots=True)
class Decoding:
    """A snapshot Ready waiting for its state to be decoded, a step per pass."""

    ready: Ready
    steps: Iterator[ControllerState | None]
    frozen: bool
    state: ControllerState | None = None


class DriverHost(Protocol):
    """What the driver asks of the replica that owns it: the wake-up flag and the tick count it
    shares with the replica's inputs, the tick plan, the Saver the replica holds (the driver asks
    it anew at each save), and the replica's own reactions to what a pass learns (a leader, a
    membership, applied elections, the end of a repair)."""

    drive_wanted: bool
    unfed_ticks: int

    @property
    def saver(self) -> Saver: ...

    def now_ms(self) -> int: ...
    def wake_driver(self) -> None: ...
    def count_ticks(self, now_ms: int) -> None: ...
    def feed_due(self) -> bool: ...
    def plan_ticks(self) -> None: ...
    def flush_outbox(self) -> None: ...
    def end_repair(self, ended: RepairState) -> None: ...
    def on_soft_state(self, leader: str | None, previous: str | None) -> None: ...
    def membership_applied(self, previous: ConfState, index: int) -> None: ...
    def elections_applied(self, index: int, results: list[ApplyResult]) -> None: ...
    def after_apply_on_leader(self, results: list[ApplyResult]) -> None: ...


class Driver:
    """The only writer of RaftFacts (rmqc.replica._facts): the leader and term from each Ready, the
    applied index, membership and serving flag from what it applies."""

    def __init__(self, host: DriverHost, facts: RaftFacts, *, config: ReplicaConfig, raw: RawNode,
                 inbound: deque[Message], outbox: Outbox, storage: ReplicaStorage,
                 state: ControllerState, processor: ControllerProcessor, observer: Observer, proposals: Proposals,
                 reads: ReadPath, operations: Operations, membership: Membership, disk: Disk,
                 failovers: FailoverHistory, bootstrap_membership_unsaved: bool) -> None:
        self._host, self._facts, self._config, self._raw, self._inbound = host, facts, config, raw, inbound
        self._storage, self._state, self._processor = storage, state, processor
        self._observer, self._proposals, self._reads, self._operations = observer, proposals, reads, operations
        self._membership, self._disk, self._failovers = membership, disk, failovers
        self._out = outbox.append
        self.in_run = False  # a Ready is due right away (the previous pass returned in a run)
        self.unsaved_hard_state: HardState | None = None  # a commit-only HardState waiting for the next write
        self.snapshot_in_flight = False  # at most one WriteSnapshot at a time
        self.saving: Saving | None = None  # a save going on in the background (at most one)
        self.decoding: Decoding | None = None  # a snapshot Ready whose state is being decoded
        self._decoded: tuple[Snapshot | None, ControllerState, bool] | None = None  # (snapshot, its state, frozen)
        self._releasing: Iterator[None] | None = None  # a replaced state, freed a step per pass
        # A bootstrap's membership, saved once its entries are durable: the core counts them as
        # applied, so no apply saves it, and a restart must not fall back to the `peers` option
        # (it names the initial members only, and may have been edited since).
        self.bootstrap_membership_unsaved = bootstrap_membership_unsaved

    def drive(self) -> bool:
        """One pass; True when another Ready is due at once (the shell yields, then calls again)."""
        raw = self._raw
        self._reads.start_pass()
        self._release_step()
        if self.saving is not None or self.decoding is not None:
            self.in_run = False
            self._while_outstanding()
            if (ready := self._decoded_ready()) is None:
                return False
        else:
            if not self.in_run:
                self._host.drive_wanted = False
                self._feed()
            self.in_run = False
            if ended := raw.take_ended_repair():  # a leader's answer showed we already hold its commit index
                self._host.end_repair(ended)
            if not raw.has_ready():
                return False
            ready = raw.ready()
            if self._decode_first(ready):
                return False
        handled = self._handle_ready(ready)
        if self.saving is not None:  # the write goes on in the background: save_finished ends the Ready
            self.saving.ready = ready
            return False
        if not handled:
            # the disk is full: the core offers the same Ready again; the next pass (a tick at the
            # latest) sends what needs no write and tries the write when due
            self._apply_entries(raw.not_persisted(ready))
            return False
        self._advance(ready)
        self._maybe_snapshot()
        return self._next_pass()

    def _while_outstanding(self) -> None:
        """A pass while a Ready waits for its save or its snapshot's decode: the core takes every
        input, what needs no write leaves, and the decode takes one step."""
        self._host.drive_wanted = False
        # the requests that arrive meanwhile wait, and go into the log together once the save
        # ends (group commit): appended one pass at a time, each would be an append of its own
        # to every follower, and a save of its own there (at 256 clients: 13 % fewer writes)
        self._feed(propose=False)
        messages, read_states = self._raw.take_early()
        self._send(messages)
        self._reads.on_read_states(read_states)
        decoding = self.decoding
        if decoding is not None and decoding.state is None:
            decoding.state = next(decoding.steps)
            if decoding.state is None:
                self._host.wake_driver()

    def _decode_first(self, ready: Ready) -> bool:
        """A Ready with a snapshot waits for its state to be decoded (True), a step per pass."""
        snapshot = ready.snapshot
        if snapshot is None or snapshot.is_empty:
            return False
        frozen = len(snapshot.data) >= FREEZE_DECODE_BYTES
        self.decoding = Decoding(ready, ControllerState.decode_steps(snapshot.data, freeze=frozen), frozen)
        self._host.wake_driver()
        return True

    def _decoded_ready(self) -> Ready | None:
        """The snapshot Ready whose state is now decoded, to be handled now (None: not yet)."""
        decoding = self.decoding
        if decoding is None or decoding.state is None:
            return None
        self.decoding = None
        self._decoded = (decoding.ready.snapshot, decoding.state, decoding.frozen)
        return decoding.ready

    @property
    def releasing(self) -> bool:
        """A replaced state is being freed: a pass is due for its next step."""
        return self._releasing is not None

    def _release_step(self) -> None:
        if self._releasing is not None and next(self._releasing, StopIteration) is StopIteration:
            self._releasing = None

    def save_finished(self, error: Exception | None) -> None:
        """The background save ended: its Ready goes on where the save left it (or, on a full disk,
        as a refused write does; a failed write stops the process)."""
        saving, self.saving = self.saving, None
        assert saving is not None, "save_finished without a save in the background"
        if isinstance(error, StorageFullError):
            self._disk.full(error)
            if saving.ready is not None:
                self._apply_entries(self._raw.not_persisted(saving.ready))
        elif error is not None:
            self._disk.failed(error if isinstance(error, StorageWriteFailed) else StorageWriteFailed(str(error)))
        else:
            self._saved(saving.entries, saving.started_ms)
            if saving.ready is not None:
                self._after_persist(saving.ready, saving.snapshot)
                self._advance(saving.ready)
            self._maybe_snapshot()
        self._host.wake_driver()  # the core may have a Ready now: what arrived meanwhile, the next write

    def _advance(self, ready: Ready) -> None:
        self._raw.advance(ready)
        if ended := self._raw.take_ended_repair():  # the entries just saved reach a leader's commit index
            self._host.end_repair(ended)

    def _next_pass(self) -> bool:
        raw = self._raw
        # what the pass itself made due (Replica.feed_due) goes into the next Ready at once:
        # group commit. After most passes (a lone write's) nothing is due, and only the timer's
        # plan is brought up to date.
        if self._host.feed_due():
            self._host.drive_wanted = False
            self._feed()
        else:
            self._host.plan_ticks()
        self.in_run = raw.has_ready()
        return self.in_run

    def _feed(self, *, propose: bool = True) -> None:
        raw = self._raw
        now_ms = self._host.now_ms()  # one reading for the pass's time-driven work
        self._host.count_ticks(now_ms)
        ticks, self._host.unfed_ticks = self._host.unfed_ticks, 0
        if ticks:  # (most passes of a write have none)
            # bounded as after a stall; quiet ticks (counted late on purpose) come on top
            for _ in range(min(ticks, self._config.election_tick + raw.quiet_ticks())):
                raw.tick()
            self._reads.on_ticks_fed(raw.ticks)
        self._step_inbound()
        if self._facts.sole_voter and self._facts.leader_id is None:
            # no one to wait for, so no election timeout before serving: a restarted single-node
            # controller serves once its log is applied (the core refuses before, pitfall 3)
            raw.campaign()
        self._reads.flush(raw, now_ms)
        self._operations.feed(raw)
        self._membership.feed(raw)
        self._proposals.expire(now_ms)
        self._disk.look_for_space()
        if propose:
            proposed = self._proposals.propose(raw, self._facts.serving_as_leader, self._facts.term)
            if proposed:
                self._observer.observe_append(proposed)
        self._host.plan_ticks()

    def _step_inbound(self) -> None:
        """Step one slice of the waiting peer messages (FEED_MESSAGES, FEED_ENTRIES); the rest
        wait for the next pass, which is due at once."""
        inbound, raw = self._inbound, self._raw
        messages = entries = 0
        while inbound and messages < FEED_MESSAGES and entries < FEED_ENTRIES:
            message = inbound.popleft()
            try:
                raw.step(message)
            except RmqcError as error:
                log.debug("step %s from %s: %s", message.type.name, message.frm, error)
            messages += 1
            entries += len(message.entries)
        if inbound:
            self._host.wake_driver()

    # ----- the Ready -----

    def _handle_ready(self, ready: Ready) -> bool:
        """Everything a Ready asks for, in the order Raft requires; False when its write found the
        disk full: then only its early messages and read states were used (they need no write of
        ours), and nothing that depends on the write was done (no ack sent, nothing applied)."""
        if ready.soft_state is not None:
            self._leader_seen(ready.soft_state.leader or None)
        if ready.hard_state is not None:
            self._facts.term = ready.hard_state.term
        self._send(ready.messages)
        snapshot = ready.snapshot if ready.snapshot is not None and not ready.snapshot.is_empty else None
        # A Ready that only moves the commit index (no entries, term or vote: must_sync is False)
        # carries entries already durable on a quorum: apply them, and so answer the waiting
        # requests, before writing the new commit index instead of after its fsync.
        if not ready.must_sync and not ready.entries and snapshot is None:
            self._apply_committed(ready)
            # Nor does the new commit index need an fsync of its own (etcd's MustSync): it rides
            # with the next write. A restart may then find a lower commit index, which Raft learns
            # again; _take_snapshot writes it first so it never lags a snapshot.
            if ready.hard_state is not None:
                self.unsaved_hard_state = ready.hard_state
            self._send(ready.persist_messages)  # they wait for no write of ours here
        elif not self._persist_then_apply(ready, snapshot):
            self._reads.on_read_states(ready.read_states)
            return False
        return True

    def _leader_seen(self, leader: str | None) -> None:
        """The core's leader now; a leader serves again only once an entry of its term is applied."""
        facts, me = self._facts, self._config.node_id
        previous = facts.leader_id
        facts.leader_id = leader
        if leader != me or previous != me:
            facts.serving_as_leader = False
        self._host.on_soft_state(leader, previous)

    def _maybe_snapshot(self) -> None:
        if (self._facts.applied_index - self._facts.snapshot_index >= self._config.snapshot_every_entries
                and self._disk.alarm is None  # a snapshot needs space: taken once writes succeed again
                and not self.snapshot_in_flight and self.saving is None):
            self._take_snapshot()

    def _persist_then_apply(self, ready: Ready, snapshot: Snapshot | None) -> bool:
        """Persist, install the snapshot, send what had to wait, apply and answer: in this order
        (the mutant hook of `apply-before-persist`, rmqc.replica._io). False: not saved now (the
        disk is full, or the save goes on in the background: save_finished does the rest)."""
        if not self._persist(ready.hard_state, ready.entries, snapshot):
            return False
        self._after_persist(ready, snapshot)
        return True

    def _after_persist(self, ready: Ready, snapshot: Snapshot | None) -> None:
        if snapshot is not None:
            self._install_snapshot(snapshot)
        self._send(ready.persist_messages)
        self._apply_committed(ready)

    def _send(self, messages: Sequence[Message]) -> None:
        if messages:
            self._out(SendRaft(tuple(messages)))

    def _persist(self, hard_state: HardState | None, entries: Sequence[Entry], snapshot: Snapshot | None) -> bool:
        """One transaction + fsync; carries a commit index not yet saved. False: not saved now,
        either the disk is full (nothing was written; tried again once look_for_space finds room)
        or the Saver left the write to the background (`self.saving`; save_finished ends it). A
        write that fails for another reason stops the process."""
        hard_state = hard_state or self.unsaved_hard_state
        if hard_state is None and not entries and snapshot is None:
            return True
        if self._disk.alarm is not None:  # until look_for_space finds room again
            return False
        self._host.flush_outbox()  # what was emitted so far leaves before the write (a leader's appends)
        started_ms = self._host.now_ms()
        try:
            saved = self._host.saver.save(hard_state, list(entries), snapshot)
        except StorageFullError as error:
            self._disk.full(error)
            return False
        except StorageWriteFailed as error:
            self._disk.failed(error)
        if not saved:
            self.saving = Saving(None, snapshot, len(entries), started_ms)
            return False
        self._saved(len(entries), started_ms)
        return True

    def _saved(self, entries: int, started_ms: int) -> None:
        self.unsaved_hard_state = None
        if self.bootstrap_membership_unsaved:
            self.bootstrap_membership_unsaved = False
            self._save_membership()
        persist_ms = self._host.now_ms() - started_ms
        self._observer.observe_fsync(persist_ms / 1000)
        if persist_ms >= SLOW_PERSIST_MS:
            # the node's writes wait for this save: say so, or a node under disk contention whose
            # writes are slow looks like a bug in the node
            log.warning("%s: saving %d entries took %d ms", self._config.node_id, entries, persist_ms)

    def save_unsaved_commit(self) -> None:
        """On the way out, the commit index still waiting to ride with the next write is saved, so a
        stopped node's log (and `rmqc log export`) covers everything it saw committed."""
        if self.unsaved_hard_state is not None:
            try:
                self._storage.save(self.unsaved_hard_state, [], None)
            except StorageFullError as error:  # Raft learns the commit index again on restart
                log.warning("%s: commit index not saved on the way out: %s", self._config.node_id, error)
            except StorageWriteFailed as error:
                self._disk.failed(error)
            self.unsaved_hard_state = None

    # ----- apply -----

    def _apply_committed(self, ready: Ready) -> None:
        self._apply_entries(ready.committed_entries)
        self._reads.on_read_states(ready.read_states)

    def _apply_entries(self, entries: Sequence[Entry]) -> None:
        applied_before = self._facts.applied_index
        for entry in entries:
            self._apply_entry(entry)
        if self._facts.applied_index != applied_before:
            self._reads.on_applied()
            self._operations.on_applied(entries[-1].term)
            self._membership.after_apply(self._facts.applied_index)

    def _install_snapshot(self, snapshot: Snapshot) -> None:
        decoded, self._decoded = self._decoded, None
        assert decoded is not None and decoded[0] is snapshot, "a snapshot is installed once decoded"
        _, state, frozen = decoded
        self._state.adopt(state)  # `state` now holds the old contents: freed a step per pass
        self._releasing = state.release_steps()
        if frozen:
            gc.unfreeze()  # the adopted state joins the oldest generation, as a restored one
        self._processor.config_restored()
        self._facts.applied_index = snapshot.meta.index
        self._facts.snapshot_index = snapshot.meta.index
        self._adopt_membership(snapshot.meta.conf_state, snapshot.meta.index)
        log.info("%s: installed snapshot at %d", self._config.node_id, snapshot.meta.index)

    def _apply_entry(self, entry: Entry) -> None:
        facts = self._facts
        if entry.index <= facts.applied_index:
            return
        if entry.type == EntryType.CONF_CHANGE:
            self._apply_conf_change(entry)
            self._membership.applied(entry)
            results: list[ApplyResult] = []
        elif entry.data:
            commands = self._proposals.own_commands(entry.index, entry.term)  # a leader's own: not decoded again
            results = self._state.apply_all(decode_commands(entry.data) if commands is None else commands)
            self._processor.config_applied(results)  # a committed 1009 changes every node's configuration
            self._host.elections_applied(entry.index, results)
        else:
            results = []  # a leader's no-op
        facts.applied_index = entry.index
        if results:
            self._failovers.record(entry.index, results)
        self._proposals.applied(entry.index, entry.term, results)
        if facts.leader_id == self._config.node_id:
            if entry.term == facts.term and not facts.serving_as_leader:
                facts.serving_as_leader = True
                log.info("%s: serving as leader of term %d from index %d", self._config.node_id, facts.term,
                         entry.index)
            if results:
                self._host.after_apply_on_leader(results)

    def _apply_conf_change(self, entry: Entry) -> None:
        """The membership and its address book change together, and are saved together."""
        change = decode_conf_change(entry.data)
        after = self._raw.apply_conf_change(change)
        book = book_after(self._facts.conf_state, change, after)
        self._adopt_membership(ConfState(after.voters, after.learners, book), entry.index)
        self._save_membership()

    def _adopt_membership(self, conf_state: ConfState, index: int) -> None:
        """The applied membership (with the `peers` option's addresses it lacks) as of `index`."""
        facts = self._facts
        previous = facts.conf_state
        facts.conf_state = with_known_addresses(conf_state, self._config)
        facts.sole_voter = sole_voter(facts.conf_state, self._config.node_id)
        self._host.membership_applied(previous, index)

    def _save_membership(self) -> None:
        try:
            self._storage.save_conf_state(self._facts.conf_state)
        except (StorageFullError, StorageWriteFailed) as error:
            # mid-apply there is no going back; a restart applies the entry again from the log
            self._disk.failed(StorageWriteFailed(f"saving the membership in {self._config.data_dir}: {error}"))

    # ----- snapshots -----

    def _take_snapshot(self) -> None:
        """Capture the applied state now; the shell writes it off the driver (WriteSnapshot): on a
        loaded disk that took seconds, with no Ready handled (no heartbeats sent, no request
        answered) and the leadership lost (docs/chaos.md)."""
        if not self._persist(None, [], None):  # the commit index first: it must not lag the snapshot
            return  # a full disk, or the save goes on: save_finished takes the snapshot then
        index = self._facts.applied_index
        compact_to = index - min(COMPACTION_LAG_ENTRIES, self._config.snapshot_every_entries // 2)
        self.snapshot_in_flight = True
        self._out(WriteSnapshot(index, self._facts.conf_state, self._state.capture(), compact_to))

    def snapshot_written(self, index: int, outcome: SnapshotOutcome, error: Exception | None) -> None:
        self.snapshot_in_flight = False
        if outcome is SnapshotOutcome.OK:
            self._facts.snapshot_index = max(self._facts.snapshot_index, index)
            log.info("%s: snapshot at %d", self._config.node_id, index)
        elif outcome is SnapshotOutcome.SUPERSEDED:  # the leader's snapshot is newer
            log.info("%s: snapshot at %d superseded: %s", self._config.node_id, index, error)
        elif outcome is SnapshotOutcome.DISK_FULL:
            assert isinstance(error, StorageFullError)
            self._disk.full(error)
        else:
            self._disk.failed(error if isinstance(error, StorageWriteFailed) else StorageWriteFailed(str(error)))
