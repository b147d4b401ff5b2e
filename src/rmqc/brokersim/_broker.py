"""One simulated broker in controller mode: the lifecycle of spec section 7 on its own connections.

Each broker owns a ControllerClient (so its heartbeats and requests travel on its own connection to
each controller, and closing them is what a controller sees when the broker dies) and a listening
port (its registered address, where the controller leader sends NOTIFY_BROKER_ROLE_CHANGED, 1008).
Replication is simulated by the fleet: masters append bytes, slaves copy the offset of the master
they follow; this object keeps the broker's side of it (offsets, who caught up when).
"""

from __future__ import annotations

import logging
import random
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path

import trio

from rmqc.brokersim._errors import IdentityMismatch, RegistrationFailed
from rmqc.brokersim._identity import IdentityStore
from rmqc.brokersim._lateness import Lateness, next_due
from rmqc.brokersim._model import (
    BrokerBelief,
    Phase,
    Role,
    SimTiming,
    Status,
    shrunk_set,
)
from rmqc.client import ClientError, ControllerClient, Credentials, heartbeat_ext
from rmqc.controller import register_body
from rmqc.errors import RmqcError
from rmqc.fsm import TopicRow
from rmqc.remoting import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode,
    loads_fastjson,
    make_response,
)

__all__ = ["SimBroker"]

log = logging.getLogger("rmqc.brokersim")

