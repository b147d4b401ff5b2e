"""Replica: the facade of one sans-IO controller node (the contract is in _io.py). Its inputs are
plain method calls that never block; everything it decides leaves as actions in its outbox. The
work is done by one part per concern: Driver (Raft core and the Ready), Proposals (group commit
and waiters), ReadPath (reads at every level), Forwards (follower -> leader), Liveness (deadlines,
digests, elections), Operations (transfer-leader, snapshot save), Disk (full disk, failed write).

The Replica wires them: each part gets the collaborators it uses (and, for what it asks back of
the Replica, a small Protocol of its own module), never the Replica. What they read of the Raft
side (the leader, the term, the applied index and membership, serving) is one RaftFacts
(rmqc.replica._facts), which only the Driver writes; the Replica shows it read-only."""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable, Hashable, Sequence

from rmqc.controller import (
    ControllerConfig,
    ControllerProcessor,
    NodeInfo,
    NoReply,
    Propose,
    Reply,
    RequestContext,
)
from rmqc.fsm import ApplyResult, BrokerGroup, Command, ControllerState, ElectMaster, NotificationSent, Origin
from rmqc.liveness import BrokerKey, Heartbeat, HeartbeatTable
from rmqc.raft import Config as RaftConfig, ConfState, Message, RawNode, RepairState
from rmqc.remoting import (
    LEADER_WRITE_REQUESTS,
    READ_REQUESTS,
    RMQC_NODE_STATUS,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    make_response,
)

from ._alarms import REPAIRING, DiskFullAlarm
from ._audit import forwarded_origin, with_origin
from ._deadlines import Deadlines
from ._disk import Disk
from ._driver import Driver
from ._events import ALARM, HEARTBEAT, LEADER_CHANGED, MEMBERSHIP_CHANGED, NOTIFIED, EventLog, is_failover
from ._facts import RaftFacts
from ._failovers import FailoverHistory
from ._forwarding import Forwards, LeaderWaits
from ._health import HealthCheck
from ._io import (
    Answer,
    Clock,
    MembersChanged,
    Notify,
    Observer,
    Outbox,
    ReplicaConfig,
    ReplicaStatus,
    ReplicaStorage,
    SaveNow,
    Saver,
    SnapshotOutcome,
)
from ._liveness import Liveness
from ._membership import MEMBERSHIP_REQUESTS, Membership, with_known_addresses
from ._operations import OPERATION_REQUESTS, Operations
from ._proposals import NOT_LEADER_REMARK, AnswerOnApply, Proposals, RequestFailed
from ._reads import ReadPath, Respond, read_nonce
from ._status import build_status, status_answer

log = logging.getLogger("rmqc.replica")

# Peer messages waiting for the driver; Raft tolerates loss, so beyond this they are dropped.
MAX_INBOUND_MESSAGES = 65_536
# After a leader's process is gone, how long the other survivors give its designated successor to
# win before campaigning themselves (far below an election timeout, far above a vote round trip).
SUCCESSOR_GRACE_MS = 150
# Ticks later than this many intervals are not replayed as a burst: the node was stalled.
MAX_TICK_BURST = 10
# Requests a follower forwards to the leader (remoting's table).
_LEADER_WRITES = LEADER_WRITE_REQUESTS
# NameServer writes a follower answers itself when they change nothing (its liveness relayed).
_REGISTRATION_REFRESHES = frozenset({int(RequestCode.REGISTER_BROKER), int(RequestCode.QUERY_DATA_VERSION)})
_HEARTBEAT_CODE = int(RequestCode.BROKER_HEARTBEAT)  # every decided request compares with it: an int reads faster
KEEP_CURRENT_MASTER = "keep_current_master"  # an election answered "the master still exists" (a metric's label)


class _NullObserver:
    def observe_append(self, proposals: int) -> None: ...
    def observe_fsync(self, seconds: float) -> None: ...
    def count_read_index_round(self) -> None: ...
    def count_elections(self, results: object) -> None: ...
    def count_election(self, outcome: str) -> None: ...
    def set_alarm(self, name: str, raised: bool) -> None: ...
    def observe_detection(self, seconds: float) -> None: ...
    def observe_failover_step(self, step: str, seconds: float) -> None: ...


def _nothing() -> None:
    pass


def _no_checks() -> tuple[HealthCheck, ...]:
    return ()


class _AnswerAction:
    """`respond` of a client's request: its answer leaves as Answer(token, response). An object,
    not a lambda: a lambda would make every request build cells for both names (see AnswerOnApply)."""

    __slots__ = ("outbox", "token")

    def __init__(self, outbox: Outbox, token: Hashable) -> None:
        self.outbox, self.token = outbox, token  # the outbox, not its bound append: one object less

    def __call__(self, response: RemotingCommand | None) -> None:
        self.outbox.append(Answer(self.token, response))


