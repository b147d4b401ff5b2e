"""The node's read path: metadata reads served by ANY node at a chosen consistency level.

Levels (design.md "Read path"; extFields `consistency`, else `NodeConfig.default_consistency`):
- linearizable: ReadIndex. Reads that arrive while the driver is busy form one batch with ONE
  read-index context (`flush`, called by the driver once per loop). On the leader the Raft core
  shares one heartbeat round among every batch queued meanwhile; on a follower the core forwards
  the context to the leader (READ_INDEX) and the answer comes back as a ReadState. A batch is
  served once the local applied index reaches its read index. No log entry per read; the core
  holds reads until the leader has committed an entry of its own term.
- lease: on the leader, while `RawNode.lease_read()` gives an index (and this shell's clock agrees
  with the core's, see `_lease_index`: the lease also holds in monotonic time from when the core
  counted its start tick), served once applied >= that index; otherwise, and always on a follower,
  exactly like linearizable.
- stale: served at once from the local state (on a restarted node, once it applied its own log up
  to the commit index it had saved); the answer carries extFields `appliedIndex` and
  `appliedAgeMs` (ms since this node last applied an entry or heard from a leader; 0 on a leader
  whose lease holds).

A read that cannot get a read index (no leader, leader unreachable) fails with SYSTEM_ERROR and
the remark "read index not confirmed within N ms: no leader reachable" after the node's
`request_timeout_ms`; it is never answered from unconfirmed state.

1005 (controller metadata) keeps Java's behaviour (every node answers from its own view) unless
the request names a level. The read part of 1003 needs nothing here: 1003 is decided on the
leader against applied state and its effect travels as a command with preconditions.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from rmqc.controller import ControllerProcessor, NoReply, Propose, Reply, RequestContext
from rmqc.raft import RawNode, ReadIndexDropped, ReadState
from rmqc.reads import PendingReads, ReadQueueFull
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, make_response

from ._facts import RaftFacts
from ._io import Observer, ReplicaConfig

log = logging.getLogger("rmqc.replica.reads")

Respond = Callable[[RemotingCommand | None], None]
CONSISTENCY_LEVELS = ("linearizable", "lease", "stale")
LINEARIZABLE, LEASE, STALE = CONSISTENCY_LEVELS
CONSISTENCY_KEY = "consistency"
APPLIED_INDEX_KEY = "appliedIndex"
APPLIED_AGE_KEY = "appliedAgeMs"
# Reads waiting for a read index (not yet sent, or sent and unanswered). Far above what one node
# serves within a round trip; reaching it means confirmation is stuck, so refuse instead of growing.
MAX_READS_AWAITING_INDEX = 65_536
# Contexts in flight. A follower keeps ONE out at a time: every read arriving meanwhile waits for
# the next one, the same sharing the leader's heartbeat rounds give (a round trip per batch, not per
# read). On the leader the core already shares rounds, so each driver loop's batch goes at once.
FOLLOWER_BATCHES_IN_FLIGHT = 1
LEADER_BATCHES_IN_FLIGHT = 256
# Ticks the shell may have counted but not yet fed to the core before a lease read is refused:
# the core's lease clock must not lag the wall clock by more than this.
MAX_UNFED_TICKS = 1
# The core's clock is its tick count; the shell drops ticks after a stall (the ticker skips a late
# burst, the driver feeds at most election_tick at once). When the core has fallen this many ticks
# further behind the wall clock, lease reads are refused for one election timeout, so that every
# lease counted on the slow clock has expired in real time.
LOST_TICKS_TOLERATED = 2
# Core tick counts remembered with the monotonic time they were fed to the core: enough to cover the
# longest lease (election_tick ticks) with room for a few bursts after a stall.
TICK_TIMES_KEPT = 64
# Confirmed reads answered in one pass, at most: the rest in the next pass, which is due at once and
# runs after the node's other ready tasks. Up to MAX_READS_AWAITING_INDEX reads may share one read
# index, at 0.1-0.25 ms of loop time each on a 2-core VM: answered in one pass they would hold the
# loop, and its acks to the leader's heartbeat rounds, for seconds.
READS_ANSWERED_AT_ONCE = 128
# Levels for 1005 when the request names none: Java answers it on every node from its own view.
DEFAULT_LEVEL_BY_CODE = {int(RequestCode.CONTROLLER_GET_METADATA_INFO): STALE}


@dataclass(slots=True, eq=False)
class _Read:
    """One read waiting for confirmation; `on_done(failure or None)` runs exactly once."""

    on_done: Callable[[str | None], None]
    deadline_ms: int
    finished: bool = False
    awaiting_index: bool = True  # counted in ReadPath._awaiting_index until indexed or given up


@dataclass(slots=True)
class _Batch:
    reads: list[_Read]
    sent_ms: int
    resent: bool = False


def read_nonce(rng: random.Random) -> bytes:
    """The prefix of this node's read-index contexts: a restarted node must never take an answer
    meant for its previous life as its own."""
    return rng.getrandbits(64).to_bytes(8, "big")


class ReadsHost(Protocol):
    """What the read path asks of the replica that owns it: its configuration and clock, the ticks
    counted but not yet fed to the core, the driver, and the way a confirmed read is decided."""

    @property
    def config(self) -> ReplicaConfig: ...
    @property
    def unfed_ticks(self) -> int: ...
    def now_ms(self) -> int: ...
    def wake_driver(self) -> None: ...
    def plan_ticks(self) -> None: ...
    def context(self, channel_id: int, read_allowed: bool = False) -> RequestContext: ...
    def propose_and_answer(self, request: RemotingCommand, outcome: Propose, respond: Respond) -> None: ...


class ReadPath:
    """Owned by one Replica; `serve_with` runs for a request, `flush` and the `on_*` methods in its
    driver pass. Nothing here awaits."""

    def __init__(self, node: ReadsHost, facts: RaftFacts, raw: RawNode, processor: ControllerProcessor,
                 observer: Observer, nonce: bytes, commit_at_start: int) -> None:
        self._node, self._facts, self._raw, self._processor, self._observer = node, facts, raw, processor, observer
        self._nonce = nonce
        # Entries up to this index were committed before this process started: a stale read waits
        # for them (see _serve_stale).
        self._commit_at_start = commit_at_start
        self._context_ids = itertools.count(1)
        self._queued: list[_Read] = []
        self._in_flight: dict[bytes, _Batch] = {}
        self._awaiting_index = 0
        self._pending = PendingReads()
        # _Reads safe to serve (objects, as PendingReads gives them back), answered a slice at once
        self._confirmed: deque[object] = deque()
        self._answers_left = READS_ANSWERED_AT_ONCE  # in this pass (start_pass)
        self._by_deadline: deque[_Read] = deque()  # every waiting read, oldest first (one timeout)
        self._clock_origin: tuple[int, int] | None = None  # (monotonic ms, core ticks) at the baseline
        self._lease_blocked_until_ms = 0
        self._tick_times: deque[tuple[int, int]] = deque(maxlen=TICK_TIMES_KEPT)  # (core tick, ms when fed)
        self.last_progress_ms = node.now_ms()
        self.leader_contact_ms = 0
        self.lease_reads = 0
        self.index_reads = 0
        self.stale_reads = 0
        self.timeouts = 0
        self.batches_sent = 0

    # ----- request side -----

    def serve_with(self, request: RemotingCommand, channel_id: int, respond: Respond) -> None:
        """Serve a read; `respond(answer)` runs exactly once: at once when nothing needs waiting for
        (a bad level, a stale read, a lease read already applied), else from the driver when the
        read index is confirmed and applied (or from the timeout sweep). No task per read."""
        level = self.level_of(request)
        if level is None:
            respond(_bad_level(request))
            return
        if level == STALE:
            self.stale_reads += 1
            self._serve_stale(request, channel_id, respond)
            return

        def confirmed(failure: str | None) -> None:
            if failure is not None:
                respond(_response(request, ResponseCode.SYSTEM_ERROR, failure))
            else:
                self._answer(request, channel_id, respond)

        try:
            self._confirm(level, confirmed)
        except ReadQueueFull as error:
            respond(_response(request, ResponseCode.SYSTEM_BUSY, f"[OVERLOAD]{error}"))

    def _serve_stale(self, request: RemotingCommand, channel_id: int, respond: Respond) -> None:
        """At once from the local state, except on a node that restarted and has not yet applied
        its own log up to the commit index it had saved: its empty or older state would answer
        what it had already served newer before the restart (a read going back in time). That
        wait needs no leader: the node's own first passes apply those entries."""
        def serve(failure: str | None = None) -> None:
            if failure is not None:
                respond(_response(request, ResponseCode.SYSTEM_ERROR, failure))
            else:
                self._answer(request, channel_id, lambda response: respond(self._stamped_stale(request, response)))

        self._await_applied(self._commit_at_start, _Read(serve, self._deadline_ms(), awaiting_index=False))

    def level_of(self, request: RemotingCommand) -> str | None:
        asked = request.ext(CONSISTENCY_KEY)
        if asked is None:
            return DEFAULT_LEVEL_BY_CODE.get(request.code, self._node.config.default_consistency)
        asked = str(asked).strip().lower()
        return asked if asked in CONSISTENCY_LEVELS else None

    def confirm_linearizable(self, then: Callable[[str | None], None]) -> None:
        """`then(None)` once this node has applied every write acknowledged before the call (as
        for a linearizable read), or `then(why)`; for requests that read more than one key (an
        operator's snapshot). Raises ReadQueueFull when too many reads wait."""
        self._confirm(LINEARIZABLE, then)

    def _confirm(self, level: str, then: Callable[[str | None], None]) -> None:
        """Call `then(None)` once serving from local state is safe at `level` (not stale), or
        `then(why)` when it cannot be confirmed within the request timeout."""
        if level == LEASE:
            index = self._lease_index()
            if index is not None:
                self.lease_reads += 1
                self._await_applied(index, _Read(then, self._deadline_ms(), awaiting_index=False))
                return
        self.index_reads += 1
        self._enqueue(_Read(then, self._deadline_ms()))

    def _deadline_ms(self) -> int:
        return self._node.now_ms() + self._node.config.request_timeout_ms

    def _enqueue(self, read: _Read) -> None:
        if self._awaiting_index >= MAX_READS_AWAITING_INDEX:
            raise ReadQueueFull(f"{self._awaiting_index} reads await a read index (max {MAX_READS_AWAITING_INDEX})")
        self._queued.append(read)
        self._by_deadline.append(read)
        self._awaiting_index += 1
        self._node.wake_driver()

    def _await_applied(self, index: int, read: _Read) -> None:
        if self._read_index_reached(index):
            _finish(read)
        else:
            self._pending.add(read, index)
            self._by_deadline.append(read)

    def _read_index_reached(self, index: int) -> bool:
        """A read confirmed at `index` may be served from local state (the mutant hook of
        `stale-read-as-linearizable`, rmqc.replica._io)."""
        return self._facts.applied_index >= index

    def next_deadline_ms(self) -> int | None:
        queue = self._by_deadline
        while queue and queue[0].finished:
            queue.popleft()
        return queue[0].deadline_ms if queue else None

    def _expire(self, now_ms: int) -> None:
        """Driver: fail the reads whose confirmation did not come within the request timeout."""
        queue = self._by_deadline
        while queue and (queue[0].finished or queue[0].deadline_ms <= now_ms):
            read = queue.popleft()
            if not read.finished:
                self._stop_awaiting(read)  # the driver skips it from now on
                self.timeouts += 1
                timeout_ms = self._node.config.request_timeout_ms
                _finish(read, f"read index not confirmed within {timeout_ms} ms: no leader reachable")

    def _lease_index(self) -> int | None:
        """The core's lease index, if the shell's clock also vouches for the lease: no ticks lost
        in a stall, and at most MAX_UNFED_TICKS ticks counted but not yet given to the core."""
        raw = self._raw
        if self._facts.leader_id != self._node.config.node_id:
            return None
        now_ms = self._node.now_ms()
        if now_ms < self._lease_blocked_until_ms:
            return None
        unfed_ticks = self._node.unfed_ticks
        lease = raw.lease
        if unfed_ticks > MAX_UNFED_TICKS or lease.remaining_ticks <= unfed_ticks:
            return None
        if not self._lease_holds_in_monotonic_time(lease.start_tick, lease.duration_ticks):
            return None
        # An idle leader's quiet ticks are counted only when it next runs, so its tick clock may
        # lag here; the lease is also judged in monotonic time above, from when its start tick was
        # fed (its round was sent after that), which no tick fed late can stretch.
        index = raw.lease_read()
        self._node.plan_ticks()  # the lease is wanted now: a heartbeat every tick again
        return index

    def on_ticks_fed(self, core_tick: int) -> None:
        """Driver: the core's tick count is now `core_tick` (after one tick or a burst)."""
        self._tick_times.append((core_tick, self._node.now_ms()))

    def _lease_holds_in_monotonic_time(self, start_tick: int | None, duration_ticks: int) -> bool:
        """The lease's round was sent no earlier than its start tick was fed to the core, so the
        lease surely holds while less than its duration has passed since then, whatever the
        ticker did meanwhile. The tick counts alone are not enough: after a stall (a slow fsync
        in the driver, a busy CPU) a reader may run before the ticker catches up, and a survivor
        that took over counts the old lease out in real time (rmqc.reads._lease)."""
        if start_tick is None:
            return False
        # An entry stands for the burst of ticks fed after the previous entry: find the one whose
        # burst holds the start tick, newest first (the lease is at most a few ticks old).
        holder: tuple[int, int] | None = None
        covered = False
        for tick, fed_s in reversed(self._tick_times):
            if tick < start_tick:
                covered = holder is not None  # the burst after this entry holds the start tick
                break
            holder = (tick, fed_s)
        else:
            covered = holder is not None and holder[0] == start_tick  # nothing older remembered
        if not covered or holder is None:
            return False
        # both stamps are whole milliseconds (truncated): 1 ms less keeps the judgement on the safe side
        return self._node.now_ms() - holder[1] < duration_ticks * self._node.config.tick_ms - 1

    def _answer(self, request: RemotingCommand, channel_id: int, respond: Respond) -> None:
        node = self._node
        outcome = self._processor.handle(request, node.context(channel_id, True))
        if isinstance(outcome, Reply):
            respond(outcome.response)
        elif isinstance(outcome, NoReply):
            respond(None)
        else:  # Java's isProcessReadEvent: the read enters the log
            node.propose_and_answer(request, outcome, respond)

    def _stamped_stale(self, request: RemotingCommand, response: RemotingCommand | None) -> RemotingCommand | None:
        # 1005 without a level is Java's own answer, left as Java writes it
        java_default = request.code in DEFAULT_LEVEL_BY_CODE and request.ext(CONSISTENCY_KEY) is None
        return response if java_default else self._stamp(response)

    def _stamp(self, response: RemotingCommand | None) -> RemotingCommand | None:
        if response is not None:
            if response.ext_fields is None:
                response.ext_fields = {}
            response.ext_fields[APPLIED_INDEX_KEY] = str(self._facts.applied_index)
            response.ext_fields[APPLIED_AGE_KEY] = str(self.applied_age_ms())
        return response

    def applied_age_ms(self) -> int:
        if self._lease_index() is not None:
            return 0
        return max(0, self._node.now_ms() - max(self.last_progress_ms, self.leader_contact_ms))

    # ----- driver side -----

    def queued(self) -> bool:
        """Reads wait to be sent in a batch (the batches in flight are at their limit, or no
        leader was known)."""
        return bool(self._queued)

    def start_pass(self) -> None:
        """Driver, as each pass begins: READS_ANSWERED_AT_ONCE may be answered in it (a pass may
        feed the core twice, so the slice is counted per pass, not per flush)."""
        self._answers_left = READS_ANSWERED_AT_ONCE

    def flush(self, raw: RawNode, now_ms: int) -> None:
        """Driver, once per loop (`now_ms` read at its start): answer the next slice of confirmed
        reads, send this loop's reads as one batch, re-send lost ones."""
        if self._confirmed:
            self._answer_confirmed()
        self._note_lost_ticks(raw, now_ms)
        if self._in_flight:
            self._resend_lost(now_ms)
        if self._by_deadline:
            self._expire(now_ms)
        if self._queued:
            reads = [read for read in self._queued if read.awaiting_index and not read.finished]
            self._queued = []
            if reads:
                self._send_batch(raw, reads)

    def _send_batch(self, raw: RawNode, reads: list[_Read]) -> None:
        is_leader = self._facts.leader_id == self._node.config.node_id
        limit = LEADER_BATCHES_IN_FLIGHT if is_leader else FOLLOWER_BATCHES_IN_FLIGHT
        if sum(not batch.resent for batch in self._in_flight.values()) >= limit:
            self._queued.extend(reads)  # next loop; the reads' own timeouts bound the wait
            return
        context = b"R" + self._nonce + next(self._context_ids).to_bytes(8, "big")
        try:
            raw.read_index(context)
        except ReadIndexDropped:
            self._queued.extend(reads)  # no leader known yet: try again next loop (ticks wake us)
            return
        self._in_flight[context] = _Batch(reads, self._node.now_ms())
        self.batches_sent += 1
        self._observer.count_read_index_round()

    def _resend_lost(self, now_ms: int) -> None:
        """A READ_INDEX (or its answer) may be lost with a peer link: after one election timeout
        without an answer its reads go out again in a new batch (a newer read index is as good for
        reads queued earlier). The old context still counts if its answer comes after all: a slow
        leader is not a lost one, and dropping its answer would starve a loaded follower."""
        election_timeout_ms = self._node.config.election_tick * self._node.config.tick_ms
        for context, batch in list(self._in_flight.items()):
            age_ms = now_ms - batch.sent_ms
            if age_ms > self._node.config.request_timeout_ms:
                del self._in_flight[context]  # every read in it has timed out by now
            elif not batch.resent and age_ms > election_timeout_ms:
                batch.resent = True
                self._queued.extend(batch.reads)

    def _note_lost_ticks(self, raw: RawNode, now_ms: int) -> None:
        tick_ms = self._node.config.tick_ms
        counted = raw.ticks + self._node.unfed_ticks
        if self._clock_origin is None:
            self._clock_origin = (now_ms, counted)
            return
        origin_ms, origin_ticks = self._clock_origin
        lost_ticks = (now_ms - origin_ms) / tick_ms - (counted - origin_ticks)
        if lost_ticks > LOST_TICKS_TOLERATED:
            self._lease_blocked_until_ms = now_ms + self._node.config.election_tick * tick_ms
            self._clock_origin = (now_ms, counted)
            log.debug("%s: core clock %.0f ticks behind; no lease reads for one election timeout",
                     self._node.config.node_id, lost_ticks)

    def on_read_states(self, read_states: tuple[ReadState, ...]) -> None:
        """Driver: read indexes arrived; each read waits until applied reaches its index."""
        for state in read_states:
            batch = self._in_flight.pop(state.context, None)
            if batch is None:
                continue  # from a previous life of this node, or already expired
            self.leader_contact_ms = self._node.now_ms()
            for read in batch.reads:
                if read.awaiting_index and not read.finished:
                    self._stop_awaiting(read)
                    if self._read_index_reached(state.index):
                        self._confirmed.append(read)
                    else:
                        self._pending.add(read, state.index)
        self.release()

    def _stop_awaiting(self, read: _Read) -> None:
        if read.awaiting_index:
            read.awaiting_index = False
            self._awaiting_index -= 1

    def on_applied(self) -> None:
        """Driver: the applied index moved (entries or a snapshot)."""
        self.last_progress_ms = self._node.now_ms()
        self.release()

    def release(self) -> None:
        """The reads whose index is now applied are answered, a slice at once."""
        self._confirmed.extend(self._pending.release(self._facts.applied_index))
        if self._confirmed:
            self._answer_confirmed()

    def _answer_confirmed(self) -> None:
        confirmed = self._confirmed
        answering = min(len(confirmed), self._answers_left)
        self._answers_left -= answering
        for _ in range(answering):
            _finish(confirmed.popleft())
        if confirmed:
            self._node.wake_driver()  # the next slice in the next pass

    def heard_from(self, sender: str) -> None:
        if sender == self._facts.leader_id:
            self.leader_contact_ms = self._node.now_ms()

    def on_leader_change(self) -> None:
        """Contexts sent to the old leader will not be answered: send them again to the new one."""
        for batch in self._in_flight.values():
            if not batch.resent:
                self._queued.extend(batch.reads)
        self._in_flight.clear()

    def fail_all(self, why: str) -> None:
        for read in [*self._confirmed, *self._queued, *(r for b in self._in_flight.values() for r in b.reads),
                     *self._pending.clear()]:
            _finish(read, why)
            read.awaiting_index = False  # type: ignore[attr-defined]
        self._confirmed.clear()
        self._queued.clear()
        self._in_flight.clear()
        self._by_deadline.clear()
        self._awaiting_index = 0

    def metrics(self) -> dict[str, float]:
        return {
            "reads_lease": float(self.lease_reads),
            "reads_read_index": float(self.index_reads),
            "reads_stale": float(self.stale_reads),
            "reads_timed_out": float(self.timeouts),
            "read_index_batches": float(self.batches_sent),
            "reads_waiting": float(self._awaiting_index + len(self._pending) + len(self._confirmed)),
        }


def _finish(read: object, failure: str | None = None) -> None:
    assert isinstance(read, _Read)
    if not read.finished:
        read.finished = True
        read.on_done(failure)


def _bad_level(request: RemotingCommand) -> RemotingCommand:
    return _response(request, ResponseCode.SYSTEM_ERROR,
                     f"consistency {request.ext(CONSISTENCY_KEY)!r} is not one of {', '.join(CONSISTENCY_LEVELS)}")


def _response(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return make_response(request, code, remark)
