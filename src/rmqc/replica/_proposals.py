"""Proposals and their waiters: requests queued for the next append (group commit), proposed and
waiting for their entry to be applied, and failed when they cannot be (timeout, leadership lost,
disk full, stopping). Every waiter's `on_done` runs exactly once and never awaits: no task per
waiting request.

How a write fails before its commit, and its answer (every failure is answered the moment it is
known; only the first below waits for the request timeout, because nothing else tells):
- no commit within `request_timeout_ms` (the quorum is slow or unreachable, yet this node is still
  leader): SYSTEM_ERROR, COMMIT_TIMEOUT_REMARK (Java's words);
- more waiting than MAX_PENDING_PROPOSALS / MAX_WAITERS, or Raft dropped the proposal (a leader
  transfer in flight, the uncommitted-size bound): SYSTEM_BUSY, OVERLOAD_REMARK or `proposal
  dropped: ...`;
- this node is not (or no longer) the serving leader: CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK;
- the disk is full: SYSTEM_ERROR, the alarm's remark (queued requests, and requests in the log
  whose commit needs this node's write: Disk);
- the node stops: SYSTEM_ERROR, why it stops."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from rmqc.errors import ProposalDropped, RmqcError
from rmqc.fsm import ApplyResult, Command, encode_commands_as_decoded
from rmqc.raft import RawNode
from rmqc.remoting import RemotingCommand, ResponseCode, make_response

log = logging.getLogger("rmqc.replica")

# Requests waiting to enter the log. Beyond this a request is answered SYSTEM_BUSY at once: the
# group commit already batches everything waiting, so a longer queue only adds latency.
MAX_PENDING_PROPOSALS = 65_536
# Requests proposed and not yet answered (each also holds a connection's in-flight slot).
MAX_WAITERS = 262_144
COMMIT_TIMEOUT_REMARK = "java.util.concurrent.TimeoutException: commit wait"
NOT_LEADER_REMARK = "The controller is not in leader state"
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"
# The requests of one append share entries: up to this many requests, and their commands up to
# ENTRY_COMMANDS, per entry. Each entry costs the leader and every follower its encoding, its
# journal record part, its Raft bookkeeping, its decoding and its apply call (issue 21); the
# commands of one entry are applied in order, as separate entries would be.
ENTRY_REQUESTS = 128
ENTRY_COMMANDS = 1_024


class RequestFailed(RmqcError):
    """A request could not be completed (not committed in time, leadership lost, node stopping)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def not_leader() -> RequestFailed:
    return RequestFailed(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)


OnApplied = Callable[[list[ApplyResult] | None, "RequestFailed | None"], None]


@dataclass(slots=True)
class Waiter:
    """A request waiting for its entry to be applied; `on_done` runs exactly once."""

    commands: list[Command]
    deadline_ms: int
    on_done: OnApplied
    results: list[ApplyResult] | None = None
    error: RequestFailed | None = None
    finished: bool = False
    index: int = 0
    term: int = 0
    first: int = 0  # its commands' place among those of its entry

    def finish(self, results: list[ApplyResult] | None, error: RequestFailed | None = None) -> None:
        if not self.finished:
            self.finished = True
            self.results, self.error = results, error
            self.on_done(results, error)


