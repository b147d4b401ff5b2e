"""Private rmqc requests for operators (`rmqc admin transfer-leader`, `rmqc admin snapshot save`),
in the range of RMQC_NODE_STATUS (60001); Java controllers answer them 3 (not supported).

RMQC_TRANSFER_LEADER (60002), extFields `to` (optional: a voter id). Only the leader decides; any
other node answers CONTROLLER_NOT_LEADER naming the leader (extFields `leaderId`,
`leaderAddress`), and clients retry there (forwarding would not do: the forwarding node drops a
forward as soon as it sees the leader change, which a successful transfer always does). The
leader answers 0 once the target leads and has applied an entry of its own term (it serves
writes), with body JSON {"from", "to", "term", "tookMs"}; else code 1 with what went wrong: an
unknown id, a learner, no other voter, a transfer already running, a leader that does not serve
yet (above all one still waiting out an older leader's lease after a takeover: issue 19, it refuses
to transfer until then), or the target not taking over within the timeout (the core gives up
after one election timeout and the leader stays).

RMQC_SNAPSHOT_SAVE (60003): any node's applied state at one index, with that index's term and the
membership applied with it, as a snapshot file (rmqc.storage._snapshot_file) in the body. Taken
once a ReadIndex round confirmed that the node has applied every write acknowledged before the
request (as a linearizable read), in one synchronous step of the node's only thread, so the state,
index and membership belong together.

Both are in the replicated audit: a RecordOperation (who asked, from where, through which node)
commits before the transfer starts, and before the snapshot is handed out; if it cannot be logged,
the request is refused. A follower has the leader log it (RMQC_RECORD_OPERATION, over the peer
link; refused from a client connection, so nobody writes records in another's name).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

import orjson

from rmqc.errors import RmqcError
from rmqc.fsm import ApplyResult, Command, ControllerState, OperatorAction, Origin, RecordOperation
from rmqc.raft import RawNode, SnapshotMeta, Status
from rmqc.reads import ReadQueueFull
from rmqc.remoting import (
    RMQC_RECORD_OPERATION,
    RMQC_SNAPSHOT_SAVE,
    RMQC_TRANSFER_LEADER,
    RemotingCommand,
    ResponseCode,
    make_request,
    make_response,
)
from rmqc.storage import encode_snapshot_file

from ._audit import with_origin
from ._facts import RaftFacts
from ._forwarding import Forwards
from ._io import Answer, Clock, Outbox, ReplicaConfig, ReplicaStorage
from ._proposals import Proposals, RequestFailed
from ._reads import ReadPath

log = logging.getLogger("rmqc.replica")

OPERATION_REQUESTS = frozenset({RMQC_TRANSFER_LEADER, RMQC_SNAPSHOT_SAVE, RMQC_RECORD_OPERATION})
# What a record's callback gets: None once it is applied, else why it could not be logged.
Recorded = Callable[[str | None], None]
# Room left in a frame for the remoting header around a snapshot body.
FRAME_HEADER_ROOM_BYTES = 64 * 1024


@dataclass(slots=True)
class _Transfer:
    request: RemotingCommand | None  # None: the node's own handover before it stops (nobody to answer)
    token: Hashable
    target: str
    start_term: int
    started_ms: int
    timeout_ms: int
    sent: bool = False
    removal: bool = False  # a leader's RMQC_MEMBERS_REMOVE of itself: the handover comes first


class OperationsCalls(Protocol):
    """What Operations asks of the replica that owns it."""

    def now_ms(self) -> int: ...
    def wake_driver(self) -> None: ...

    def enqueue(self, commands: list[Command],
                on_done: Callable[[list[ApplyResult] | None, RequestFailed | None], None]) -> None: ...

    def handover_ended(self, error: str | None, took_ms: int) -> None: ...


class Operations:
    """The operator requests of one Replica. `feed` and `on_applied` run in its driver pass, the
    rest when the request arrives or its time runs out; each request ends in exactly one Answer."""

    def __init__(self, config: ReplicaConfig, facts: RaftFacts, raw: RawNode, outbox: Outbox, clock: Clock,
                 storage: ReplicaStorage, state: ControllerState, proposals: Proposals, forwards: Forwards,
                 reads: ReadPath, replica: OperationsCalls) -> None:
        self._config, self._facts, self._raw, self._clock = config, facts, raw, clock
        self._storage, self._state, self._proposals = storage, state, proposals
        self._forwards, self._reads = forwards, reads
        self._replica = replica
        self._out = outbox.append
        self._transfer: _Transfer | None = None

    def handle(self, request: RemotingCommand, token: Hashable, origin: Origin | None, *, forwarded: bool) -> None:
        if request.code == RMQC_SNAPSHOT_SAVE:
            self._snapshot(request, token, origin)
        elif request.code == RMQC_RECORD_OPERATION:
            self._record_for_a_follower(request, token, origin, forwarded=forwarded)
        else:
            self._transfer_leader(request, token, origin)

    # ----- the audit record -----

    def _record(self, action: OperatorAction, detail: str, origin: Origin | None, done: Recorded) -> None:
        """Commit a RecordOperation, through the leader when this node is not it; `done` once."""
        command = RecordOperation(action, detail, self._clock.wall_ms(), origin)
        if self._facts.serving_as_leader:
            def applied(_results: list[ApplyResult] | None, error: RequestFailed | None) -> None:
                done(None if error is None else error.remark)

            try:
                self._replica.enqueue([command], applied)
            except RequestFailed as failure:
                done(failure.remark)
            return
        if self._facts.leader_id is None or self._facts.leader_id == self._config.node_id:
            done("no serving leader is known to log it")
            return
        request = make_request(RMQC_RECORD_OPERATION, 0, {"action": action.value, "detail": detail})
        if origin is not None:
            request = with_origin(request, origin)

        def answered(response: RemotingCommand) -> None:
            done(None if response.code == ResponseCode.SUCCESS else f"the leader: {response.remark}")

        self._forwards.forward(self._facts.leader_id, request, None, self._replica.now_ms(), answered)

    def _record_for_a_follower(self, request: RemotingCommand, token: Hashable, origin: Origin | None, *,
                               forwarded: bool) -> None:
        if not forwarded:
            self._out(Answer(token, make_response(request, ResponseCode.NO_PERMISSION,
                                                  "operation records come from controller nodes only")))
            return
        if not self._facts.serving_as_leader:
            self._out(Answer(token, self.not_leader(request)))
            return
        try:
            action = OperatorAction(request.ext("action") or "")
        except ValueError:
            self._out(Answer(token, make_response(request, ResponseCode.INVALID_PARAMETER,
                                                  f"unknown operation {request.ext('action')!r}")))
            return

        def done(failure: str | None) -> None:
            code = ResponseCode.SUCCESS if failure is None else ResponseCode.SYSTEM_ERROR
            self._out(Answer(token, make_response(request, code, failure)))

        self._record(action, request.ext("detail") or "", origin, done)

    # ----- transfer -----

    def _transfer_leader(self, request: RemotingCommand, token: Hashable, origin: Origin | None) -> None:
        target = self._transfer_target(request, token)
        if target is None:
            return
        if target == self._config.node_id:
            self._out(Answer(token, _transferred(request, target, target, self._facts.term, 0)))
            return

        def recorded(failure: str | None) -> None:
            if failure is not None:
                self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR,
                                                      f"leadership not transferred: not logged: {failure}")))
            elif self._transfer_target(request, token, target) is not None:  # still so, once logged
                self._transfer = _Transfer(request, token, target, self._facts.term, self._replica.now_ms(),
                                           self._config.request_timeout_ms)
                self._replica.wake_driver()

        self._record(OperatorAction.TRANSFER_LEADER, f"from {self._config.node_id} to {target}", origin, recorded)

    def _transfer_target(self, request: RemotingCommand, token: Hashable, wanted: str | None = None) -> str | None:
        """The voter to hand over to, or None once the refusal is answered."""
        if self._facts.leader_id != self._config.node_id:
            self._out(Answer(token, self.not_leader(request)))
            return None
        if not self._facts.serving_as_leader:
            self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR, self.not_serving_yet())))
            return None
        target, refusal = self._choose_target(wanted or request.ext("to") or None)
        if refusal is not None:
            self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR, refusal)))
            return None
        return target

    def hand_over_before_stop(self) -> tuple[str | None, str]:
        """The leader is stopping (SIGTERM, Ctrl-C; Replica.begin_graceful_stop): hand the leadership
        to the most up-to-date other voter first. Returns (target, what was decided, in words) or
        (None, why not): a follower, a sole voter, a leader not serving yet or a transfer under way
        just stops. Bounded by two election timeouts (the core gives up after one)."""
        if self._facts.leader_id != self._config.node_id:
            return None, "not the leader: nothing to hand over"
        if not self._facts.serving_as_leader:
            return None, f"no handover: {self.not_serving_yet()}"
        target, refusal = self._choose_target(None)
        if refusal is not None or target is None:
            return None, f"no handover: {refusal}"
        progress = self._raw.status().progress
        matches = ", ".join(f"{voter} at {progress[voter].match}{'' if progress[voter].recent_active else ' (silent)'}"
                            for voter in sorted(progress) if voter != self._config.node_id)
        timeout_ms = 2 * self._config.election_tick * self._config.tick_ms
        self._transfer = _Transfer(None, None, target, self._facts.term, self._replica.now_ms(), timeout_ms)
        self._replica.wake_driver()
        return target, (f"handing the leadership to {target}, the most up-to-date voter (last index "
                        f"{self._raw.status().last_index}; {matches})")

    def hand_over_before_removal(self, request: RemotingCommand, token: Hashable) -> None:
        """The leader was asked to remove itself (rmqc.replica._membership): it transfers the
        leadership to the most up-to-date other voter, then answers CONTROLLER_NOT_LEADER naming
        it, and the client retries the removal there (a leader never commits its own removal)."""
        target, refusal = self._choose_target(None)
        if refusal is not None:
            self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR,
                                                  f"{self._config.node_id} not removed: {refusal}")))
            return
        assert target is not None
        self._transfer = _Transfer(request, token, target, self._facts.term, self._replica.now_ms(),
                                   self._config.request_timeout_ms, removal=True)
        self._replica.wake_driver()

    def _finish(self, error: str | None = None, new_term: int = 0) -> None:
        transfer, self._transfer = self._transfer, None
        assert transfer is not None
        request = transfer.request
        if request is None:  # the handover before a stop
            self._replica.handover_ended(error, self._replica.now_ms() - transfer.started_ms)
            return
        if error is not None:
            what = f"{self._config.node_id} not removed: " if transfer.removal else ""
            response = make_response(request, ResponseCode.SYSTEM_ERROR, f"{what}leadership not transferred: {error}")
        elif transfer.removal:
            log.info("%s: leadership handed to %s before its own removal", self._config.node_id, transfer.target)
            response = self.not_leader(request, f"{self._config.node_id} handed the leadership over before its "
                                                f"removal; retry the removal at the new leader")
        else:
            took_ms = self._replica.now_ms() - transfer.started_ms
            log.info("%s: leadership transferred to %s in %d ms", self._config.node_id, transfer.target, took_ms)
            response = _transferred(request, self._config.node_id, transfer.target, new_term, took_ms)
        self._out(Answer(transfer.token, response))

    def next_deadline_ms(self) -> int | None:
        transfer = self._transfer
        return None if transfer is None else transfer.started_ms + transfer.timeout_ms

    def expire(self, now_ms: int) -> None:
        deadline = self.next_deadline_ms()
        if deadline is not None and now_ms >= deadline:
            transfer = self._transfer
            assert transfer is not None
            what = "request_timeout_ms" if transfer.request is not None else "two election timeouts"
            self._finish(f"{transfer.target} did not take over within {transfer.timeout_ms} ms ({what}); the "
                         f"leader is now {self._facts.leader_id or 'unknown'}")

    def not_leader(self, request: RemotingCommand, why: str = "not the leader") -> RemotingCommand:
        """CONTROLLER_NOT_LEADER naming the leader and its address (from the applied address book)."""
        leader = self._facts.leader_id
        address = self._facts.address_of(leader) if leader else None
        if leader is None or address is None:
            return make_response(request, ResponseCode.CONTROLLER_NOT_LEADER, f"{why}, and no leader is known")
        return make_response(request, ResponseCode.CONTROLLER_NOT_LEADER,
                             f"{why}; the leader is {leader} at {address}",
                             {"leaderId": leader, "leaderAddress": address})

    def not_serving_yet(self) -> str:
        """Why a leader that has not committed an entry of its term yet refuses."""
        raw = self._raw
        if raw.commit_blocked_until_tick:
            # issue 19: its target would skip the wait for the older leader's lease
            wait_ms = max(1, raw.commit_blocked_until_tick - raw.ticks) * self._config.tick_ms
            return (f"{self._config.node_id} took over from a leader that may still hold its lease and refuses to "
                    f"transfer until that lease has run out (about {wait_ms} ms more); retry then")
        return f"{self._config.node_id} was just elected and serves once an entry of its term commits; retry then"

    def _choose_target(self, wanted: str | None) -> tuple[str | None, str | None]:
        """(target, None) or (None, why not)."""
        status = self._raw.status()
        if self._transfer is not None or status.lead_transferee is not None:
            busy = self._transfer.target if self._transfer is not None else status.lead_transferee
            return None, f"a transfer to {busy} is already in progress; wait for its answer"
        if wanted is not None:
            return _checked_target(wanted, status)
        others = [voter for voter in status.voters if voter != status.id]
        if not others:
            return None, f"{status.id} is the only voter: there is no other node to lead"
        # the most up-to-date voter (recently heard from first), so TimeoutNow can go at once
        best = max(others, key=lambda voter: (status.progress[voter].recent_active, status.progress[voter].match))
        return best, None

    def feed(self, raw: RawNode) -> None:
        """Driver: start the transfer a request asked for."""
        transfer = self._transfer
        if transfer is None or transfer.sent:
            return
        transfer.sent = True
        if self._facts.leader_id != self._config.node_id:
            # a follower's core would pass the request on to whoever leads now: not what was asked
            self._finish(f"{self._config.node_id} lost the leadership before the transfer started")
            return
        if transfer.request is None and self._proposals.queued:
            # the writes taken before the stop enter the log first: the core drops proposals once
            # a transfer is under way, and the target is brought up to date with them
            self._proposals.propose(raw, self._facts.serving_as_leader, self._facts.term)
        try:
            raw.transfer_leader(transfer.target)
        except RmqcError as error:
            self._finish(str(error))

    def on_applied(self, term: int) -> None:
        """Driver, after committed entries of `term` were applied: is the transfer over?"""
        transfer = self._transfer
        if transfer is None or not transfer.sent:
            return
        leader, me = self._facts.leader_id, self._config.node_id
        if term > transfer.start_term and term == self._facts.term and leader is not None and leader != me:
            error = None if leader == transfer.target else f"{leader} was elected instead of {transfer.target}"
            self._finish(error, term)
        elif leader == me and self._raw.status().lead_transferee is None:
            self._finish(f"{transfer.target} did not take over within one election timeout (behind, slow "
                            f"or unreachable); {self._config.node_id} stays leader")

    # ----- snapshot -----

    def _snapshot(self, request: RemotingCommand, token: Hashable, origin: Origin | None) -> None:
        """After a ReadIndex round (bounded by request_timeout_ms), so that the state holds every
        write acknowledged before the request, on a follower too; handed out once logged."""

        def confirmed(failure: str | None) -> None:
            if failure is not None:
                self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR,
                                                      f"snapshot not taken: {failure}")))
                return
            taken = self._snapshot_now(request)
            if taken.code != ResponseCode.SUCCESS:
                self._out(Answer(token, taken))
                return

            def recorded(not_logged: str | None) -> None:
                self._out(Answer(token, taken if not_logged is None else make_response(
                    request, ResponseCode.SYSTEM_ERROR, f"snapshot not handed out: not logged: {not_logged}")))

            detail = (f"index {taken.ext('index')} (term {taken.ext('term')}) of {self._config.node_id}, "
                      f"{len(taken.body or b'')} bytes")
            self._record(OperatorAction.SNAPSHOT_SAVE, detail, origin, recorded)

        try:
            self._reads.confirm_linearizable(confirmed)
        except ReadQueueFull as error:
            self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_BUSY, f"[OVERLOAD]{error}")))

    def _snapshot_now(self, request: RemotingCommand) -> RemotingCommand:
        index = self._facts.applied_index
        meta = SnapshotMeta(index=index, term=self._storage.term(index), conf_state=self._facts.conf_state)
        origin = {"group": self._config.group, "nodeId": self._config.node_id, "savedAtMs": self._clock.wall_ms()}
        body = encode_snapshot_file(meta, self._state.snapshot(), origin)
        limit = self._config.max_frame_bytes - FRAME_HEADER_ROOM_BYTES
        if len(body) > limit:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"the snapshot has {len(body)} bytes, more than one frame carries ({limit}); "
                                 f"raise max_frame_bytes on the node, or copy a stopped node's data directory")
        return make_response(request, ResponseCode.SUCCESS, None, {"index": index, "term": meta.term}, body)


def _checked_target(wanted: str, status: Status) -> tuple[str | None, str | None]:
    if wanted in status.voters:
        return wanted, None
    if wanted in status.learners:
        return None, f"{wanted} is a learner, not a voter: only a voter can lead"
    return None, f"unknown node id {wanted!r}; the voters are {', '.join(status.voters)}"


def _transferred(request: RemotingCommand, old: str, new: str, term: int, took_ms: int) -> RemotingCommand:
    body = orjson.dumps({"from": old, "to": new, "term": term, "tookMs": took_ms})
    return make_response(request, ResponseCode.SUCCESS, None, None, body)