class Replica:
    def __init__(self, config: ReplicaConfig, storage: ReplicaStorage, clock: Clock, rng: random.Random,
                 outbox: Outbox, *, controller_config: ControllerConfig | None = None,
                 observer: Observer | None = None, wake: Callable[[], None] | None = None,
                 rearm: Callable[[], None] | None = None, saver: Saver | None = None,
                 flush: Callable[[], None] | None = None) -> None:
        self.config = config
        self.storage = storage
        self.saver: Saver = saver or SaveNow(storage)
        self.clock = clock
        # the clock's own bound method, read about ten times a write: no frame of the replica's around it
        self.now_ms: Callable[[], int] = clock.monotonic_ms
        self.outbox = outbox
        self.observer: Observer = observer or _NullObserver()
        self._wake, self._rearm = wake or _nothing, rearm or _nothing
        self.flush_outbox = flush or _nothing  # the outbox's drain point before a save (rmqc.replica._runner)
        now_ms = self.now_ms()
        self.state = ControllerState()
        table = HeartbeatTable()
        self.processor = ControllerProcessor(controller_config or ControllerConfig(), self.state, table)
        self.events = EventLog()  # rmqc events: failovers and their timelines, leader and membership changes
        self.processor.awaited_heartbeats = self.events.awaiting_heartbeat
        self.processor.on_awaited_heartbeat = self._awaited_heartbeat
        self.became_leader_ms = 0
        self.unfed_ticks = 0  # ticks counted by advance_time, not yet given to the core
        self.inbound: deque[Message] = deque()
        self.inbound_dropped = 0
        self.leader_commit_seen = 0  # the highest commit index a peer's message carried (readiness: lag)
        # The shell's own health checks (liveness: its event loop, its disk), in the status answer.
        self.shell_health: Callable[[], Sequence[HealthCheck]] = _no_checks
        self.drive_wanted = False
        self.stopping = False
        # Graceful stop (begin_graceful_stop): the leader hands its role over before the process
        # exits. Meanwhile leader-only writes are held (then forwarded to the new leader) and the
        # requests in the log keep waiting for their entry instead of being answered 2007.
        self.handing_over = False
        self.handover_outcome: str | None = None  # how the handover ended, in words (None: not over)
        self.elections_in_flight = 0
        self._next_tick_ms = now_ms + config.tick_ms  # the next tick not yet counted
        # When the core next needs a tick, as planned after the last driver pass (plan_ticks): the
        # ticks before it are quiet (RaftCore.quiet_ticks), counted whenever the replica next runs.
        self._ticks_due_ms = self._next_tick_ms
        self._successor_grace = _SuccessorGrace(self)
        self._node_info_cache: tuple[str | None, NodeInfo] | None = None  # (leader_id, info)
        self.proposals = Proposals(config.request_timeout_ms, config.group_commit)
        self.failovers = FailoverHistory()  # the status page's last failovers (every node)
        self.forwards = Forwards(outbox, config.request_timeout_ms)
        election_timeout_ms = config.election_tick * config.tick_ms
        self.leader_waits = LeaderWaits(outbox, min(config.request_timeout_ms, election_timeout_ms))
        self.liveness = Liveness(config, table, self.processor, outbox, self._propose_elections, now_ms)
        nonce = read_nonce(rng)  # drawn before the core's draws, as it always was
        self.raw, bootstrapped = self._open_raft(rng)
        self.disk = Disk(config, self.facts, storage, self.proposals, outbox, self.now_ms, clock, self.set_alarm)
        self.reads = ReadPath(self, self.facts, self.raw, self.processor, self.observer, nonce,
                              self.events_after_index)
        self.operations = Operations(config, self.facts, self.raw, outbox, clock, storage, self.state,
                                     self.proposals, self.forwards, self.reads, self)
        self.membership = Membership(config, self.facts, self.raw, outbox, self.operations, self.now_ms,
                                     self.wake_driver)
        self.driver = Driver(self, self.facts, config=config, raw=self.raw, inbound=self.inbound, outbox=outbox,
                             storage=storage, state=self.state, processor=self.processor,
                             observer=self.observer, proposals=self.proposals, reads=self.reads,
                             operations=self.operations, membership=self.membership, disk=self.disk,
                             failovers=self.failovers, bootstrap_membership_unsaved=bootstrapped)
        self.deadlines = Deadlines()  # in advance_time's order
        for source in (self._successor_grace, self.forwards, self.leader_waits, self.operations,
                       self.membership, _RouteExpiry(self)):
            self.deadlines.register(source)
        self.drive_wanted = True  # a new core may have a Ready already (a bootstrap's membership)

    def _open_raft(self, rng: random.Random) -> tuple[RawNode, bool]:
        """The core over what the storage holds, and the facts it starts from; True with it when
        the core bootstraps a new group's membership (the driver saves it once durable)."""
        hard_state, conf_state = self.storage.initial_state()
        # Entries up to this index were committed before this process started: applying them again
        # (from the snapshot on) is a replay, and makes no events.
        self.events_after_index = hard_state.commit
        snapshot = self.storage.snapshot()
        if not snapshot.is_empty:
            self.state.restore(snapshot.data)
            self.processor.config_restored()
        config = self.config
        # `join` matters only until a membership is stored: a joining node that stored entries but
        # crashed before applying its first membership still must not bootstrap `peers`. Nor does
        # a repairing node whose log was given up: its membership comes from the leader.
        self.repair_reason = self.storage.repair_reason()
        joining = (config.join or self.repairing) and not conf_state.members
        if conf_state.members or joining:
            bootstrap: tuple[str, ...] = ()
        else:  # a new group (or a data directory older than the membership record): `peers`
            bootstrap, conf_state = config.peer_ids, ConfState(voters=config.peer_ids)
        self.facts = RaftFacts(config.node_id, hard_state.term, snapshot.meta.index,
                               snapshot.meta.index if not snapshot.is_empty else 0,
                               with_known_addresses(conf_state, config))
        self.membership_applied(ConfState(), snapshot.meta.index, announce=True)
        raft_config = RaftConfig(
            id=config.node_id,
            election_tick=config.election_tick,
            heartbeat_tick=config.heartbeat_tick,
            idle_heartbeat_tick=config.idle_heartbeat_tick,
            pre_vote=True,
            check_quorum=True,
            lease_drift_ticks=config.lease_drift_ticks,
            lease_ticks=config.lease_ticks,
            max_entries_per_msg=config.max_entries_per_append,
            max_inflight_msgs=config.max_appends_in_flight,
            applied=snapshot.meta.index,
            commit_broadcast=False,  # a lone write: one append and one answer per follower (issue 21)
            repairing=self.repairing,
            # a repair that gave up the log lost the membership too: the voters to ask for their
            # terms are then the ones this node was started with (docs/operations.md)
            repair_peers=config.peer_ids if self.repairing and not conf_state.members else (),
        )
        raw = RawNode(raft_config, self.storage, rng, peers=bootstrap,
                      contexts={node_id: address.encode() for node_id, address in self.facts.conf_state.addresses})
        log.info("%s: term %d, snapshot at %d, log %d..%d%s", config.node_id, hard_state.term,
                 snapshot.meta.index, self.storage.first_index(), self.storage.last_index(),
                 "; joining: waiting for the leader to add us" if joining and not self.repairing else "")
        if self.repairing:
            self.set_alarm(REPAIRING, True)
            log.warning("%s: REPAIRING (%s): not voting or campaigning until this node holds the commit "
                        "index a leader gives it after forgetting its old acknowledgements", config.node_id,
                        self.repair_reason)
        return raw, bool(bootstrap)

    @property
    def repairing(self) -> bool:
        """The storage was found damaged and repaired: the node waits to catch up before it votes."""
        return self.repair_reason is not None

    def end_repair(self, ended: RepairState) -> None:
        """The core's repair is over: recorded durably, then the node votes again."""
        self.storage.end_repair()
        target_index = ended.target[0] if ended.target else 0
        log.warning("%s: REPAIR COMPLETE: this node holds index %d, the commit index leader %s gave it in "
                    "term %d; voting again (%d vote requests refused meanwhile)", self.config.node_id,
                    target_index, self.facts.leader_id, self.facts.term, ended.votes_refused)
        self.repair_reason = None
        self.set_alarm(REPAIRING, False)

    # ----- what the shell reads -----

    @property
    def drive_due(self) -> bool:
        """`drive()` is wanted: inputs wait for the core, a run of Readies goes on, or a replaced
        state is being freed a step per pass."""
        return self.drive_wanted or self.driver.in_run or self.driver.releasing

    @property
    def disk_full(self) -> DiskFullAlarm | None:
        return self.disk.alarm

    def next_wakeup_ms(self) -> int:
        """When `advance_time()` is next needed (monotonic ms): the next tick the core acts on
        (every tick on a leader, the election timeout on an idle follower), or any deadline."""
        soonest = min(self._ticks_due_ms, self.liveness.next_due_ms(self.now_ms()))
        deadline = self.deadlines.next_ms()
        return soonest if deadline is None else min(soonest, deadline)

    def status(self) -> ReplicaStatus:
        return build_status(self)

    def counters(self) -> dict[str, float]:
        stalls = self.liveness.stalls
        return {
            **self.reads.metrics(),
            "inbound_dropped": float(self.inbound_dropped),
            "liveness_rounds": float(self.liveness.rounds),
            "stalls": float(stalls.stalls),
            "stalled_seconds": stalls.total_s,
            "mass_expiry_deferred": float(self.liveness.mass_expiry.deferred),
            "forwards_in_flight": float(len(self.forwards)),
            "requests_held_until_serving": float(len(self.leader_waits)),
            "elections_in_flight": float(self.elections_in_flight),
        }

    def quiescent(self) -> bool:
        """Nothing is waiting to be decided, proposed or committed (tests wait on this)."""
        driver = self.driver
        return not (self.proposals or self.elections_in_flight or self.drive_due or driver.saving is not None
                    or driver.decoding is not None or not self.liveness.quiet())

    # ----- inputs: time and the driver -----

    def advance_time(self) -> None:
        now_ms = self.now_ms()
        round_due = self.liveness.round_due(now_ms)
        self.count_ticks(now_ms)
        if self.unfed_ticks:
            self.wake_driver()
        self.deadlines.expire(now_ms)
        self._liveness_now(now_ms, round_due)

    def _liveness_now(self, now_ms: int, round_due: bool) -> None:
        facts = self.facts
        self.liveness.on_time(now_ms, self.clock.wall_ms(), facts.leader_id, facts.serving_as_leader, round_due)

    def count_ticks(self, now_ms: int) -> None:
        """One tick per tick_ms, counted whenever the replica runs (its timer, and every driver
        pass before it steps anything, so a vote or an append meets an up-to-date lease_age and
        election_elapsed): quiet ticks need no wake-up of their own. Ticks up to a short delay
        after the tick the core needed follow as a burst; a later wake-up is a stall, whose ticks
        are dropped but one (the core must not time out everyone at once after a pause)."""
        tick_ms = self.config.tick_ms
        if now_ms < self._next_tick_ms:
            return
        due_ms = self._ticks_due_ms
        self.liveness.stalled(min(due_ms, self.liveness.next_due_ms(now_ms)), now_ms)
        if now_ms - due_ms > MAX_TICK_BURST * tick_ms:
            self.unfed_ticks += 1
            self._next_tick_ms = now_ms + tick_ms
        else:
            elapsed = (now_ms - self._next_tick_ms) // tick_ms + 1
            self.unfed_ticks += elapsed
            self._next_tick_ms += elapsed * tick_ms
        # until the driver plans again, the ticks from now on are due one by one
        self._ticks_due_ms = max(due_ms, self._next_tick_ms)

    def feed_due(self) -> bool:
        """After a pass, whether feeding the core again now has work: an input arrived or was
        made by the pass (drive_wanted: a proposal made by apply, say), a backlog's next slice
        waits, requests wait for the entry just applied (the single-queue shape), reads wait for
        the read index just answered (a follower keeps one in flight), a sole voter without a
        leader may campaign (a restarted one, once the pass applied its log), or a tick is due (a
        long save: a busy leader must not starve its heartbeats)."""
        return (self.drive_wanted or bool(self.inbound) or bool(self.proposals.queued)
                or self.reads.queued() or (self.facts.sole_voter and self.facts.leader_id is None)
                or bool(self.unfed_ticks) or self.now_ms() >= self._next_tick_ms)

    def plan_ticks(self) -> None:
        """Driver, after each pass fed the core: when the core next needs a tick. Anything that
        waits on driver passes (a request, a read, a full disk) keeps the replica ticking; an
        earlier plan than the timer knows (a follower became leader) rearms it."""
        proposals = self.proposals  # its truth without the __bool__ call: this runs twice a pass
        busy = (proposals.queued or proposals.waiting or self.reads.next_deadline_ms() is not None
                or self.disk.alarm is not None)
        quiet_ticks = 0 if busy else self.raw.quiet_ticks()
        due_ms = self._next_tick_ms + quiet_ticks * self.config.tick_ms
        if due_ms < self._ticks_due_ms:
            self._rearm()
        self._ticks_due_ms = due_ms

    def drive(self) -> bool:
        """One driver pass (Driver.drive); True when another is due at once."""
        more = self.driver.drive()
        if self.leader_waits and self._release_held():
            # this node serves now (the pass made it commit), or is no longer the leader: what
            # waited goes on as if it had just arrived, in arrival order
            for held in self.leader_waits.take_all():
                self._request(held.request, held.channel_id, held.token, held.origin, forwarded=held.forwarded)
        return more

    def _release_held(self) -> bool:
        """The requests held for this node to serve as leader may go on: it serves now (the pass
        made it commit), or another node leads. While it hands its role over before stopping, only
        once the new leader is known (they are forwarded to it)."""
        if self.handing_over:
            return self.facts.leader_id is not None and self.facts.leader_id != self.config.node_id
        return self.facts.serving_as_leader or self.facts.leader_id != self.config.node_id

    def save_finished(self, error: Exception | None) -> None:
        """A save the Saver left to the background ended (None: written)."""
        self.driver.save_finished(error)

    def wake_driver(self) -> None:
        if not self.drive_wanted:
            self.drive_wanted = True
            self._wake()

    # ----- inputs: peers -----

    def raft_messages(self, sender: str, messages: list[Message]) -> None:
        inbound = self.inbound
        commit_seen = self.leader_commit_seen
        for message in messages:
            if len(inbound) >= MAX_INBOUND_MESSAGES:
                inbound.popleft()
                self.inbound_dropped += 1
            inbound.append(message)
            if message.commit > commit_seen:  # only a leader's messages carry a commit index
                commit_seen = message.commit
        self.leader_commit_seen = commit_seen
        self.reads.heard_from(sender)
        self.wake_driver()

    def peer_unreachable(self, peer_id: str) -> None:
        self.raw.report_unreachable(peer_id)
        self.wake_driver()

    def snapshot_sent(self, peer_id: str, ok: bool) -> None:
        self.raw.report_snapshot(peer_id, ok=ok)
        self.wake_driver()

    def peer_down(self, peer_id: str) -> None:
        """The leader's port refuses us: its process is probably gone. Waiting for the election
        timeout would cost two timeouts: the first candidate's pre-vote is refused by the other
        follower, which still counts the dead leader's lease. Instead ONE designated survivor (the
        first in peer order) takes over at once (RawNode.take_over): voters grant although they
        heard the leader lately, every vote rule stays (up-to-date log, one vote per term), and
        the winner commits nothing until the lease the old leader may still hold has run out,
        because "refused" is no proof of death (a REJECT firewall rule, a middlebox's resets, a
        listener closed before the process stops serving). If it cannot win, the others try after
        SUCCESSOR_GRACE_MS (it may have restarted with a shorter log), then the timeout runs."""
        if peer_id != self.facts.leader_id:
            return
        self.forwards.abandon()
        successor = next((node_id for node_id in self.facts.conf_state.voters if node_id != peer_id), None)
        if successor == self.config.node_id:
            log.info("%s: leader %s is down; campaigning at once as its successor", self.config.node_id, peer_id)
            self.count_ticks(self.now_ms())  # the quiet ticks so far happened before the campaign
            self.raw.take_over(peer_id)  # the core ignores it if another leader is known by then
            self.wake_driver()
        else:
            self._successor_grace.start(peer_id, self.now_ms() + SUCCESSOR_GRACE_MS)
            self._rearm()

    def forwarded_response(self, tag: int, response: RemotingCommand) -> None:
        self.forwards.answered(tag, response)

    def forward_not_sent(self, tag: int) -> None:
        self.forwards.not_sent(tag)

    def digest(self, sender: str, payload: bytes) -> None:
        now_ms = self.now_ms()
        self.liveness.digest(payload, now_ms)
        if not self.liveness.quiet():
            self._liveness_now(now_ms, round_due=True)

    def snapshot_written(self, index: int, outcome: SnapshotOutcome, error: Exception | None = None) -> None:
        self.driver.snapshot_written(index, outcome, error)

    # ----- inputs: brokers and clients -----

    def client_request(self, request: RemotingCommand, channel_id: int, token: Hashable,
                       origin: Origin | None = None) -> None:
        """Any request of a remoting connection; exactly one Answer(token, ...) follows. `origin`:
        who asked (recorded in the commands it causes; None: not known to the caller)."""
        self._request(request, channel_id, token, origin, forwarded=False)

    def forwarded_request(self, sender: str, request: RemotingCommand, token: Hashable) -> None:
        """A follower's forward: decided here or refused, never forwarded again. It came over an
        authenticated peer link, so the origin the follower wrote into it is believed."""
        self._request(request, 0, token, forwarded_origin(request), forwarded=True)

    def _request(self, request: RemotingCommand, channel_id: int, token: Hashable, origin: Origin | None, *,
                 forwarded: bool) -> None:
        out = self.outbox.append
        try:
            if request.code == RMQC_NODE_STATUS:
                out(Answer(token, status_answer(self, request)))  # rmqc's private diagnostic (rmqc status)
            elif request.code in OPERATION_REQUESTS:
                self.operations.handle(request, token, origin, forwarded=forwarded)
            elif request.code in MEMBERSHIP_REQUESTS:
                self.membership.handle(request, token)
            elif self._forwarded_from_here(request):
                if not self._answered_here(request, channel_id, token, origin):
                    self._toward_leader(request, channel_id, token, origin, forwarded=forwarded)
            else:
                self.decide(request, channel_id, _AnswerAction(self.outbox, token), origin)
        except Exception as error:
            log.exception("request %s failed", request.code)
            out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR, f"{error!r}")))

    def _answered_here(self, request: RemotingCommand, channel_id: int, token: Hashable,
                       origin: Origin | None) -> bool:
        """A follower answers a registration (103, 322) that changes nothing in its state itself, as
        every Java NameServer does; the leader hears of it in the next digest (design.md)."""
        if (request.code not in _REGISTRATION_REFRESHES or not self.is_member
                or self.facts.leader_id == self.config.node_id):
            return False
        answer = self.processor.namesrv.answer_here(request, self.context(channel_id, origin=origin))
        if answer is None:
            return False
        self.outbox.append(Answer(token, answer))
        if self.liveness.changed(self.now_ms()):
            self._rearm()
        return True

    def _toward_leader(self, request: RemotingCommand, channel_id: int, token: Hashable, origin: Origin | None, *,
                       forwarded: bool) -> None:
        """A leader-only request this node cannot decide now: held while this node is the elected
        leader and not yet serving (its first commit; after a takeover, the old leader's lease),
        forwarded to the leader, or refused 2007 (no leader known: the client tries another)."""
        if not self.is_member:
            # no peer link to forward over (a removed or joining node dials no one): the client
            # must find the leader itself, and only 2007 makes it look
            self.outbox.append(Answer(token, self.operations.not_leader(request, "not a member of the group")))
        elif self.facts.leader_id == self.config.node_id:
            self.leader_waits.hold(request, channel_id, token, origin, forwarded=forwarded, now_ms=self.now_ms())
        elif forwarded or not self.config.forward_writes or self.facts.leader_id is None:
            # a forward is never forwarded again; without forwarding the client goes to the leader
            self.outbox.append(Answer(token, make_response(request, ResponseCode.CONTROLLER_NOT_LEADER,
                                                           NOT_LEADER_REMARK)))
        else:
            forwarded_copy = request if origin is None else with_origin(request, origin)
            self.forwards.forward(self.facts.leader_id, forwarded_copy, token, self.now_ms())

    def _forwarded_from_here(self, request: RemotingCommand) -> bool:
        """Java's leader-only requests that only the leader can decide, and 1009 (replicated by
        rmqc: the leader logs it). Reads among them (1004,
        1006, 1012) are served by every node through the read path instead (design.md "Read path")."""
        return (request.code in _LEADER_WRITES and request.code not in READ_REQUESTS
                and (not self.facts.serving_as_leader or self.handing_over))

    def heartbeat(self, request: RemotingCommand, channel_id: int) -> bool:
        """A one-way 904, served inline (never answered, spec 1.3); False: not a 904."""
        if request.code != RequestCode.BROKER_HEARTBEAT:
            return False
        now_ms = self.now_ms()
        if self.liveness.changed(now_ms):
            self._rearm()
        try:
            outcome = self.processor.handle_heartbeat(request, now_ms, channel_id or None)
        except Exception:
            log.exception("request %s failed", request.code)
        else:
            if isinstance(outcome, Propose):
                self._propose_quietly(list(outcome.commands), "one-way request")
        return True

    def connection_closed(self, channel_id: int) -> None:
        now_ms = self.now_ms()
        keys = self.liveness.table.on_channel_closed(channel_id, now_ms)
        if keys:
            self.liveness.closed(keys, now_ms)
            self._liveness_now(now_ms, round_due=True)

    def decide(self, request: RemotingCommand, channel_id: int, respond: Respond, origin: Origin | None = None) -> None:
        """The one path of every request this node decides itself: reads through the read path,
        the rest through the processor, proposals answered once applied. Never raises."""
        try:
            if request.code in READ_REQUESTS:
                self.reads.serve_with(request, channel_id, respond)
                return
            if request.code == _HEARTBEAT_CODE and self.liveness.changed(self.now_ms()):
                self._rearm()  # a two-way 904
            outcome = self.processor.handle(request, self.context(channel_id, origin=origin))
            if isinstance(outcome, Propose):
                self.propose_and_answer(request, outcome, respond)
            else:
                respond(self._reply_of(outcome))
        except Exception as error:
            log.exception("request %s failed", request.code)
            respond(make_response(request, ResponseCode.SYSTEM_ERROR, f"{error!r}"))

    def _reply_of(self, outcome: Reply | NoReply) -> RemotingCommand | None:
        if isinstance(outcome, NoReply):
            return None
        if outcome.response.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
            # decided without a proposal; elections that reach the log are counted at apply
            self.observer.count_election(KEEP_CURRENT_MASTER)
        return outcome.response

    def context(self, channel_id: int, read_allowed: bool = False, origin: Origin | None = None) -> RequestContext:
        # positional, in RequestContext's field order: a NamedTuple built by keyword costs a
        # third more, and every request builds one
        return RequestContext(
            self.now_ms(),  # now_ms
            channel_id or None,  # channel_id
            self.facts.leader_id == self.config.node_id,  # is_leader
            self.facts.serving_as_leader,  # leader_ready
            self._node_info(),  # node
            read_allowed,
            self.clock.wall_ms(),  # wall_ms
            origin,
        )

    def _node_info(self) -> NodeInfo:
        """This node as requests see it; rebuilt only when the leader or the membership changes,
        not for every request."""
        cached = self._node_info_cache
        if cached is not None and cached[0] == self.facts.leader_id:
            return cached[1]
        address = self.address_of(self.facts.leader_id) if self.facts.leader_id else None
        node = NodeInfo(
            group=self.config.group,
            self_id=self.config.node_id,
            leader_id=self.facts.leader_id if address else None,
            leader_address=address,
            peers=self.facts.conf_state.addresses,
        )
        self._node_info_cache = (self.facts.leader_id, node)
        return node

    # ----- proposals -----

    def propose_and_answer(self, request: RemotingCommand, outcome: Propose, respond: Respond) -> None:
        """Propose the outcome's commands; `respond` gets its response once applied (or the failure)."""
        commands = outcome.commands  # a processor's own list (never changed after) needs no copy
        try:
            self.enqueue(commands if type(commands) is list else list(commands),
                         AnswerOnApply(request, outcome.finish, respond))
        except RequestFailed as failure:
            respond(make_response(request, failure.code, failure.remark))

    def enqueue(self, commands: list[Command],
                on_done: Callable[[list[ApplyResult] | None, RequestFailed | None], None]) -> None:
        """Queue commands for the next append; `on_done` runs once applied, failed or timed out.
        Raises RequestFailed when they cannot be queued (bounds, stopping, disk full)."""
        if self.stopping:
            raise RequestFailed(ResponseCode.SYSTEM_ERROR, "node stopping")
        alarm = self.disk.alarm
        if alarm is not None:  # it could not be persisted: refused before it enters the log
            alarm.refused_writes += 1
            raise RequestFailed(ResponseCode.SYSTEM_ERROR, alarm.remark)
        self.proposals.enqueue(commands, on_done, self.now_ms())
        self.wake_driver()

    def _propose_quietly(self, commands: list[Command], what: str) -> None:
        """Commands nobody waits for (a one-way request's): a failure is only logged."""
        def done(_results: list[ApplyResult] | None, error: RequestFailed | None) -> None:
            if error is not None:
                log.log(logging.DEBUG if self.stopping else logging.INFO, "%s: %s not committed: %s",
                        self.config.node_id, what, error.remark)

        try:
            self.enqueue(commands, done)
        except RequestFailed as failure:
            done(None, failure)

    def _propose_elections(self, commands: list[Command]) -> None:
        """One entry for every election of a liveness round (or the retries of one apply)."""
        def done(_results: list[ApplyResult] | None, error: RequestFailed | None) -> None:
            self.elections_in_flight -= 1
            if error is not None:  # at a stop every waiting batch fails the same way: not worth a line each
                log.log(logging.DEBUG if self.stopping else logging.INFO,
                        "%s: %d controller-triggered elections not committed: %s", self.config.node_id,
                        len(commands), error.remark)

        self.elections_in_flight += 1
        try:
            self.enqueue(commands, done)
        except RequestFailed as failure:
            done(None, failure)

    # ----- what the driver tells the rest -----

    def on_soft_state(self, leader: str | None, previous: str | None) -> None:
        """Driver: the core's leader is `leader` now, `previous` before (the facts already say so)."""
        if leader != previous:
            log.info("%s: leader is now %s", self.config.node_id, leader)
            self.reads.on_leader_change()
            self.events.record(LEADER_CHANGED, self.clock.wall_ms(),
                               {"leader": leader, "previous": previous, "term": self.facts.term})
        self.forwards.abandon(except_to=leader)
        me = self.config.node_id
        if leader == me and previous != me:
            self.became_leader_ms = self.now_ms()
            self.processor.namesrv.became_leader()
        if leader != me:
            # a handover keeps them: the target holds their entries, and commits them in its term
            self.proposals.lose_leadership(keep_waiting=self.handing_over)

    def after_apply_on_leader(self, results: list[ApplyResult]) -> None:
        """Leader only: 1008 for successful elections, and Java's retries of failed ones."""
        # only elections are counted, notified or retried: an entry of other commands (a busy
        # leader's 1013s, up to ENTRY_COMMANDS of them) costs one pass here, not three
        elections = [result for result in results if type(result.command) is ElectMaster]
        if not elections:
            return
        now_ms = self.now_ms()
        self.observer.count_elections(elections)
        for result in elections:
            self._observe_detection(result.command)
            notifications = self.processor.notifications_for(result, now_ms)
            if notifications and result.after is not None and is_failover(result):
                self._await_notifications(result.after, [address for address, _ in notifications], now_ms)
            for address, command in notifications:
                self.outbox.append(Notify(address, command))
        retries = self.processor.election_retries(elections, now_ms, self.clock.wall_ms())
        if retries:
            self._propose_elections(retries)

    def _observe_detection(self, command: Command) -> None:
        """The detection latency of a failover's first election (the master last alive -> seen dead)."""
        assert isinstance(command, ElectMaster)
        if command.attempt == 1 and command.liveness_lost_ms is not None and command.master_last_alive_ms is not None:
            self.observer.observe_detection((command.liveness_lost_ms - command.master_last_alive_ms) / 1000)

    def _await_notifications(self, group: BrokerGroup, addresses: list[str], now_ms: int) -> None:
        ids = {replica.address: broker_id for broker_id, replica in group.replicas.items()}
        for address in addresses:
            key = BrokerKey(group.cluster_name, group.broker_name, ids[address])
            self.events.notifications_queued(key, address, group.master_epoch, now_ms)

    def _awaited_heartbeat(self, heartbeat: Heartbeat, now_ms: int) -> None:
        after_ms = self.events.heartbeat_heard(heartbeat, self.clock.wall_ms(), now_ms)
        if after_ms is not None:
            self.observer.observe_failover_step(HEARTBEAT, after_ms / 1000)

    def elections_applied(self, index: int, results: list[ApplyResult]) -> None:
        """Every node, each applied entry of commands: its failovers and the 1008s the leader sent
        after them are events (not on a replay)."""
        if index <= self.events_after_index:
            return
        failovers = [result for result in results if is_failover(result)]  # a type test for most commands
        if failovers:
            self.events.failovers_applied(failovers, self.clock.wall_ms(), self.now_ms())
        for result in results:
            if type(result.command) is NotificationSent:
                self.events.notification_applied(result.command, self.clock.wall_ms())

    def notification_sent(self, address: str, master_epoch: int) -> None:
        """The shell's transport sent a 1008: its latency since the commit, and (the leader) a
        record of it for every node's events."""
        sent = self.events.sent(address, master_epoch, self.now_ms())
        if sent is None:
            return
        key, after_ms = sent
        self.observer.observe_failover_step(NOTIFIED, after_ms / 1000)
        if self.facts.serving_as_leader:
            self._propose_quietly([NotificationSent(key.cluster_name, key.broker_name, key.broker_id, address,
                                                    master_epoch, after_ms, self.clock.wall_ms(),
                                                    Origin(None, None, self.config.node_id))], "a 1008's record")

    def set_alarm(self, name: str, raised: bool) -> None:
        self.observer.set_alarm(name, raised)
        self.events.record(ALARM, self.clock.wall_ms(), {"alarm": name, "raised": raised})

    def membership_applied(self, previous: ConfState, index: int, *, announce: bool = False) -> None:
        """The applied membership (with its address book) is the facts' as of log index `index`,
        `previous` before (the driver, or the start); the shell hears of it (MembersChanged) at
        start and whenever it changes."""
        conf_state = self.facts.conf_state
        changed = conf_state != previous
        if changed and index > self.events_after_index:
            self.events.record(MEMBERSHIP_CHANGED, self.clock.wall_ms(),
                               {"index": index, "voters": list(conf_state.voters),
                                "learners": list(conf_state.learners)})
        if changed or announce:
            self._node_info_cache = None
            self.outbox.append(MembersChanged(index, dict(conf_state.addresses), conf_state.voters,
                                              conf_state.learners))
            me = self.config.node_id
            if me in previous.members and me not in conf_state.members:
                log.warning("%s: removed from the membership at index %d (voters %s, learners %s): idle, "
                            "never campaigns", me, index, conf_state.voters, conf_state.learners)

    # ----- the facts, read-only (the driver writes them) -----

    @property
    def leader_id(self) -> str | None:
        return self.facts.leader_id

    @property
    def term(self) -> int:
        return self.facts.term

    @property
    def applied_index(self) -> int:
        return self.facts.applied_index

    @property
    def serving_as_leader(self) -> bool:
        return self.facts.serving_as_leader

    @property
    def conf_state(self) -> ConfState:
        return self.facts.conf_state

    @property
    def snapshot_index(self) -> int:
        return self.facts.snapshot_index

    @property
    def is_member(self) -> bool:
        """This node is a voter or learner of the applied membership."""
        return self.config.node_id in self.facts.conf_state.members

    def address_of(self, node_id: str) -> str | None:
        """A member's address from the applied address book (None: not a member, or not known)."""
        return self.facts.address_of(node_id)

    # ----- stopping -----

    def begin_graceful_stop(self) -> bool:
        """The process is asked to stop (SIGTERM, Ctrl-C). A serving leader hands its leadership to
        the most up-to-date other voter first (True: `handing_over` until `handover_outcome` says
        how it ended); any other node has nothing to hand over (False). Requests keep being taken
        meanwhile; the shell then lets those in flight be answered and calls `stop`."""
        target, decided = self.operations.hand_over_before_stop()
        log.info("%s: stopping: %s", self.config.node_id, decided)
        if target is None:
            return False
        self.handing_over = True
        return True

    def handover_ended(self, error: str | None, took_ms: int) -> None:
        """Operations: the handover before a stop is over (`error`: why it failed)."""
        self.handing_over = False
        if error is None:
            self.handover_outcome = f"leadership handed to {self.facts.leader_id} in {took_ms} ms"
            log.info("%s: stopping: %s", self.config.node_id, self.handover_outcome)
        else:
            self.handover_outcome = f"leadership not handed over: {error}"
            log.warning("%s: stopping: %s; stopping anyway", self.config.node_id, self.handover_outcome)

    def stop(self, why: str) -> None:
        """Stop taking work and fail everything that waits."""
        self.stopping = True
        self.proposals.fail_all(RequestFailed(ResponseCode.SYSTEM_ERROR, why))
        self.reads.fail_all(why)
        self.forwards.fail_all(why)
        self.leader_waits.fail_all(why)
        self.membership.fail(why)

    def close(self) -> None:
        """On the way out: save a commit index that still waits to ride with a write."""
        self.driver.save_unsaved_commit()


