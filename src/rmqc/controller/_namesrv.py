"""`NamesrvProcessor`: the Java NameServer's requests (DefaultRequestProcessor,
ClientRequestProcessor of RocketMQ 5.5.0; docs/namesrv.md) answered against the replicated state.

Writes (100, 102, 103, 104, 216) are decided on the leader (a follower forwards them) and become
commands; a 103 that changes nothing, and every 322, only refresh the leader's liveness of the
registration: no log write. Reads (101, 105, 106, 206, 219) are served by every node through the
read path. Liveness of registrations (Java: 120 s, or the header's heartbeatTimeoutMillis) is the
leader's, on the monotonic clock: `expired` turns the lapsed ones into UnregisterBrokerRoute
commands, and a new leader starts every registration's clock afresh (as the controller's grace).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rmqc.fsm import (
    MAX_CACHED_ROUTES,
    MAX_KV_ENTRIES,
    MAX_KV_VALUE_BYTES,
    MAX_NAME_BYTES,
    MAX_REGISTRATIONS,
    MAX_TOPICS,
    MAX_TOPICS_PER_REGISTRATION,
    ApplyResult,
    ApplyStatus,
    BrokerGroup,
    Command,
    ControllerState,
    DeleteKvConfig,
    DeleteTopicRoute,
    NamesrvRefused,
    NamesrvState,
    PutKvConfig,
    RegisterBrokerRoute,
    RegisterTopicRoute,
    Registration,
    SetWritePermOfBroker,
    TopicRow,
    UnregisterBrokerRoute,
    check_kv,
    check_topic,
    registration_of,
)
from rmqc.liveness import BrokerKey
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, loads_fastjson, make_response

from . import _namesrv_bodies as bodies
from ._headers import HeaderField, HeaderSpec
from ._outcome import Outcome, Propose, Reply, RequestContext

C = ResponseCode
F = HeaderField
DEFAULT_BROKER_CHANNEL_EXPIRED_MS = 120_000  # RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
SCAN_INTERVAL_MS = 5_000  # Java's scanNotActiveBroker period
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
V4_9_4 = 401  # MQVersion.Version.V4_9_4.ordinal() in 5.5.0: from here on, standard JSON routes
TOPIC_NOT_EXIST_REMARK = "No topic route info in name server for the topic: {topic}"

REGISTER = HeaderSpec(
    F("brokerName", required="cf"), F("brokerAddr", required="cf"), F("clusterName", required="cf"),
    F("haServerAddr", required="cf"), F("brokerId", "long", required="cf"), F("heartbeatTimeoutMillis", "long"),
    F("compressed", "bool", False), F("bodyCrc32", "int", 0),
)
UNREGISTER = HeaderSpec(
    F("brokerName", required="cf"), F("brokerAddr", required="cf"), F("clusterName", required="cf"),
    F("brokerId", "long", required="cf"),
)
QUERY_DATA_VERSION = HeaderSpec(
    F("brokerName", required="cf"), F("brokerAddr", required="cf"), F("clusterName", required="cf"),
    F("brokerId", "long", required="cf"),
)
ROUTE = HeaderSpec(F("topic", required="cf"), F("acceptStandardJsonOnly", "bool", False))
PUT_KV = HeaderSpec(F("namespace", required="cf"), F("key", required="cf"), F("value", required="cf"))
KV_KEY = HeaderSpec(F("namespace", required="cf"), F("key", required="cf"))
KV_NAMESPACE = HeaderSpec(F("namespace", required="cf"))
DELETE_TOPIC = HeaderSpec(F("topic", required="cf"), F("clusterName"))
TOPICS_BY_CLUSTER = HeaderSpec(F("cluster", required="cf"))
REGISTER_TOPIC = HeaderSpec(F("topic", required="cf"))
BROKER_NAME = HeaderSpec(F("brokerName", required="cf"))

# 319's answer: Java NamesrvConfig options at the value rmqc's behaviour fixes, and rmqc's bounds.
# All are constants of the code (apply must decide alike on every node), so 318 is refused.
NAMESRV_CONFIG: dict[str, object] = {
    "orderMessageEnable": False,
    "returnOrderTopicConfigToBroker": True,
    "enableAllTopicList": True,
    "enableTopicList": True,
    "deleteTopicWithBrokerRegistration": False,
    "notifyMinBrokerIdChanged": False,
    "scanNotActiveBrokerInterval": SCAN_INTERVAL_MS,
    "brokerChannelExpiredMillis": DEFAULT_BROKER_CHANNEL_EXPIRED_MS,
    "rmqcMaxTopicsPerRegistration": MAX_TOPICS_PER_REGISTRATION,
    "rmqcMaxTopics": MAX_TOPICS,
    "rmqcMaxRegistrations": MAX_REGISTRATIONS,
    "rmqcMaxKvEntries": MAX_KV_ENTRIES,
    "rmqcMaxKvValueBytes": MAX_KV_VALUE_BYTES,
    "rmqcMaxNameBytes": MAX_NAME_BYTES,
    "rmqcMaxCachedRoutes": MAX_CACHED_ROUTES,
    "rmqcMaxRegisterBodyBytes": bodies.MAX_REGISTER_BODY_BYTES,
}
UPDATE_CONFIG_REFUSED = ("rmqc's NameServer options are constants of its code, the same on every node (the "
                         "replicated state depends on them); they cannot be changed at run time. Controller "
                         "options: rmqc admin config set")

R = RequestCode


# A failover within this long of its master's 104 was a shutdown (the broker unregisters, then its
# connections close: milliseconds apart; a hung shutdown hook makes it seconds).
SHUTDOWN_NOTICE_MS = 30_000
# Unregistered brokers remembered for that (a rolling restart of a large fleet fits).
MAX_UNREGISTERED = 10_000
# A registration proposed this long ago and not applied is taken as failed (its client was answered
# with the failure by the request timeout): the next identical one is proposed again.
REGISTERING_MS = 10_000
UNAPPLIED_COPY_REMARK = ("an identical registration sent through another NameServer address was not applied; "
                         "the broker's next registration retries it")

# What makes two 103s the same write: the registration and its topic table (not when or who asked).
RegistrationWrite = tuple[Registration, tuple[TopicRow, ...]]


class NamesrvProcessor:
    def __init__(self, state: ControllerState) -> None:
        self.state = state
        # (cluster, address) -> (last heard, monotonic ms; timeout ms). Kept and acted on by the
        # leader only; bounded by the replicated registrations (entries without one are dropped).
        self._heard: dict[tuple[str, str], tuple[int, int]] = {}
        self._next_scan_ms = 0
        # Brokers that unregistered (104: a broker sends it as it shuts down), monotonic ms, oldest
        # first: a failover of one of them soon after is a master shut down, not a crash.
        self._unregistered: OrderedDict[BrokerKey, int] = OrderedDict()
        # Leader: registrations proposed and not yet applied, by (cluster, address), with the time
        # they count as failed. A broker registers with every NameServer address at once, so each
        # new topic table reaches the leader once per node; the copies wait for the first one's
        # entry instead of writing 18 KB again each. Bounded by MAX_REGISTRATIONS.
        self._registering: dict[tuple[str, str], tuple[RegistrationWrite, int]] = {}
        # Follower: registrations it answered itself since its last digest, (cluster, address) ->
        # (monotonic ms, timeout ms or None); the digest carries them to the leader.
        self._heard_here: dict[tuple[str, str], tuple[int, int | None]] = {}
        self.handlers: dict[int, Callable[[RemotingCommand, RequestContext], Outcome]] = {
            R.REGISTER_BROKER: self._register,
            R.UNREGISTER_BROKER: self._unregister,
            R.QUERY_DATA_VERSION: self._query_data_version,
            R.GET_ROUTEINFO_BY_TOPIC: self._route,
            R.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._topic_list,
            R.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            R.PUT_KV_CONFIG: self._put_kv,
            R.GET_KV_CONFIG: self._get_kv,
            R.DELETE_KV_CONFIG: self._delete_kv,
            R.GET_KVLIST_BY_NAMESPACE: self._kv_list,
            R.GET_TOPICS_BY_CLUSTER: self._topics_by_cluster,
            R.REGISTER_TOPIC_IN_NAMESRV: self._register_topic,
            R.WIPE_WRITE_PERM_OF_BROKER: self._write_perm,
            R.ADD_WRITE_PERM_OF_BROKER: self._write_perm,
            R.GET_NAMESRV_CONFIG: self._get_config,
            R.UPDATE_NAMESRV_CONFIG: self._update_config,
        }

    @property
    def _ns(self) -> NamesrvState:
        return self.state.namesrv

    def _groups(self) -> dict[str, BrokerGroup]:
        return {g.broker_name: g for g in self.state.groups()}

    # ---- liveness of registrations (leader) -----------------------------------------------------

    def heard(self, cluster: str, address: str, now_ms: int, timeout_ms: int | None = None) -> None:
        """A 103, 322 or 904 from this broker reached the leader (or a follower relayed one heard
        `now_ms`: never moves its time back)."""
        key = (cluster, address)
        old = self._heard.get(key)
        if old is not None or self._ns.registration(cluster, address) is not None or timeout_ms is not None:
            keep = timeout_ms if timeout_ms is not None else (old[1] if old else DEFAULT_BROKER_CHANNEL_EXPIRED_MS)
            self._heard[key] = (max(now_ms, old[0]) if old else now_ms, keep)

    def _heard_by(self, ctx: RequestContext, cluster: str, address: str, timeout_ms: int | None = None) -> None:
        """A 103 or 322 answered here: the leader's liveness at once, a follower's in its next digest."""
        if ctx.is_leader:
            self.heard(cluster, address, ctx.now_ms, timeout_ms)
        elif (cluster, address) in self._heard_here or len(self._heard_here) < MAX_REGISTRATIONS:
            self._heard_here[(cluster, address)] = (ctx.now_ms, timeout_ms)

    def answer_here(self, request: RemotingCommand, ctx: RequestContext) -> RemotingCommand | None:
        """Follower: a 103 that changes nothing in this node's state, or a 322, answered here (its
        liveness relayed in the next digest) as each Java NameServer answers its own; None: it
        changes something, for the leader to decide. A broker registers with every NameServer
        address every 30 s, so the leader would otherwise parse every node's share of the fleet."""
        outcome = self.handlers[request.code](request, ctx)
        return outcome.response if isinstance(outcome, Reply) else None

    def take_heard_here(self, now_ms: int) -> tuple[list[Any], ...]:
        """The digest's registration rows: [cluster, address, timeout ms or 0, heard ms ago]."""
        rows = tuple([cluster, address, timeout_ms or 0, max(0, now_ms - at)]
                     for (cluster, address), (at, timeout_ms) in self._heard_here.items())
        self._heard_here.clear()
        return rows

    def relayed(self, rows: tuple[list[Any], ...], now_ms: int) -> None:
        """Leader: a follower's digest rows (their types checked by the digest's decoder)."""
        for cluster, address, timeout_ms, age_ms in rows:
            self.heard(cluster, address, now_ms - age_ms, timeout_ms or None)

    def became_leader(self) -> None:
        """Every registration's clock starts afresh (a grace of one timeout, as Java's restart)."""
        self._heard.clear()
        self._registering.clear()  # another term's proposals: none of them is waited for here

    def expired(self, now_ms: int, wall_ms: int) -> list[Command]:
        """Leader, every SCAN_INTERVAL_MS: registrations not heard of within their timeout."""
        if now_ms < self._next_scan_ms:
            return []
        self._next_scan_ms = now_ms + SCAN_INTERVAL_MS
        commands: list[Command] = []
        live: dict[tuple[str, str], tuple[int, int]] = {}
        for key, registration in self._ns.registrations.items():
            last, timeout_ms = self._heard.get(key, (now_ms, DEFAULT_BROKER_CHANNEL_EXPIRED_MS))
            live[key] = (last, timeout_ms)
            if last + timeout_ms < now_ms:
                commands.append(_unregister_of(registration, "expired", wall_ms))
        self._heard = live
        self._registering = {key: pending for key, pending in self._registering.items() if pending[1] > now_ms}
        return commands

    def next_scan_ms(self) -> int:
        return self._next_scan_ms

    def inactive(self, keys: list[BrokerKey], wall_ms: int) -> list[Command]:
        """Leader: brokers the controller's liveness found dead (heartbeats expired, connection
        closed) leave the routes at once, as Java's NameServer drops a broker whose channel closed."""
        commands: list[Command] = []
        for key in keys:
            group = self.state.group(key.broker_name)
            address = group.address_of(key.broker_id) if group is not None else None
            registration = self._ns.registration(key.cluster_name, address) if address else None
            if registration is not None:
                commands.append(_unregister_of(registration, "inactive", wall_ms))
        return commands

    # ---- 103 / 104 / 322 --------------------------------------------------------------------------

    def _register(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = REGISTER.decode(request)
        crc = h["bodyCrc32"] or 0
        if crc != 0 and crc != (zlib.crc32(request.body or b"") & 0x7FFFFFFF):
            return _reply(request, C.SYSTEM_ERROR, "crc32 not match")
        for name in ("brokerName", "brokerAddr", "clusterName", "haServerAddr"):
            if len(h[name].encode()) > MAX_NAME_BYTES:
                return _reply(request, C.SYSTEM_ERROR, f"{name} is longer than {MAX_NAME_BYTES} bytes")
        body = bodies.parse_register_body(request.body, h["compressed"])
        if len(body.topics) > MAX_TOPICS_PER_REGISTRATION:
            return _reply(request, C.SYSTEM_ERROR, f"{len(body.topics)} topics in one registration exceed the "
                          f"bound of {MAX_TOPICS_PER_REGISTRATION}")
        if any(len(row[0].encode()) > MAX_NAME_BYTES for row in body.topics):
            return _reply(request, C.SYSTEM_ERROR, f"a topic name is longer than {MAX_NAME_BYTES} bytes")
        cluster, name, address = h["clusterName"], h["brokerName"], h["brokerAddr"]
        command = RegisterBrokerRoute(cluster, name, h["brokerId"], address, h["haServerAddr"], *body.data_version,
                                      body.topics, ctx.stamp_ms, ctx.origin)
        timeout_ms = h["heartbeatTimeoutMillis"]
        if not self._ns.register_changes(command, self.state.group(name)):
            self._heard_by(ctx, cluster, address, timeout_ms)
            return Reply(self._register_answer(request, command))
        key, write = (cluster, address), (registration_of(command), command.topics)
        pending = self._registering.get(key)
        if pending is not None and pending[0] == write and pending[1] > ctx.now_ms:
            return self._await_identical(request, command, ctx.now_ms, timeout_ms)
        if ctx.is_leader and len(self._registering) < MAX_REGISTRATIONS:
            self._registering[key] = (write, ctx.now_ms + REGISTERING_MS)

        def finish(results: list[ApplyResult]) -> RemotingCommand:
            if self._registering.get(key, (None,))[0] == write:
                del self._registering[key]
            result = results[0]
            if not result.ok:
                return make_response(request, C.SYSTEM_ERROR, result.remark or str(result.status))
            self.heard(cluster, address, ctx.now_ms, timeout_ms)
            return self._register_answer(request, command)

        return Propose([command], finish)

    def _await_identical(self, request: RemotingCommand, command: RegisterBrokerRoute, now_ms: int,
                         timeout_ms: int | None) -> Propose:
        """A copy of a registration in flight: no command, so its (shared, usually empty) entry
        comes after the first one's in the log, and once applied the first one's outcome is known:
        the copy is answered as a registration that changed nothing, or refused if it did not land."""
        def finish(_results: list[ApplyResult]) -> RemotingCommand:
            if self._ns.register_changes(command, self.state.group(command.broker_name)):
                return make_response(request, C.SYSTEM_ERROR, UNAPPLIED_COPY_REMARK)
            self.heard(command.cluster_name, command.broker_address, now_ms, timeout_ms)
            return self._register_answer(request, command)

        return Propose([], finish)

    def _register_answer(self, request: RemotingCommand, command: RegisterBrokerRoute) -> RemotingCommand:
        """haServerAddr/masterAddr name the route's master to a registration that is not it (Java:
        to a non-zero brokerId); the body is the ORDER_TOPIC_CONFIG namespace, when it exists."""
        ext: dict[str, object] = {}
        master = self._ns.master_registration(command.broker_name, self.state.group(command.broker_name))
        if master is not None and master.address != command.broker_address and command.broker_id != 0:
            ext = {"haServerAddr": master.ha_address, "masterAddr": master.address}
        table = self._ns.kv_list(ORDER_TOPIC_CONFIG)
        return make_response(request, C.SUCCESS, None, ext,
                             bodies.kv_table_body(table) if table is not None else None)

    def unregistered_lately(self, key: BrokerKey, now_ms: int) -> bool:
        """Did `key` unregister within SHUTDOWN_NOTICE_MS (the leader heard its 104)?"""
        at = self._unregistered.get(key)
        return at is not None and now_ms - at <= SHUTDOWN_NOTICE_MS

    def _unregister(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = UNREGISTER.decode(request)
        key = BrokerKey(h["clusterName"], h["brokerName"], h["brokerId"])
        self._unregistered.pop(key, None)
        self._unregistered[key] = ctx.now_ms
        if len(self._unregistered) > MAX_UNREGISTERED:
            self._unregistered.popitem(last=False)
        registration = self._ns.registration(h["clusterName"], h["brokerAddr"])
        if registration is None:
            return _reply(request, C.SUCCESS)  # Java answers success and finds nothing to remove
        command = UnregisterBrokerRoute(h["clusterName"], h["brokerName"], h["brokerId"], h["brokerAddr"], "request",
                                        ctx.stamp_ms, ctx.origin)
        return Propose([command], lambda results: make_response(request, C.SUCCESS))

    def _query_data_version(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = QUERY_DATA_VERSION.decode(request)
        asked = bodies.parse_data_version(_json_body(request))
        registration = self._ns.registration(h["clusterName"], h["brokerAddr"])
        changed = registration is None or registration.data_version != asked
        self._heard_by(ctx, h["clusterName"], h["brokerAddr"])
        body = bodies.data_version_body(registration.data_version) if registration is not None else None
        return _reply(request, C.SUCCESS, ext={"changed": changed}, body=body)

    # ---- reads -----------------------------------------------------------------------------------

    def _route(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        """The hottest read: answered from the node's cache of encoded routes (fsm._namesrv drops
        an answer whenever something it depends on changes)."""
        h = ROUTE.decode(request)
        topic = h["topic"]
        standard = request.version >= V4_9_4 or bool(h["acceptStandardJsonOnly"])
        body = self._ns.cached_route(topic, standard)
        if body is None:
            body = self.encoded_route(topic, standard)
            if body is None:
                return _reply(request, C.TOPIC_NOT_EXIST, TOPIC_NOT_EXIST_REMARK.format(topic=topic))
            self._ns.cache_route(topic, standard, body)
        return _reply(request, C.SUCCESS, body=body)

    def encoded_route(self, topic: str, standard_json: bool) -> bytes | None:
        """The 105 body of `topic` computed afresh (no cache), or None when there is no route."""
        route = bodies.topic_route(self._ns, topic, self._groups())
        return None if route is None else bodies.route_body(route, standard_json)

    def _topics_by_cluster(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        """224: Java's getTopicsByCluster (an unknown cluster gives an empty list)."""
        names = set(self._ns.clusters().get(TOPICS_BY_CLUSTER.decode(request)["cluster"], ()))
        topics = [topic for topic, queues in self._ns.topics.items() if not names.isdisjoint(queues)]
        return _reply(request, C.SUCCESS, body=bodies.topic_list_body(topics))

    def _get_config(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        """319: Java's getAllConfigsFormatString, `key=value` lines."""
        text = "".join(f"{key}={str(value).lower() if isinstance(value, bool) else value}\n"
                       for key, value in NAMESRV_CONFIG.items())
        return _reply(request, C.SUCCESS, body=text.encode())

    def _update_config(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        """318: refused, with Java's code for options it will not change (NO_PERMISSION)."""
        return _reply(request, C.NO_PERMISSION, UPDATE_CONFIG_REFUSED)

    def _cluster_info(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        return _reply(request, C.SUCCESS, body=bodies.cluster_info_body(self._ns, self._groups()))

    def _topic_list(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        return _reply(request, C.SUCCESS, body=bodies.topic_list_body(list(self._ns.topics)))

    def _get_kv(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = KV_KEY.decode(request)
        value = self._ns.kv.get(h["namespace"], {}).get(h["key"])
        if value is None:
            return _reply(request, C.QUERY_NOT_FOUND, f"No config item, Namespace: {h['namespace']} Key: {h['key']}")
        return _reply(request, C.SUCCESS, ext={"value": value})

    def _kv_list(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = KV_NAMESPACE.decode(request)
        table = self._ns.kv_list(h["namespace"])
        if table is None:
            return _reply(request, C.QUERY_NOT_FOUND, f"No config item, Namespace: {h['namespace']}")
        return _reply(request, C.SUCCESS, body=bodies.kv_table_body(table))

    # ---- writes of operators ---------------------------------------------------------------------

    def _delete_topic(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = DELETE_TOPIC.decode(request)
        command = DeleteTopicRoute(h["topic"], h["clusterName"] or None, ctx.stamp_ms, ctx.origin)
        return Propose([command], lambda results: make_response(request, C.SUCCESS))

    def _register_topic(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        """217: Java answers SUCCESS also when it registers nothing (no queue data, or a broker
        name not registered); a refused bound is answered 1 with its remark."""
        topic = REGISTER_TOPIC.decode(request)["topic"]
        queues = bodies.parse_topic_route_queues(request.body)
        try:
            check_topic(topic)
        except NamesrvRefused as refused:
            return _reply(request, C.SYSTEM_ERROR, refused.detail)
        if not queues or not {row[0] for row in queues} <= set(self._ns.broker_names()):
            return _reply(request, C.SUCCESS)  # Java: "Register topic contains illegal broker", nothing done
        command = RegisterTopicRoute(topic, queues, ctx.stamp_ms, ctx.origin)

        def finish(results: list[ApplyResult]) -> RemotingCommand:
            if results[0].status is ApplyStatus.TOO_MANY_TOPICS:
                return make_response(request, C.SYSTEM_ERROR, results[0].remark)
            return make_response(request, C.SUCCESS)  # also NOT_FOUND: a name unregistered meanwhile

        return Propose([command], finish)

    def _write_perm(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        """205 / 327: answered with how many topics of the broker name changed."""
        wipe = request.code == R.WIPE_WRITE_PERM_OF_BROKER
        command = SetWritePermOfBroker(BROKER_NAME.decode(request)["brokerName"], wipe, ctx.stamp_ms, ctx.origin)
        field = "wipeTopicCount" if wipe else "addTopicCount"
        return Propose([command], lambda results: make_response(request, C.SUCCESS, None,
                                                                {field: results[0].detail or 0}))

    def _put_kv(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = PUT_KV.decode(request)
        try:
            check_kv(h["namespace"], h["key"], h["value"])
        except NamesrvRefused as refused:
            return _reply(request, C.SYSTEM_ERROR, refused.detail)
        command = PutKvConfig(h["namespace"], h["key"], h["value"], ctx.stamp_ms, ctx.origin)

        def finish(results: list[ApplyResult]) -> RemotingCommand:
            if results[0].ok:
                return make_response(request, C.SUCCESS)
            return make_response(request, C.SYSTEM_ERROR, results[0].remark)

        return Propose([command], finish)

    def _delete_kv(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = KV_KEY.decode(request)
        command = DeleteKvConfig(h["namespace"], h["key"], ctx.stamp_ms, ctx.origin)
        return Propose([command], lambda results: make_response(request, C.SUCCESS))


def _unregister_of(registration: Registration, reason: str, wall_ms: int) -> UnregisterBrokerRoute:
    return UnregisterBrokerRoute(registration.cluster_name, registration.broker_name, registration.broker_id,
                                 registration.address, reason, wall_ms)


def _json_body(request: RemotingCommand) -> object:
    if not request.body:
        return None
    return loads_fastjson(request.body)


def _reply(request: RemotingCommand, code: int, remark: str | None = None, ext: dict[str, object] | None = None,
           body: bytes | None = None) -> Reply:
    return Reply(make_response(request, code, remark, ext, body))