class Proposals:
    """Queued (not yet in the log) and waiting (in the log, not yet applied) requests of one replica."""

    def __init__(self, request_timeout_ms: int, group_commit: bool) -> None:
        self._timeout_ms = request_timeout_ms
        self._group_commit = group_commit
        self.queued: list[Waiter] = []
        self.waiting: dict[int, list[Waiter]] = {}  # log index -> the requests sharing that entry
        # log index -> (term, the commands this leader put in that entry): applied as they are,
        # without decoding the entry again, when the applied entry has that index and term (Raft's
        # log matching: then it is this very entry). Only commands equal to their decoding.
        self._own_commands: dict[int, tuple[int, list[Command]]] = {}
        self._by_deadline: deque[Waiter] = deque()  # every waiter, oldest first (one timeout for all)

    def __bool__(self) -> bool:
        return bool(self.queued or self.waiting)

    def enqueue(self, commands: list[Command], on_done: OnApplied, now_ms: int) -> Waiter:
        """Queue commands for the next append. Raises RequestFailed(SYSTEM_BUSY) past the bounds."""
        if len(self.queued) >= MAX_PENDING_PROPOSALS or len(self._by_deadline) >= MAX_WAITERS:
            raise RequestFailed(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        waiter = Waiter(commands, now_ms + self._timeout_ms, on_done)
        self.queued.append(waiter)
        self._by_deadline.append(waiter)
        return waiter

    def next_deadline_ms(self) -> int | None:
        queue = self._by_deadline
        while queue and queue[0].finished:
            queue.popleft()
        return queue[0].deadline_ms if queue else None

    def expire(self, now_ms: int) -> None:
        """Fail the requests whose commit did not come within the request timeout."""
        queue = self._by_deadline
        while queue and (queue[0].finished or queue[0].deadline_ms <= now_ms):
            waiter = queue.popleft()
            if not waiter.finished:
                self._forget(waiter)
                waiter.finish(None, RequestFailed(ResponseCode.SYSTEM_ERROR, COMMIT_TIMEOUT_REMARK))

    def _forget(self, waiter: Waiter) -> None:
        """A timed-out request leaves its entry's list (the others of that entry may still be
        answered); the entry is forgotten with its last waiter."""
        entry = self.waiting.get(waiter.index)
        if entry is not None:
            entry[:] = [other for other in entry if other is not waiter]
            if not entry:
                del self.waiting[waiter.index]

    def propose(self, raw: RawNode, serving: bool, term: int) -> int:
        """Enter what is queued into the log as ONE append (group commit; without it, one request at a
        time, each waiting for the previous one's apply). Returns how many were proposed."""
        if not self.queued:
            return 0
        waiting = [waiter for waiter in self.queued if not waiter.finished]
        if self._group_commit or not serving:
            batch, self.queued = waiting, []
        elif self.waiting:
            self.queued = waiting  # single queue: the next request waits for this one's apply
            return 0
        else:
            batch, self.queued = waiting[:1], waiting[1:]
        if not batch:
            return 0
        if not serving:
            self._fail(batch, not_leader())
            return 0
        entries = _share_entries(batch)
        commands = [[c for waiter in entry for c in waiter.commands] for entry in entries]
        payloads = [encode_commands_as_decoded(entry_commands) for entry_commands in commands]
        try:
            raw.propose_batch([payload for payload, _ in payloads])
        except ProposalDropped as error:
            self._fail(batch, RequestFailed(ResponseCode.SYSTEM_BUSY, f"proposal dropped: {error}"))
            return 0
        first_index = raw.last_index() - len(entries) + 1
        for offset, entry in enumerate(entries):
            index = first_index + offset
            for waiter in entry:
                waiter.index, waiter.term = index, term
            self.waiting[index] = entry
            if payloads[offset][1]:
                self._own_commands[index] = (term, commands[offset])
        return len(batch)

    def own_commands(self, index: int, term: int) -> list[Command] | None:
        """The commands this leader proposed at `index` in `term` (the entry being applied), or
        None: not proposed here in that term, or not equal to their decoding."""
        own = self._own_commands.pop(index, None)
        return own[1] if own is not None and own[0] == term else None

    def applied(self, index: int, term: int, results: list[ApplyResult]) -> None:
        """The entry at `index` of `term` was applied: each of its waiters gets the results of its
        own commands, or NOT_LEADER when another leader's entry took the index."""
        for waiter in self.waiting.pop(index, ()):
            if waiter.term == term:
                waiter.finish(results[waiter.first: waiter.first + len(waiter.commands)])
            else:
                waiter.finish(None, not_leader())

    def refuse_queued(self, error: RequestFailed) -> int:
        """Fail what is queued but not in the log (it can never be persisted now); how many."""
        count = len(self.queued)
        self._fail(self.queued, error)
        self.queued = []
        return count

    def refuse_in_the_log(self, error: RequestFailed) -> int:
        """Fail the requests whose entries are in the log but not applied; how many. Their entries
        stay: an apply later finds no waiter."""
        waiters = self._in_the_log()
        self._fail(waiters, error)
        self._forget_in_the_log()
        return len(waiters)

    def lose_leadership(self, *, keep_waiting: bool = False) -> None:
        """Entries proposed in our term may still commit under the next leader, but we can no longer
        tell the client: answer like Java does when the append is cancelled. `keep_waiting` (the
        leader handed its role over before stopping, and the target held every entry): they stay,
        answered when their entry is applied here (its index and term say it is theirs), as
        NOT_LEADER when another entry takes the index, or at their timeout."""
        if keep_waiting:
            return
        self._fail(self._in_the_log(), not_leader())
        self._forget_in_the_log()

    def fail_all(self, error: RequestFailed) -> None:
        self._fail([*self.queued, *self._in_the_log()], error)
        self.queued = []
        self._forget_in_the_log()

    def _forget_in_the_log(self) -> None:
        self.waiting.clear()
        self._own_commands.clear()

    def _in_the_log(self) -> list[Waiter]:
        return [waiter for entry in self.waiting.values() for waiter in entry]

    @staticmethod
    def _fail(waiters: list[Waiter], error: RequestFailed) -> None:
        for waiter in waiters:
            waiter.finish(None, error)


def _share_entries(batch: list[Waiter]) -> list[list[Waiter]]:
    """The requests of one append, in order, grouped into entries of at most ENTRY_REQUESTS
    requests and ENTRY_COMMANDS commands (a request with more has an entry of its own)."""
    entries: list[list[Waiter]] = []
    commands = ENTRY_COMMANDS
    for waiter in batch:
        if not entries or len(entries[-1]) >= ENTRY_REQUESTS or commands + len(waiter.commands) > ENTRY_COMMANDS:
            entries.append([])
            commands = 0
        waiter.first = commands
        entries[-1].append(waiter)
        commands += len(waiter.commands)
    return entries


class AnswerOnApply:
    """The `on_done` of a request whose commands were proposed: `respond` gets its answer, built
    by its processor's `finish` (or the failure). One object per waiting request, not a closure
    with a cell per name, and holding `finish` rather than the whole Propose: what waiting requests
    keep alive is what fills the cyclic collector's young generation (issue 21)."""

    __slots__ = ("finish", "request", "respond")

    def __init__(self, request: RemotingCommand, finish: Callable[[list[ApplyResult]], RemotingCommand],
                 respond: Callable[[RemotingCommand | None], None]) -> None:
        self.request, self.finish, self.respond = request, finish, respond

    def __call__(self, results: list[ApplyResult] | None, error: RequestFailed | None) -> None:
        self.respond(self._answer(results, error))

    def _answer(self, results: list[ApplyResult] | None, error: RequestFailed | None) -> RemotingCommand:
        if error is not None:
            return make_response(self.request, error.code, error.remark)
        assert results is not None
        try:
            return self.finish(results)
        except Exception as failure:
            log.exception("request %s failed after apply", self.request.code)
            return make_response(self.request, ResponseCode.SYSTEM_ERROR, f"{failure!r}")