class _SuccessorGrace:
    """After a leader went down (peer_down), the voters other than its successor campaign too once
    SUCCESSOR_GRACE_MS passed with no leader."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica
        self._pending: tuple[str, int] | None = None  # (dead leader, when the others campaign too)

    def start(self, dead_leader: str, at_ms: int) -> None:
        self._pending = (dead_leader, at_ms)

    def next_deadline_ms(self) -> int | None:
        return None if self._pending is None else self._pending[1]

    def expire(self, now_ms: int) -> None:
        if self._pending is None or now_ms < self._pending[1]:
            return
        dead_leader, self._pending = self._pending[0], None
        r = self._replica
        if r.facts.leader_id in (None, dead_leader):
            log.info("%s: no leader %d ms after %s went down; campaigning", r.config.node_id,
                     SUCCESSOR_GRACE_MS, dead_leader)
            r.raw.take_over(dead_leader)
            r.wake_driver()


class _RouteExpiry:
    """The NameServer's route scan, on the leader that serves (not while it hands over)."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def next_deadline_ms(self) -> int | None:
        r = self._replica
        return r.processor.namesrv.next_scan_ms() if r.facts.serving_as_leader else None

    def expire(self, now_ms: int) -> None:
        r = self._replica
        if r.facts.serving_as_leader and not r.handing_over:
            expired = r.processor.namesrv.expired(now_ms, r.clock.wall_ms())
            if expired:
                r._propose_quietly(expired, "route expiry")