# Connections to one broker's port: only controller leaders connect (one each, plus reconnects).
MAX_NOTIFY_CONNECTIONS = 16
RECEIVE_BYTES = 64 * 1024
# 1004 answering 2008 (set unknown): the broker re-registers, then waits this long (spec 7.3).
REREGISTER_PAUSE_S = 2.0
RECENT_ERRORS = 8  # last failures kept for `beliefs`, oldest dropped
ELECTION_ACCEPTED = (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _now_ms() -> int:
    return int(trio.current_time() * 1000)


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text else None


def _sync_state_set_of(body: bytes | None) -> tuple[frozenset[int], int | None]:
    if not body:
        return frozenset(), None
    document = loads_fastjson(body)
    epoch = document.get("syncStateSetEpoch")
    return frozenset(int(i) for i in document.get("syncStateSet") or ()), None if epoch is None else int(epoch)


class SimBroker:
    """Run with `await broker.run(controllers)` in a nursery; `kill()`, `hang()`, `resume()` from any task."""

    def __init__(self, cluster: str, broker_name: str, slot: int, store_dir: Path, timing: SimTiming,
                 rng: random.Random, connected_slaves: Callable[[SimBroker], Iterable[int]],
                 lateness: Lateness | None = None, credentials: Credentials | None = None,
                 ssl_context: ssl.SSLContext | None = None, topics: Sequence[TopicRow] = ()) -> None:
        self._credentials = credentials
        self._ssl_context = ssl_context
        self._connected_slaves = connected_slaves  # which slaves hold an HA connection to this master
        self._lateness = lateness or Lateness(timing.heartbeat_timeout_ms)  # the fleet shares one
        self._slow_heartbeats: set[str] = set()  # controllers a heartbeat is being sent to the slow way
        self._controllers: list[str] = []
        self.cluster = cluster
        self.broker_name = broker_name
        self.slot = slot
        self.identity = IdentityStore(store_dir, cluster, broker_name)
        self.timing = timing
        self._rng = rng
        self.broker_id: int | None = None
        self.address = ""
        self.status = Status.STARTING
        self.phase = Phase.INITIAL
        self.lagging = False
        self.notifications = 0
        self.max_offset = 0  # survives restarts, like a commit log
        self.epoch = -1  # last epoch in the epoch file (-1: none, as Java's heartbeat default)
        self.topics = tuple(topics)  # the topic config table registered with the NameServers (103)
        # (stateVersion, timestamp, counter) of the topic table, kept in topics.json by Java: it
        # survives restarts and changes on a role change only, so periodic 103s change nothing
        self.data_version = (0, _wall_ms(), 0)
        self.route_registrations = 0  # 103s answered SUCCESS
        self.errors: deque[str] = deque(maxlen=RECENT_ERRORS)
        self._reset_volatile()
        self._scope = trio.CancelScope()
        self._resumed = trio.Event()
        # time.perf_counter() of every heartbeat round since the last reset (observers such as the
        # broker_failover bench time a hang from the last one); bounded, newest last
        self.heartbeat_stamps: deque[float] = deque(maxlen=16)
        self._nursery: trio.Nursery | None = None
        self._client: ControllerClient | None = None

    def _reset_volatile(self) -> None:
        """What a broker process forgets when it restarts (role and epochs live in memory)."""
        self.role = Role.NONE
        self.master_id: int | None = None
        self.master_address: str | None = None
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.caught_up_ms: dict[int, int] = {}  # master only: slave id -> last time it was caught up
        self.became_master_ms = 0
        self.alter_in_flight = False

    # ---- control ----------------------------------------------------------------------------

    @property
    def serving(self) -> bool:
        """Running and not hung: it heartbeats, polls, replicates and handles 1008."""
        return self.status is Status.RUNNING

    def kill(self) -> None:
        """Stop at once: every connection closes, so controllers see the broker go inactive."""
        self.status = Status.KILLED
        self._scope.cancel()

    def hang(self) -> None:
        """Stop heartbeating, polling, replicating and answering, but keep every connection open."""
        if self.status in (Status.RUNNING, Status.STARTING):
            self.status = Status.HUNG
            self._resumed = trio.Event()

    def resume(self) -> None:
        if self.status is Status.HUNG:
            self.status = Status.RUNNING if self.phase is Phase.RUNNING else Status.STARTING
            self._resumed.set()

    def belief(self) -> BrokerBelief:
        return BrokerBelief(
            broker_name=self.broker_name, slot=self.slot, broker_id=self.broker_id, address=self.address,
            status=self.status, phase=self.phase, role=self.role, master_id=self.master_id,
            master_address=self.master_address, master_epoch=self.master_epoch,
            sync_state_set=tuple(sorted(self.sync_state_set)), sync_state_set_epoch=self.sync_state_set_epoch,
            epoch=self.epoch, max_offset=self.max_offset, lagging=self.lagging, notifications=self.notifications,
            last_error=self.errors[-1] if self.errors else None,
        )

    # ---- the process --------------------------------------------------------------------------

    async def run(self, controllers: Sequence[str], *, port: int = 0,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start (spec 7.2), then run the periodic tasks (7.3) until killed or cancelled."""
        if self.status is Status.KILLED:
            task_status.started()
            return  # killed before it ever started
        scope = self._scope = trio.CancelScope()
        self._controllers = list(controllers)
        self._reset_volatile()
        self.status, self.phase = Status.STARTING, Phase.INITIAL
        started = False
        with scope:
            async with ControllerClient(list(controllers), timeout_ms=self.timing.rpc_timeout_ms,
                                        rng=self._rng, credentials=self._credentials,
                                        ssl_context=self._ssl_context) as client:
                self._client = client
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self.address = await nursery.start(self._serve_notifications, port)
                    task_status.started()
                    started = True
                    await self._start_up()
                    nursery.start_soon(self._every, "heartbeat", self.timing.heartbeat_interval_ms,
                                       self._heartbeat_all)
                    nursery.start_soon(self._every, "poll", self.timing.poll_interval_ms, self._poll_guarded)
                    nursery.start_soon(self._every, "shrink", self.timing.check_sync_state_set_ms, self._shrink)
                    nursery.start_soon(self._every, "register", self.timing.register_interval_ms,
                                       self._register_to_namesrvs)
        if self._scope is scope:  # a killed run may end after its restart began: leave the new one be
            self._nursery = self._client = None
        if not started:
            task_status.started()

    async def _start_up(self) -> None:
        while not await self._register_round():
            await self._sleep_ms(self.timing.register_round_interval_ms)
        self.phase = Phase.REGISTER_TO_CONTROLLER_DONE
        while True:
            await self._heartbeat_all()  # one heartbeat before the start-up election (spec 7.2.4)
            if self.master_id is not None or await self._elect_self():
                break
            await self._sleep_ms(self.timing.register_round_interval_ms)
        self.phase = Phase.RUNNING
        if self.status is Status.STARTING:
            self.status = Status.RUNNING

    async def _register_round(self) -> bool:
        for attempt in range(self.timing.register_attempts):
            if attempt:
                await self._sleep_ms(self._rng.uniform(0, self.timing.register_retry_max_ms))
            await self._while_hung()
            try:
                await self._register_once()
                return True
            except IdentityMismatch as error:
                self._note(f"identity: {error}")  # retried forever with the same result, as in Java
            except (RegistrationFailed, ClientError) as error:
                self._note(f"register: {error}")
        return False

    async def _register_once(self) -> None:
        client = self._require_client()
        broker_id = self.identity.read_final()
        if broker_id is None:
            broker_id = await self._apply_for_id(client)
        self.broker_id = broker_id
        self.phase = max(self.phase, Phase.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE, key=_PHASE_ORDER.index)
        answer = await client.register_broker(self.cluster, self.broker_name, broker_id, self.address)
        if answer.code != ResponseCode.SUCCESS:
            raise RegistrationFailed(f"1003 answered {answer.code}: {answer.remark}")
        master_id = _int_or_none(answer.ext("masterBrokerId"))
        if master_id is not None:
            members, members_epoch = _sync_state_set_of(answer.body)
            self._change_role(master_id, answer.ext("masterAddress"), int(answer.ext("masterEpoch") or 0),
                              members, int(answer.ext("syncStateSetEpoch") or members_epoch or 0))

    async def _apply_for_id(self, client: ControllerClient) -> int:
        """1012, the temp file, 1013, the final file (spec 7.2.3 b-d)."""
        pending = self.identity.read_temp()
        if pending is None:
            answer = await client.get_next_broker_id(self.cluster, self.broker_name)
            next_id = _int_or_none(answer.ext("nextBrokerId"))
            if answer.code != ResponseCode.SUCCESS or next_id is None:
                raise RegistrationFailed(f"1012 answered {answer.code}: {answer.remark}")
            pending = (next_id, f"{self.address};{_wall_ms()}")
            self.identity.write_temp(*pending)
        try:
            answer = await client.apply_broker_id(self.cluster, self.broker_name, *pending)
        except ClientError:
            self.identity.delete_temp()  # the controller may have applied it anyway (an orphan id)
            raise
        if answer.code != ResponseCode.SUCCESS:
            self.identity.delete_temp()
            raise RegistrationFailed(f"1013 of id {pending[0]} answered {answer.code}: {answer.remark}")
        self.identity.write_final(pending[0])
        self.identity.delete_temp()
        return pending[0]

    async def _elect_self(self) -> bool:
        """1002 as a broker trigger; 0 and 2011 name the master to follow."""
        client = self._require_client()
        assert self.broker_id is not None
        try:
            answer = await client.elect_master(self.cluster, self.broker_name, self.broker_id)
        except ClientError as error:
            self._note(f"1002: {error}")
            return False
        master_id = _int_or_none(answer.ext("masterBrokerId"))
        if answer.code not in ELECTION_ACCEPTED or master_id is None:
            self._note(f"1002 answered {answer.code}: {answer.remark}")
            return False
        members, _ = _sync_state_set_of(answer.body)
        self._change_role(master_id, answer.ext("masterAddress"), int(answer.ext("masterEpoch") or 0),
                          members, int(answer.ext("syncStateSetEpoch") or 0))
        return True

    # ---- role changes (spec 7.4, 7.5) ---------------------------------------------------------

    def _change_role(self, master_id: int, master_address: str | None, master_epoch: int,
                     sync_state_set: frozenset[int], sync_state_set_epoch: int) -> bool:
        """Adopt a master if its epoch is newer than ours (or we know none yet)."""
        if master_epoch < self.master_epoch or (master_epoch == self.master_epoch and self.role is not Role.NONE):
            return False
        self.master_id, self.master_address, self.master_epoch = master_id, master_address, master_epoch
        self.sync_state_set, self.sync_state_set_epoch = sync_state_set, sync_state_set_epoch
        if master_id == self.broker_id:
            self.role = Role.MASTER
            self.epoch = master_epoch  # a new epoch-file entry starting at our max offset
            self.caught_up_ms = {}
            self.became_master_ms = _now_ms()
        else:
            self.role = Role.SLAVE
        # ReplicasManager.changeToMaster / changeToSlave: DataVersion.nextVersion(masterEpoch), then
        # registerBrokerAll at once, so the NameServers learn the new role without waiting a period
        _, _, counter = self.data_version
        self.data_version = (master_epoch, _wall_ms(), counter + 1)
        if self._nursery is not None:
            self._nursery.start_soon(self._register_to_namesrvs)
        return True

    def on_notification(self, command: RemotingCommand) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008): applied only when newer than what we know (spec 7.5)."""
        if not self.serving and self.status is not Status.STARTING:
            return  # a hung or dead process reads nothing
        self.notifications += 1
        master_id = _int_or_none(command.ext("masterBrokerId"))
        epoch = _int_or_none(command.ext("masterEpoch"))
        if master_id is None or epoch is None or epoch <= self.master_epoch:
            return
        members, members_epoch = _sync_state_set_of(command.body)
        self._change_role(master_id, command.ext("masterAddress"), epoch, members,
                          _int_or_none(command.ext("syncStateSetEpoch")) or members_epoch or 0)

    # ---- periodic tasks (spec 7.3) --------------------------------------------------------------

    async def _every(self, kind: str, interval_ms: int, step: Callable[[], Awaitable[None]]) -> None:
        """Run `step` at a fixed rate (the Java broker's scheduled executors), recording how late
        each wake-up came against the time it was due. A step that overran its interval (a slow
        controller) or a hang starts a new schedule from its end: no burst of catch-up steps, and
        the controllers' slowness is not counted as the simulator's lateness."""
        interval_s = interval_ms / 1000
        due = trio.current_time() + interval_s
        while True:
            await trio.sleep_until(due)
            self._lateness.record(kind, trio.current_time() - due)
            await self._while_hung()
            await step()
            due = next_due(due, interval_s, trio.current_time())

    async def _heartbeat_all(self) -> None:
        """904 one-way to every controller (spec 6.4). On an open connection it is queued at once
        (no task: thousands of brokers heartbeat every second); to a controller not connected
        yet, a background send bounded by the send timeout, one at a time per controller, so
        one unreachable controller delays no heartbeat to the others."""
        self.heartbeat_stamps.append(time.perf_counter())
        client = self._require_client()
        assert self.broker_id is not None
        ext = heartbeat_ext(self.cluster, self.broker_name, self.broker_id, self.address, self.epoch,
                            self.max_offset, self.max_offset, self.timing.heartbeat_timeout_ms)
        for address in self._controllers:
            if (address in self._slow_heartbeats
                    or client.send_oneway_nowait(address, RequestCode.BROKER_HEARTBEAT, ext)):
                continue
            assert self._nursery is not None
            self._slow_heartbeats.add(address)
            self._nursery.start_soon(self._heartbeat_slowly, client, address, ext)

    async def _heartbeat_slowly(self, client: ControllerClient, address: str, ext: dict[str, object]) -> None:
        try:
            with trio.move_on_after(self.timing.heartbeat_send_timeout_ms / 1000):
                await client.request(RequestCode.BROKER_HEARTBEAT, ext, address=address, oneway=True, leader=False)
        except ClientError:
            pass  # an unreachable controller: Java skips it too
        finally:
            self._slow_heartbeats.discard(address)

    async def _poll_guarded(self) -> None:
        try:
            await self._poll_once()
        except (ClientError, RmqcError) as error:
            self._note(f"1004: {error}")

    async def _poll_once(self) -> None:
        client = self._require_client()
        answer = await client.get_replica_info(self.broker_name)
        if answer.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            await self._register_round()
            await trio.sleep(REREGISTER_PAUSE_S)
            return
        if answer.code != ResponseCode.SUCCESS:
            self._note(f"1004 answered {answer.code}: {answer.remark}")
            return
        epoch = int(answer.ext("masterEpoch") or 0)
        members, members_epoch = _sync_state_set_of(answer.body)
        if epoch > self.master_epoch:
            master_id, master_address = _int_or_none(answer.ext("masterBrokerId")), answer.ext("masterAddress")
            if master_id is not None and master_address:
                self._change_role(master_id, master_address, epoch, members, members_epoch or 0)
            else:
                await self._elect_self()
        elif (epoch == self.master_epoch and self.role is Role.MASTER
              and (members_epoch or 0) > self.sync_state_set_epoch):
            self.sync_state_set, self.sync_state_set_epoch = members, members_epoch or 0

    async def _shrink(self) -> None:
        if self.role is Role.MASTER and self.broker_id is not None:
            connected = self._connected_slaves(self)
            smaller = shrunk_set(self.sync_state_set, self.broker_id, self.caught_up_ms, connected,
                                 _now_ms(), self.timing.max_time_slave_not_catchup_ms)
            if smaller != self.sync_state_set:
                self.propose_sync_state_set(smaller)

    def propose_sync_state_set(self, members: frozenset[int]) -> None:
        """Send 1001 (one at a time) from this master; the answer's set and epoch are adopted."""
        if self.alter_in_flight or self._nursery is None or self.role is not Role.MASTER or not self.serving:
            return
        self.alter_in_flight = True
        self._nursery.start_soon(self._alter, members)

    async def _alter(self, members: frozenset[int]) -> None:
        client = self._require_client()
        epoch_sent = self.master_epoch
        try:
            answer = await client.alter_sync_state_set(self.broker_name, self.broker_id, epoch_sent,  # type: ignore[arg-type]
                                                       members, self.sync_state_set_epoch)
            if answer.code == ResponseCode.SUCCESS and self.master_epoch == epoch_sent:
                new_members, new_epoch = _sync_state_set_of(answer.body)
                self.sync_state_set = new_members
                self.sync_state_set_epoch = new_epoch or int(answer.ext("newSyncStateSetEpoch") or 0)
            elif answer.code != ResponseCode.SUCCESS:
                self._note(f"1001 answered {answer.code}: {answer.remark}")
        except (ClientError, RmqcError) as error:
            self._note(f"1001: {error}")
        finally:
            self.alter_in_flight = False

    # ---- the NameServer (103) ---------------------------------------------------------------------

    async def _register_to_namesrvs(self) -> None:
        """registerBrokerAll: 103 to every NameServer (every rmqc node) at once, brokerId 0 for the
        master and the controller id for a slave; nothing before the broker knows its role."""
        await self._while_hung()
        if self.role is Role.NONE or self.broker_id is None:
            return
        client = self._require_client()
        broker_id = 0 if self.role is Role.MASTER else self.broker_id
        body = register_body(self.data_version, list(self.topics))
        async with trio.open_nursery() as nursery:
            for address in self._controllers:
                nursery.start_soon(self._register_to_namesrv, client, address, broker_id, body)

    async def _register_to_namesrv(self, client: ControllerClient, address: str, broker_id: int,
                                   body: bytes) -> None:
        try:
            answer = await client.register_broker_to_namesrv(
                self.cluster, self.broker_name, broker_id, self.address, body,
                heartbeat_timeout_ms=self.timing.heartbeat_timeout_ms, address=address)
        except (ClientError, RmqcError) as error:
            self._note(f"103 to {address}: {error}")  # Java logs it and tries at the next period
            return
        if answer.code == ResponseCode.SUCCESS:
            self.route_registrations += 1
        else:
            self._note(f"103 to {address} answered {answer.code}: {answer.remark}")

    # ---- the listening port (1008) ------------------------------------------------------------

    async def _serve_notifications(self, port: int, *, task_status: trio.TaskStatus[str]) -> None:
        try:
            listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
        except OSError:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")  # the old port was taken
        task_status.started(f"127.0.0.1:{listeners[0].socket.getsockname()[1]}")
        open_connections = [0]

        async def handle(stream: trio.SocketStream) -> None:
            if open_connections[0] >= MAX_NOTIFY_CONNECTIONS:
                await trio.aclose_forcefully(stream)
                return
            open_connections[0] += 1
            try:
                await self._read_notifications(stream)
            finally:
                open_connections[0] -= 1

        await trio.serve_listeners(handle, listeners)

    async def _read_notifications(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            try:
                while data := await stream.receive_some(RECEIVE_BYTES):
                    # a stopped process reads nothing: what arrives waits (in the kernel) for its resume
                    await self._while_hung()
                    for command in decoder.feed(data):
                        await self._answer_frame(stream, command)
            except (RmqcError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
                self._note(f"notification connection: {error}")

    async def _answer_frame(self, stream: trio.SocketStream, command: RemotingCommand) -> None:
        if command.is_response:
            return
        if command.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED:
            self.on_notification(command)
            if command.is_oneway:
                return
            answer = make_response(command, ResponseCode.SUCCESS)
        elif command.is_oneway:
            return
        else:
            answer = make_response(command, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                   f" request type {command.code} not supported")
        await stream.send_all(encode(answer))

    # ---- small helpers ------------------------------------------------------------------------

    def _require_client(self) -> ControllerClient:
        if self._client is None:
            raise RegistrationFailed(f"{self.broker_name}/{self.slot} is not running")
        return self._client

    async def _while_hung(self) -> None:
        while self.status is Status.HUNG:
            await self._resumed.wait()

    async def _sleep_ms(self, ms: float) -> None:
        await trio.sleep(ms / 1000)

    def _note(self, error: str) -> None:
        self.errors.append(error)
        log.debug("%s/%s: %s", self.broker_name, self.broker_id, error)


_PHASE_ORDER = list(Phase)
