"""ControllerClient: the Trio client of rmqc (and of any RocketMQ 5 controller).

Connections are opened lazily, one per address, each run by a task in the client's nursery; many
requests share a connection, matched by opaque. Requests for the leader go to the address the
controllers name in answer to CONTROLLER_GET_METADATA_INFO (1005), cached until the leader answers
CONTROLLER_NOT_LEADER (2007) or its connection is lost. Connection losses, 2007 and failed
discoveries are retried with exponential backoff and jitter, at most `max_retries` times, all within
the request's one timeout. A timeout is not retried: the caller decides whether the write may repeat.
"""

from __future__ import annotations

import random
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from types import TracebackType

import trio

from rmqc.acl import Credentials
from rmqc.client._address import parse_address
from rmqc.client._connection import Connection
from rmqc.client._errors import (
    ClientClosed,
    ConnectionLost,
    NoLeaderError,
    NotLeaderError,
    RequestTimeout,
    RetriesExhausted,
    TooManyConnections,
    TooManyInFlight,
)
from rmqc.errors import ConfigError
from rmqc.remoting import (
    DEFAULT_MAX_FRAME_BYTES,
    READ_REQUESTS,
    RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_LIST,
    RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    dumps_fastjson,
    dumps_properties,
    make_request,
)

__all__ = ["CONSISTENCY_LEVELS", "ControllerClient", "heartbeat_ext"]

