"""The simulated node shell with the controller that ships as its state machine: the real
`ControllerState` (apply, snapshot, restore), `ControllerProcessor` (every request code, the
election policy, 1008 notifications, election retries) and `HeartbeatTable` (904 on every node,
expiry by deadline), around the real `RawNode` and the Ready loop of `SimNode`.

What this shell does as `rmqc.node` does: leader-only requests are decided on the leader against
the applied state and proposed as one entry whose waiter answers with the apply results; read
requests (1004, 1005, 1006, 1012) are served at the level they name (extFields `consistency`,
default linearizable): `linearizable` after a ReadIndex round, `lease` at the lease's commit index
on the leader (else as linearizable), `stale` at once; on each tick, expired masters become one
election entry on the leader, and every `scan_us` the inactive-master scan runs; after each apply
on the leader, successful elections notify the live replicas (1008) and failed controller elections
are retried. Time is the world's virtual clock in ms for liveness (one clock).

Differences from `rmqc.node` (until the sans-IO replica replaces this shell): a follower answers
leader-only requests with 2007 and a leader hint instead of forwarding them; followers send no
liveness digests (every simulated broker heartbeats every node); the runtime configuration (1009)
is not persisted across a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqc.controller import ControllerConfig, ControllerProcessor, NoReply, Propose, Reply, RequestContext
from rmqc.errors import ProposalDropped, RaftError
from rmqc.fsm import ApplyResult, Command, ControllerState, decode_commands, encode_commands
from rmqc.liveness import HeartbeatTable
from rmqc.raft._types import Entry
from rmqc.remoting import READ_REQUESTS, RemotingCommand, RequestCode, ResponseCode, make_response

from ._simhistory import LEASE, LINEARIZABLE, STALE
from ._simnode import REQUESTS_WAITING_MAX, NodeKnobs, SimNode

if TYPE_CHECKING:
    from ._simworld import World

_HEARTBEAT = int(RequestCode.BROKER_HEARTBEAT)
# The controller's own elections wait this long after a node starts (rmqc.node's LIVENESS_GRACE_MS,
# scaled to the simulator): a fresh table has not yet heard every broker.
LIVENESS_GRACE_US = 250_000
SCAN_US = 100_000  # scanInactiveMasterInterval, scaled like the brokers' heartbeat timeout


@dataclass(frozen=True, slots=True)
class Remote:
    """A remoting request from `sender` (a broker or admin), waiting on this node."""

    sender: str
    request: RemotingCommand
    level: str | None = None


@dataclass(frozen=True, slots=True)
class _Waiter:
    term: int
    remote: Remote | None  # None: the controller's own elections
    finish: Any  # Callable[[list[ApplyResult]], RemotingCommand] | None


class ControllerSimNode(SimNode):
    def __init__(self, world: World, node_id: str, drift: float, knobs: NodeKnobs) -> None:
        self.next_scan_us = 0
        self.started_us = 0
        super().__init__(world, node_id, drift, knobs)

    def _reset_volatile(self) -> None:
        super()._reset_volatile()
        self.state = ControllerState()
        self.liveness = HeartbeatTable()
        config = ControllerConfig()
        self.processor = ControllerProcessor(config, self.state, self.liveness)
        self.proposals: dict[int, _Waiter] = {}

    def start(self, peers: tuple[str, ...] = ()) -> None:
        self.started_us = self.world.events.now_us
        super().start(peers)

    # -- the state machine --------------------------------------------------------------------------
    def apply_normal(self, entry: Entry) -> None:
        results = self.state.apply_all(decode_commands(entry.data)) if entry.data else []
        self.world.controller_checker.on_apply(entry.index, results, self.world.events.now_us)
        waiter = self.proposals.pop(entry.index, None)
        if waiter is not None and waiter.remote is not None:
            if waiter.term == entry.term:
                self._answer(waiter.remote, waiter.finish(results))
            else:  # another leader's entry took this index: the proposal was lost
                self._answer(waiter.remote, _error(waiter.remote.request, "proposal dropped"))
        if results and self._leading():
            self._after_apply_on_leader(results)

    def _after_apply_on_leader(self, results: list[ApplyResult]) -> None:
        now_ms = self._now_ms()
        for result in results:
            for address, command in self.processor.notifications_for(result, now_ms):
                self.world.notify(address, command)
        retries = self.processor.election_retries(results, now_ms)
        if retries:
            self._propose(retries, None, None)

    def state_fingerprint(self) -> object:
        return self.state.snapshot()

    def state_data(self) -> bytes:
        return self.state.snapshot()

    def restore_state(self, data: bytes) -> None:
        self.state.restore(data)

    # -- requests -----------------------------------------------------------------------------------
    def remote(self, remote: Remote) -> None:
        self._when_running(self._handle_remote, remote)

    def _handle_remote(self, remote: Remote) -> None:
        request = remote.request
        if request.code == _HEARTBEAT:
            self.processor.handle_heartbeat(request, self._now_ms(), remote.sender)
            return
        if self._waiting() >= REQUESTS_WAITING_MAX:
            self._answer(remote, _error(request, "overloaded"))
            return
        if request.code in READ_REQUESTS:
            level = request.ext("consistency") or LINEARIZABLE
            self._read(Remote(remote.sender, request, level))
        else:
            self._decide(remote)
        self._process_ready()
        self.world.after_step(self)

    def _waiting(self) -> int:
        return len(self.proposals) + len(self.reads_waiting_index) + len(self.reads_waiting_apply)

    def _decide(self, remote: Remote, read_allowed: bool = False) -> None:
        outcome = self.processor.handle(remote.request, self._context(read_allowed))
        if isinstance(outcome, Reply):
            self._answer(remote, outcome.response)
        elif isinstance(outcome, Propose):
            self._propose(list(outcome.commands), remote, outcome.finish)
        else:
            assert isinstance(outcome, NoReply)

    def _propose(self, commands: list[Command], remote: Remote | None, finish: Any) -> None:
        assert self.raw is not None
        term = self.raw.raft.term
        try:
            self.raw.propose(encode_commands(commands), decided_term=term)
        except (ProposalDropped, RaftError):
            if remote is not None:
                self._answer(remote, _error(remote.request, "proposal dropped"))
            return
        self.proposals[self.raw.raft.log.last_index()] = _Waiter(term, remote, finish)

    def _read(self, remote: Remote) -> None:
        assert self.raw is not None
        if remote.level == STALE:
            self.world.count("stale_reads")
            self.serve_read(remote)
            return
        if remote.level == LEASE and self._leading():
            index = self.raw.lease_read()
            if index is not None:
                self.world.count("lease_reads")
                self._read_at(index, remote)
                return
            self.world.count("lease_fallbacks")
        context = f"{self.id}/{id(remote)}/{self.world.events.now_us}".encode()
        try:
            self.raw.read_index(context)
        except RaftError:
            self._answer(remote, _error(remote.request, "no leader"))
            return
        self.reads_waiting_index[context] = remote

    def serve_read(self, request: Any) -> None:
        self._decide(request, read_allowed=True)

    def _context(self, read_allowed: bool) -> RequestContext:
        assert self.raw is not None
        core = self.raw.raft
        leading = self._leading()
        ready = leading and core.log.term(core.log.committed) == core.term
        return RequestContext(self._now_ms(), is_leader=leading, leader_ready=ready, read_allowed=read_allowed)

    def _answer(self, remote: Remote, response: RemotingCommand) -> None:
        self.world.answer(self, remote, response)

    # -- liveness -----------------------------------------------------------------------------------
    def _tick(self) -> None:
        super()._tick()
        if self.up and self.raw is not None:
            self._liveness_step()

    def _liveness_step(self) -> None:
        now_us, now_ms = self.world.events.now_us, self._now_ms()
        expired = self.liveness.expire(now_ms)
        if not self._leading() or not self._context(False).leader_ready:
            return
        commands = self.processor.elections_due(now_ms, expired)
        if now_us >= self.next_scan_us and now_us - self.started_us >= LIVENESS_GRACE_US:
            self.next_scan_us = now_us + SCAN_US
            commands += self.processor.inactive_master_scan(now_ms)
        if commands:
            self._propose(_one_per_group(commands), None, None)
            self._process_ready()
            self.world.after_step(self)

    def _leading(self) -> bool:
        return self.raw is not None and self.world.is_leader(self)

    def _now_ms(self) -> int:
        return self.world.events.now_us // 1000


def _one_per_group(commands: list[Command]) -> list[Command]:
    seen: set[str] = set()
    kept = []
    for command in commands:
        if command.broker_name not in seen:
            seen.add(command.broker_name)
            kept.append(command)
    return kept


def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
    return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