CONSISTENCY_LEVELS = frozenset({"linearizable", "lease", "stale"})
_OPAQUE_MASK = 0x7FFFFFFF  # opaque is a Java int; stay non-negative and wrap
_RETRYABLE = (ConnectionLost, NoLeaderError)
MAX_CONNECTIONS = 64  # a controller cluster has 3 to 7 nodes; anything near 64 is a bug somewhere
_INT_MAX = 2**31 - 1  # Java's default electionPriority for BROKER_HEARTBEAT (spec 3.1)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerClient:
    """`async with ControllerClient(["127.0.0.1:9878"]) as client: await client.get_metadata()`.

    Args:
        addresses: the controllers (`host:port`), asked in turn for the leader.
        timeout_ms: bound on each call, retries and leader discovery included (Java uses 3 s).
        max_in_flight: calls at once; one more raises TooManyInFlight instead of queueing unseen.
        max_retries: attempts after the first on connection loss, 2007 or a failed discovery.
        consistency: if set (linearizable, lease or stale), sent as extFields `consistency` on reads.
        backoff_ms, max_backoff_ms: first retry delay and its cap; doubled each retry, jittered.
        rng: source of the jitter (inject a seeded one for repeatable tests).
        wall_clock_ms: source of `invokeTime` (milliseconds since the epoch, as Java's clients send).
        credentials: an ACL account; every request is then signed as RocketMQ clients sign
            (rmqc.acl.Credentials; docs/security.md).
        ssl_context: connect with TLS (rmqc.client.client_tls_context makes one from a CA file and
            an optional client certificate); None: plain TCP.
    """

    def __init__(
        self,
        addresses: Sequence[str],
        timeout_ms: int = 3000,
        max_in_flight: int = 1024,
        max_retries: int = 3,
        consistency: str | None = None,
        *,
        backoff_ms: int = 100,
        max_backoff_ms: int = 1000,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        rng: random.Random | None = None,
        wall_clock_ms: Callable[[], int] = _wall_clock_ms,
        credentials: Credentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        _check_options(addresses, timeout_ms, max_in_flight, max_retries, consistency, backoff_ms)
        self._addresses = list(addresses)
        self._timeout_s = timeout_ms / 1000
        self._timeout_ms = timeout_ms
        self._max_in_flight = max_in_flight
        self._max_retries = max_retries
        self._consistency = consistency
        self._credentials = credentials
        self._ssl_context = ssl_context
        self._backoff_s = backoff_ms / 1000
        self._max_backoff_s = max_backoff_ms / 1000
        self._max_frame_bytes = max_frame_bytes
        self._rng = rng or random.Random()
        self._wall_clock_ms = wall_clock_ms
        self._connections: dict[str, Connection] = {}
        self._leader: str | None = None
        self._leader_lock = trio.Lock()
        self._next_address = 0  # rotates over `addresses` when a node fails
        self._next_opaque = 0
        self._in_flight = 0
        self._nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> ControllerClient:
        if self._nursery_manager is not None:
            raise ClientClosed("a ControllerClient can be entered only once")
        manager = trio.open_nursery()
        self._nursery = await manager.__aenter__()
        self._nursery_manager = manager
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        nursery, manager = self._nursery, self._nursery_manager
        assert nursery is not None and manager is not None
        self._nursery = None
        for connection in self._connections.values():
            connection.close("client closed")
        nursery.cancel_scope.cancel()
        return await manager.__aexit__(exc_type, exc, tb)

    # ---- what callers may inspect ----------------------------------------------------------

    @property
    def leader_address(self) -> str | None:
        """The cached leader address, None until discovered or after it was found stale."""
        return self._leader

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def connected_addresses(self) -> list[str]:
        return sorted(address for address, conn in self._connections.items() if not conn.closed)

    # ---- the one way requests are made ----------------------------------------------------

    async def request(
        self,
        code: int,
        ext: Mapping[str, object] | None = None,
        body: bytes | None = None,
        *,
        address: str | None = None,
        oneway: bool = False,
        leader: bool = True,
    ) -> RemotingCommand | None:
        """Send one request; the answer (None for `oneway`).

        `address` picks the node; else `leader=True` sends to the leader, `leader=False` to any
        configured node. Raises RequestTimeout, TooManyInFlight, RetriesExhausted, ClientClosed.
        """
        if self._nursery is None:
            raise ClientClosed("use ControllerClient inside `async with`")
        ext = self._with_consistency(code, ext)
        with self._in_flight_slot():
            with trio.move_on_after(self._timeout_s):
                return await self._with_retries(code, ext, body, address, oneway, leader)
            where = address or ("the leader" if leader else "any controller")
            raise RequestTimeout(f"{_code_name(code)} to {where}: no answer within {self._timeout_ms} ms")

    def send_oneway_nowait(self, address: str, code: int, ext: Mapping[str, object] | None = None) -> bool:
        """Queue a one-way request on the open connection to `address`, with no task, cancel scope
        or wait: what a simulator sending thousands of heartbeats a second can afford. False
        (nothing sent) when no connection to `address` is open yet or its outbox is full; the
        caller then uses `request(..., oneway=True)`, which connects and waits, or drops it."""
        connection = self._connections.get(address)
        if connection is None or not connection.ready.is_set():
            return False
        command = make_request(code, self._new_opaque(), self._with_consistency(code, ext), oneway=True)
        if self._credentials is not None:
            self._credentials.sign(command)  # an unsigned 904 is dropped where ACL is on
        return connection.send_nowait(command)

    async def _with_retries(
        self,
        code: int,
        ext: Mapping[str, object] | None,
        body: bytes | None,
        address: str | None,
        oneway: bool,
        leader: bool,
    ) -> RemotingCommand | None:
        last_error: Exception = NoLeaderError("no attempt made")
        for attempt in range(self._max_retries + 1):
            if attempt:
                await trio.sleep(self._retry_delay_s(attempt))
            target = None
            try:
                target = address or (await self._leader_address() if leader else self._any_address())
                response = await self._send_once(target, code, ext, body, oneway)
            except _RETRYABLE as exc:
                last_error = exc
                self._note_failure(target)
                continue
            refused = response is not None and response.code == ResponseCode.CONTROLLER_NOT_LEADER
            if refused and self._routed(address, leader):
                assert response is not None
                last_error = NotLeaderError(f"{target} answered {_code_name(code)} with 2007 ({response.remark})")
                self._note_failure(target)
                continue
            return response
        raise RetriesExhausted(f"{_code_name(code)} failed {self._max_retries + 1} times", last_error) from last_error

    async def _send_once(
        self, target: str, code: int, ext: Mapping[str, object] | None, body: bytes | None, oneway: bool
    ) -> RemotingCommand | None:
        connection = await self._connection(target)
        command = make_request(code, self._new_opaque(), ext, body, oneway=oneway)
        if self._credentials is not None:
            self._credentials.sign(command)
        return await connection.send(command, expect_response=not oneway)

    async def _connection(self, address: str) -> Connection:
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            if self._nursery is None:  # closed while this request was retrying
                raise ClientClosed("the ControllerClient was closed while a request was in progress")
            self._make_room_for_a_connection(address)
            connection = Connection(address, outbox_frames=self._max_in_flight, max_frame_bytes=self._max_frame_bytes,
                                    ssl_context=self._ssl_context)
            self._connections[address] = connection
            self._nursery.start_soon(connection.run, self._timeout_s, name=f"rmqc client connection {address}")
        await connection.ready.wait()
        if connection.closed:
            raise connection.lost()
        return connection

    def _make_room_for_a_connection(self, address: str) -> None:
        """Forget closed connections; refuse a new one beyond MAX_CONNECTIONS open ones.

        Addresses come from the configuration and from the leaders the controllers name; the bound
        keeps a confused or hostile controller from making us open connections without end.
        """
        for stale in [a for a, conn in self._connections.items() if conn.closed]:
            del self._connections[stale]
        if len(self._connections) >= MAX_CONNECTIONS:
            raise TooManyConnections(
                f"{len(self._connections)} connections open, the limit is {MAX_CONNECTIONS}; not opening {address}"
            )

    # ---- leader discovery ------------------------------------------------------------------

    async def _leader_address(self) -> str:
        if self._leader is not None:
            return self._leader
        async with self._leader_lock:  # one discovery at a time; the others reuse its answer
            if self._leader is None:
                self._leader = await self._discover_leader()
            return self._leader

    async def _discover_leader(self) -> str:
        """Ask each controller in turn for the leader (spec 7.1: first non-empty address wins)."""
        failures: list[str] = []
        # A node that accepts but never answers must not eat the whole timeout: each probe gets a share.
        probe_timeout_s = self._timeout_s / len(self._addresses)
        for _ in range(len(self._addresses)):
            address = self._any_address()
            with trio.move_on_after(probe_timeout_s) as probe:
                try:
                    return await self._ask_for_leader(address)
                except (ConnectionLost, NoLeaderError) as exc:
                    failures.append(str(exc))
            if probe.cancelled_caught:
                failures.append(f"{address} did not answer within {probe_timeout_s * 1000:.0f} ms")
            self._next_address += 1
        raise NoLeaderError("; ".join(failures))

    async def _ask_for_leader(self, address: str) -> str:
        code = RequestCode.CONTROLLER_GET_METADATA_INFO
        response = await self._send_once(address, code, self._with_consistency(code, None), None, False)
        assert response is not None  # two-way
        leader = response.ext("controllerLeaderAddress")
        if response.code != ResponseCode.SUCCESS or not leader:
            raise NoLeaderError(f"{address} names no leader (code {response.code})")
        try:
            parse_address(leader)
        except ConfigError:
            raise NoLeaderError(f"{address} names leader {leader!r}, which is not host:port") from None
        return leader

    def _note_failure(self, target: str | None) -> None:
        """After a failed attempt: forget a stale leader, and try the next node for `leader=False`."""
        if target is not None and target == self._leader:
            self._leader = None
        if target == self._any_address():
            self._next_address += 1

    def _any_address(self) -> str:
        return self._addresses[self._next_address % len(self._addresses)]

    @staticmethod
    def _routed(address: str | None, leader: bool) -> bool:
        """Was the target chosen by us as the leader? Only then is 2007 a reason to rediscover."""
        return address is None and leader

    # ---- small helpers ---------------------------------------------------------------------

    @contextmanager
    def _in_flight_slot(self) -> Iterator[None]:
        if self._in_flight >= self._max_in_flight:
            raise TooManyInFlight(f"{self._in_flight} requests in flight, the limit is {self._max_in_flight}")
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1

    def _new_opaque(self) -> int:
        self._next_opaque = (self._next_opaque + 1) & _OPAQUE_MASK
        return self._next_opaque

    def _retry_delay_s(self, attempt: int) -> float:
        delay_s: float = min(self._max_backoff_s, self._backoff_s * 2 ** (attempt - 1))
        jitter: float = self._rng.uniform(0.5, 1.0)  # clients that failed together retry apart
        return delay_s * jitter

    def _with_consistency(self, code: int, ext: Mapping[str, object] | None) -> Mapping[str, object] | None:
        if self._consistency is None or int(code) not in READ_REQUESTS:
            return ext
        return {**(ext or {}), "consistency": self._consistency}

    # ---- typed calls (field names exactly as spec section 3) --------------------------------

    async def get_metadata(self, address: str | None = None) -> RemotingCommand:
        """CONTROLLER_GET_METADATA_INFO (1005) from `address`, or from any controller."""
        return await self._answer(RequestCode.CONTROLLER_GET_METADATA_INFO, None, address=address, leader=False)

    async def get_next_broker_id(self, cluster: str, broker_name: str, *,
                                 address: str | None = None) -> RemotingCommand:
        """CONTROLLER_GET_NEXT_BROKER_ID (1012); answer extFields `nextBrokerId`."""
        ext = {"clusterName": cluster, "brokerName": broker_name}
        return await self._answer(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, ext, address=address)

    async def apply_broker_id(
        self, cluster: str, broker_name: str, broker_id: int, register_check_code: str
    ) -> RemotingCommand:
        """CONTROLLER_APPLY_BROKER_ID (1013); `register_check_code` is `<ip:port>;<epochMillis>`."""
        ext = {
            "clusterName": cluster,
            "brokerName": broker_name,
            "appliedBrokerId": broker_id,
            "registerCheckCode": register_check_code,
        }
        return await self._answer(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext)

    async def register_broker(
        self, cluster: str, broker_name: str, broker_id: int, broker_address: str
    ) -> RemotingCommand:
        """CONTROLLER_REGISTER_BROKER (1003); the body of a success is the SyncStateSet."""
        ext = {
            "clusterName": cluster,
            "brokerName": broker_name,
            "brokerId": broker_id,
            "brokerAddress": broker_address,
            "invokeTime": self._wall_clock_ms(),
        }
        return await self._answer(RequestCode.CONTROLLER_REGISTER_BROKER, ext)

    async def register_broker_to_namesrv(
        self, cluster: str, broker_name: str, broker_id: int, broker_address: str, body: bytes, *,
        heartbeat_timeout_ms: int, address: str | None = None,
    ) -> RemotingCommand:
        """REGISTER_BROKER (103) to the NameServer at `address` (else the leader), as a Java broker's
        registerBrokerAll: `body` is a plain RegisterBrokerBody, its CRC in `bodyCrc32`."""
        ext = {
            "brokerName": broker_name,
            "brokerAddr": broker_address,
            "clusterName": cluster,
            "haServerAddr": broker_address,
            "brokerId": broker_id,
            "heartbeatTimeoutMillis": heartbeat_timeout_ms,
            "enableActingMaster": "false",
            "compressed": "false",
            "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF,
        }
        return await self._answer(RequestCode.REGISTER_BROKER, ext, body, address=address)

    async def get_replica_info(self, broker_name: str, *, address: str | None = None) -> RemotingCommand:
        """CONTROLLER_GET_REPLICA_INFO (1004); master in extFields, SyncStateSet in the body."""
        return await self._answer(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": broker_name}, address=address)

    async def elect_master(
        self, cluster: str, broker_name: str, broker_id: int, designate: bool = False
    ) -> RemotingCommand:
        """CONTROLLER_ELECT_MASTER (1002); `designate=True` is mqadmin's electMaster."""
        ext = {
            "clusterName": cluster,
            "brokerName": broker_name,
            "brokerId": broker_id,
            "designateElect": designate,
            "invokeTime": self._wall_clock_ms(),
        }
        return await self._answer(RequestCode.CONTROLLER_ELECT_MASTER, ext)

    async def alter_sync_state_set(
        self,
        broker_name: str,
        master_id: int,
        master_epoch: int,
        sync_state_set: Iterable[int],
        sync_state_set_epoch: int,
    ) -> RemotingCommand:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001): the proposed set with the sender's current epoch."""
        ext = {
            "brokerName": broker_name,
            "masterBrokerId": master_id,
            "masterEpoch": master_epoch,
            "invokeTime": self._wall_clock_ms(),
        }
        body = dumps_fastjson({"syncStateSet": sorted(sync_state_set), "syncStateSetEpoch": sync_state_set_epoch})
        return await self._answer(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, ext, body)

    async def get_sync_state_data(self, broker_names: Iterable[str], *, address: str | None = None) -> RemotingCommand:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006); the body of the answer is BrokerReplicasInfo."""
        body = dumps_fastjson(list(broker_names))
        return await self._answer(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, body, address=address)

    async def clean_broker_data(
        self,
        cluster: str | None,
        broker_name: str,
        broker_ids: Iterable[int] | None = None,
        clean_living: bool = False,
    ) -> RemotingCommand:
        """CLEAN_BROKER_DATA (1011); `broker_ids` None cleans the whole broker-set (spec 3.10)."""
        ext = {
            "clusterName": cluster,
            "brokerName": broker_name,
            "brokerControllerIdsToClean": None if broker_ids is None else ";".join(str(i) for i in broker_ids),
            "isCleanLivingBroker": clean_living,
            "invokeTime": self._wall_clock_ms(),
        }
        return await self._answer(RequestCode.CLEAN_BROKER_DATA, ext)

    async def heartbeat(
        self,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_address: str,
        *,
        epoch: int = -1,
        max_offset: int = -1,
        confirm_offset: int = -1,
        heartbeat_timeout_ms: int = 10000,
        election_priority: int = _INT_MAX,
        address: str | None = None,
        oneway: bool = True,
    ) -> RemotingCommand | None:
        """BROKER_HEARTBEAT (904) to `address` or any controller; one-way (None) unless `oneway=False`."""
        ext = heartbeat_ext(cluster, broker_name, broker_id, broker_address, epoch, max_offset, confirm_offset,
                            heartbeat_timeout_ms, election_priority)
        return await self.request(RequestCode.BROKER_HEARTBEAT, ext, address=address, oneway=oneway, leader=False)

    async def get_config(self, address: str) -> RemotingCommand:
        """GET_CONTROLLER_CONFIG (1010) of one node; the body is properties text."""
        return await self._answer(RequestCode.GET_CONTROLLER_CONFIG, None, address=address)

    async def update_config(self, address: str | None, properties: Mapping[str, object]) -> RemotingCommand:
        """UPDATE_CONTROLLER_CONFIG (1009) through one node (None: the leader, found as for any
        write); `properties` sent as properties text. rmqc replicates the change to every node."""
        body = dumps_properties(properties)
        return await self._answer(RequestCode.UPDATE_CONTROLLER_CONFIG, None, body, address=address)

    async def list_members(self) -> RemotingCommand:
        """RMQC_MEMBERS_LIST (60004) from the leader: body JSON array of {id, address, role,
        isLeader, match, lag}, sorted by id."""
        return await self._answer(RMQC_MEMBERS_LIST, None)

    async def add_member(self, node_id: str, address: str) -> RemotingCommand:
        """RMQC_MEMBERS_ADD (60005): `node_id` at `address` (host:port) joins as a learner; answered
        once the change is applied on the leader, body JSON {change, id, address, index, voters,
        learners}. An id already a member at the same address is answered 0."""
        return await self._answer(RMQC_MEMBERS_ADD, {"id": node_id, "address": address})

    async def promote_member(self, node_id: str) -> RemotingCommand:
        """RMQC_MEMBERS_PROMOTE (60006): a learner that has caught up becomes a voter."""
        return await self._answer(RMQC_MEMBERS_PROMOTE, {"id": node_id})

    async def remove_member(self, node_id: str) -> RemotingCommand:
        """RMQC_MEMBERS_REMOVE (60007): `node_id` leaves the membership (the leader itself hands its
        leadership over first)."""
        return await self._answer(RMQC_MEMBERS_REMOVE, {"id": node_id})

    async def _answer(
        self,
        code: int,
        ext: Mapping[str, object] | None,
        body: bytes | None = None,
        *,
        address: str | None = None,
        leader: bool = True,
    ) -> RemotingCommand:
        response = await self.request(code, ext, body, address=address, leader=leader)
        assert response is not None  # two-way requests always have an answer
        return response


def _code_name(code: int) -> str:
    try:
        return f"{RequestCode(code).name} ({int(code)})"
    except ValueError:
        return f"request {code}"


def _check_options(
    addresses: Sequence[str],
    timeout_ms: int,
    max_in_flight: int,
    max_retries: int,
    consistency: str | None,
    backoff_ms: int,
) -> None:
    if isinstance(addresses, str) or not addresses:
        raise ConfigError(f"addresses must be a non-empty list of host:port, not {addresses!r}")
    for address in addresses:
        parse_address(address)
    if consistency is not None and consistency not in CONSISTENCY_LEVELS:
        raise ConfigError(f"consistency {consistency!r} is not one of {sorted(CONSISTENCY_LEVELS)}")
    for name, value, least in (
        ("timeout_ms", timeout_ms, 1),
        ("max_in_flight", max_in_flight, 1),
        ("max_retries", max_retries, 0),
        ("backoff_ms", backoff_ms, 0),
    ):
        if value < least:
            raise ConfigError(f"{name} = {value} must be at least {least}")


def heartbeat_ext(cluster: str, broker_name: str, broker_id: int, broker_address: str, epoch: int = -1,
                  max_offset: int = -1, confirm_offset: int = -1, heartbeat_timeout_ms: int = 10000,
                  election_priority: int = _INT_MAX) -> dict[str, object]:
    """The extFields of a BROKER_HEARTBEAT (904), spec 3.1 (for `request` or `send_oneway_nowait`)."""
    return {
        "clusterName": cluster,
        "brokerAddr": broker_address,
        "brokerName": broker_name,
        "brokerId": broker_id,
        "epoch": epoch,
        "maxOffset": max_offset,
        "confirmOffset": confirm_offset,
        "heartbeatTimeoutMills": heartbeat_timeout_ms,
        "electionPriority": election_priority,
    }
