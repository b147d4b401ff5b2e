"""`ControllerProcessor`: one handler per request code (spec section 3, errata in section 15).

Handlers decide on the leader against the applied state and either answer at once (reads, and
requests that cannot succeed) or return `Propose(commands, finish)`: the commands carry their
preconditions, and `finish` builds the answer from the apply results, so responses carry exactly
the post-apply epochs. Time comes from the caller; nothing here does I/O. Two clocks: `now_ms`
(monotonic) is only compared with liveness deadlines; the wall clock (`RequestContext.stamp_ms`,
the `wall_ms` arguments) is only stamped into commands, so a stepped wall clock never decides who
is alive.

Java quirks kept on purpose (brokers and mqadmin rely on the observable behaviour): the first
election of a never-elected group takes the requester without a liveness check; a controller
election that finds no candidate still bumps masterEpoch (and is retried, bumping it again);
1011 with isCleanLivingBroker=true removes the whole group even when ids are listed; 1011 without
ids refuses while the group has a master, alive or not; a 1006 without body or with an empty list
(`[]`) answers code 1. Fixed on purpose: offsets are compared as 64-bit values and ties go to the smallest id; 1001
checks registration of all proposed ids before liveness (spec 15); a racing election that lost
its precondition answers 2011 with the winner instead of failing; a controller-triggered 1002
(brokerId -1) on a never-elected group answers 2004 without bumping masterEpoch; the first
election refuses (2010) a requester id that is not registered; 1009 refuses an unknown key or a
bad value with 29 INVALID_PARAMETER (Java ignores the key, or keeps the old value); 1009 is
replicated (Java changes only the answering node): the leader logs it with who asked, every node
applies it, a follower forwards it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import NamedTuple

import orjson

from rmqc.errors import BoundExceeded, ProtocolError
from rmqc.fsm import (
    AlterSyncStateSet,
    ApplyBrokerId,
    ApplyResult,
    ApplyStatus,
    BrokerGroup,
    CandidateRow,
    CleanBrokerData,
    Command,
    ControllerState,
    ElectionReason,
    ElectMaster,
    GroupRow,
    ImportGroups,
    Origin,
    Trigger,
    UpdateBrokerAddress,
    UpdateControllerConfig,
    check_alter_sync_state_set,
    check_apply_broker_id,
    check_import_groups,
    group_rows,
)
from rmqc.liveness import BrokerKey, Heartbeat, HeartbeatTable
from rmqc.remoting import (
    LEADER_WRITE_REQUESTS,
    ONEWAY_FLAG,
    READ_REQUESTS,
    RMQC_IMPORT_GROUPS,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    loads_fastjson,
    make_request,
    make_response,
)

from . import _bodies
from ._config import ConfigBlackListed, ConfigInvalid, ControllerConfig, PropertiesSyntaxError
from ._headers import BadRequestBody, DecodedHeader, HeaderField, HeaderSpec
from ._heartbeat import heartbeat_of
from ._namesrv import NamesrvProcessor
from ._outcome import NodeInfo, NoReply, Outcome, Propose, Reply, RequestContext
from ._policy import choose_master

C = ResponseCode
NOT_LEADER_REMARK = "The controller is not in leader state"
_JAVA_LONG = re.compile(r"[+-]?\d{1,19}")  # Long.valueOf syntax (range checked apart)
_HEARTBEAT_CODE = int(RequestCode.BROKER_HEARTBEAT)  # a plain int compares faster than the enum
# the same for what every 1013 reads (an enum member costs ~70 ns a read, through its metaclass)
_OK, _CLUSTER_MISMATCH, _SUCCESS = ApplyStatus.OK, ApplyStatus.CLUSTER_MISMATCH, int(C.SUCCESS)
_NO_REPLY = NoReply()  # immutable: one instance serves every one-way request
_LEADER_WRITES = LEADER_WRITE_REQUESTS  # only the leader decides them (remoting's table)

# ---- header tables (spec 3.x), Java field names exactly --------------------------------------

F = HeaderField
NEXT_BROKER_ID = HeaderSpec(F("clusterName"), F("brokerName", required="needed"))
APPLY_BROKER_ID = HeaderSpec(
    F("clusterName", required="needed"), F("brokerName", required="needed"),
    F("appliedBrokerId", "long", required="needed"), F("registerCheckCode", required="needed"),
)
REGISTER_BROKER = HeaderSpec(
    F("clusterName", required="needed"), F("brokerName", required="needed"),
    F("brokerId", "long", required="needed"), F("brokerAddress", required="needed"),
)
REPLICA_INFO = HeaderSpec(F("brokerName", required="needed"))
ELECT_MASTER = HeaderSpec(
    F("clusterName", default="", required="cf"), F("brokerName", default="", required="cf"),
    F("brokerId", "long", -1, required="cf"), F("designateElect", "bool", False, required="cf"),
)
ALTER_SYNC_STATE_SET = HeaderSpec(
    F("brokerName", required="needed"), F("masterBrokerId", "long", required="needed"),
    F("masterEpoch", "int", required="needed"),
)
CLEAN_BROKER_DATA = HeaderSpec(
    F("clusterName"), F("brokerName", required="cf"), F("brokerControllerIdsToClean"),
    F("isCleanLivingBroker", "bool", False),
)

# ---- answers to failed preconditions ------------------------------------------------------------

_APPLY_ID_REMARKS: dict[ApplyStatus, str] = {
    ApplyStatus.FIRST_ID_NOT_ONE:
        "Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {id}",
    ApplyStatus.BROKER_ID_TAKEN: "Fail to apply brokerId: {id} in broker-set: {name}",
    ApplyStatus.TOO_MANY_REPLICAS: "Fail to apply brokerId: {id} in broker-set: {name}: too many replicas",
    ApplyStatus.TOO_MANY_GROUPS: "Fail to apply brokerId: {id} in broker-set: {name}: too many broker-sets",
}

_ALTER_FAILURES: dict[ApplyStatus, tuple[int, str]] = {
    ApplyStatus.UNKNOWN_GROUP: (C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed"),
    ApplyStatus.SYNC_STATE_SET_UNCHANGED: (
        C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"),
    ApplyStatus.NOT_MASTER: (
        C.CONTROLLER_INVALID_MASTER,
        "Rejecting alter syncStateSet request because the current leader is:{{{master}}}, not {{{req_master}}}"),
    ApplyStatus.STALE_MASTER_EPOCH: (
        C.CONTROLLER_FENCED_MASTER_EPOCH,
        "Rejecting alter syncStateSet request because the current master epoch is:{{{epoch}}}, not {{{req_epoch}}}"),
    ApplyStatus.STALE_SYNC_STATE_SET_EPOCH: (
        C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{{{sss_epoch}}}, "
        "not {{{req_sss_epoch}}}"),
    ApplyStatus.UNREGISTERED_REPLICA: (
        C.CONTROLLER_INVALID_REPLICAS,
        "Rejecting alter syncStateSet request because the replicas {{{detail}}} don't exist"),
    ApplyStatus.REPLICA_NOT_ALIVE: (
        C.CONTROLLER_BROKER_NOT_ALIVE,
        "Rejecting alter syncStateSet request because the replicas {{{detail}}} don't alive"),
    ApplyStatus.MASTER_NOT_IN_SYNC_STATE_SET: (
        C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader "
        "{{{master}}}"),
}

ELECT_FAILED_REMARK = "Failed to elect a new master"
MASTER_NOT_AVAILABLE_REMARK = "Old master has down and failed to elect a new broker master"
GROUP_NOT_REGISTERED_REMARK = "Broker hasn't been registered"
EMPTY_BROKER_ID_REMARK = "Heart beat with empty brokerId"
# A two-way 904's (code, remark), by whether it had a usable brokerId.
_HEARTBEAT_ANSWERS = {
    True: (C.SUCCESS, "Heart beat success"),
    False: (C.CONTROLLER_INVALID_REQUEST, EMPTY_BROKER_ID_REMARK),
}


class ControllerProcessor:
    """Answers remoting requests against `state` (replicated) and `liveness` (node-local)."""

    def __init__(self, config: ControllerConfig, state: ControllerState, liveness: HeartbeatTable) -> None:
        self.config = config
        self.state = state
        self.liveness = liveness
        # 904 is not in the table: `handle` sends it to `handle_heartbeat` before any lookup.
        self._handlers: dict[int, Callable[[RemotingCommand, RequestContext], Outcome]] = {
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self._elect_master,
            RequestCode.CONTROLLER_REGISTER_BROKER: self._register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._get_replica_info,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self._get_metadata,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._get_sync_state_data,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self._update_config,
            RequestCode.GET_CONTROLLER_CONFIG: self._get_config,
            RequestCode.CLEAN_BROKER_DATA: self._clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self._get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self._apply_broker_id,
            RMQC_IMPORT_GROUPS: self._import_groups,
        }
        # The NameServer role: its requests on the same port, against the same replicated state.
        self.namesrv = NamesrvProcessor(state)
        self._handlers.update(self.namesrv.handlers)
        # Brokers whose next heartbeat the replica awaits (a failover's last step, rmqc events),
        # and what to call with such a heartbeat; empty between failovers: one truth test per 904.
        self.awaited_heartbeats: Mapping[BrokerKey, object] = {}
        self.on_awaited_heartbeat: Callable[[Heartbeat, int], None] = _ignore_heartbeat

    # ---- dispatch ----------------------------------------------------------------------------

    def handle(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        if request.code == _HEARTBEAT_CODE:
            return self.handle_heartbeat(request, ctx.now_ms, ctx.channel_id)
        outcome = self._dispatch(request, ctx)
        if request.is_oneway and isinstance(outcome, Reply):
            return _NO_REPLY  # spec 1.3: never answer a one-way request
        return outcome

    def handle_heartbeat(self, request: RemotingCommand, now_ms: int, channel_id: Hashable | None = None) -> Outcome:
        """`handle(request, RequestContext(now_ms, channel_id))` for a 904 (BROKER_HEARTBEAT): the
        same outcome, without building a context. A 904 needs nothing else of the context (any
        node serves it, leader or not), so a server may call this for every 904 it reads."""
        try:
            # Without extFields Java skips decoding, so brokerId stays null (2005).
            heartbeat = None if request.ext_fields is None else heartbeat_of(request)
            if heartbeat is not None:
                self.liveness.update(heartbeat, now_ms, channel_id)
                self.namesrv.heard(heartbeat.key.cluster_name, heartbeat.broker_addr, now_ms)
                if self.awaited_heartbeats and heartbeat.key in self.awaited_heartbeats:
                    self.on_awaited_heartbeat(heartbeat, now_ms)
        except (ProtocolError, BoundExceeded) as exc:  # a missing field, a full table: code 1
            return _NO_REPLY if request.flag & ONEWAY_FLAG else _reply(request, C.SYSTEM_ERROR, str(exc))
        if request.flag & ONEWAY_FLAG:
            return _NO_REPLY  # spec 1.3; the hot path: about one per broker per second per node
        return _reply(request, *_HEARTBEAT_ANSWERS[heartbeat is not None])

    def _dispatch(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        handler = self._handlers.get(request.code)
        if handler is None:
            return _reply(request, C.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")
        if request.code in _LEADER_WRITES and not _may_serve(request.code, ctx):
            return _reply(request, C.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        try:
            return handler(request, ctx)
        except (ProtocolError, BoundExceeded) as exc:
            return _reply(request, C.SYSTEM_ERROR, str(exc))

    # ---- liveness helpers --------------------------------------------------------------------

    def _is_alive(self, group: BrokerGroup, broker_id: int, now_ms: int) -> bool:
        return self.liveness.is_alive(BrokerKey(group.cluster_name, group.broker_name, broker_id), now_ms)

    def _any_replica_alive(self, group: BrokerGroup, now_ms: int) -> bool:
        return any(self._is_alive(group, broker_id, now_ms) for broker_id in group.replicas)

    def _choose(self, group: BrokerGroup, preferred: int | None, now_ms: int) -> int | None:
        def key(broker_id: int) -> BrokerKey:
            return BrokerKey(group.cluster_name, group.broker_name, broker_id)

        return choose_master(
            group,
            unclean=self.config.enable_elect_unclean_master,  # read at every election (spec 15)
            preferred=preferred,
            is_alive=lambda broker_id: self.liveness.is_alive(key(broker_id), now_ms),
            live_info=lambda broker_id: self.liveness.live_info(key(broker_id)),
        )

    def _candidates(self, group: BrokerGroup, now_ms: int) -> tuple[CandidateRow, ...]:
        """What the policy weighed: every live registered replica with its epoch, max offset and
        priority as last heard, and whether it is in the SyncStateSet (recorded in the command)."""
        rows = []
        for broker_id in sorted(group.replicas):
            key = BrokerKey(group.cluster_name, group.broker_name, broker_id)
            info = self.liveness.live_info(key)
            if info is not None and self.liveness.is_alive(key, now_ms):
                rows.append((broker_id, info.epoch, info.max_offset, info.election_priority,
                             broker_id in group.sync_state_set))
        return tuple(rows)

    def _cluster_refusal(self, request: RemotingCommand, group: BrokerGroup | None,
                         cluster_name: str | None) -> Reply | None:
        """With clusterNameCheck: the answer refusing a request that names `group` under another
        cluster (Java mixes them: brokerName alone keys a group). An empty or absent name (the
        optional field of 1002, 1011, 1012) names no cluster and passes."""
        if not (cluster_name and group is not None and self.config.cluster_name_check):
            return None
        if group.cluster_name == cluster_name:
            return None
        return Reply(_cluster_mismatch(request, group, cluster_name))

    # ---- 1005 GET_METADATA_INFO ---------------------------------------------------------------

    def _get_metadata(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        node = ctx.node or _node_from_config(self.config, ctx.is_leader)
        ext = {
            "group": node.group,
            "controllerLeaderId": node.leader_id,
            "controllerLeaderAddress": node.leader_address,
            "isLeader": ctx.is_leader,
            "peers": node.peers_text(),
        }
        return _reply(request, C.SUCCESS, ext=ext)

    # ---- 1012 GET_NEXT_BROKER_ID / 1013 APPLY_BROKER_ID ---------------------------------------

    def _get_next_broker_id(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = NEXT_BROKER_ID.decode(request)
        group = self.state.group(h["brokerName"])
        if (refusal := self._cluster_refusal(request, group, h["clusterName"])) is not None:
            return refusal
        next_id = 1 if group is None else group.next_broker_id
        ext = {"clusterName": h["clusterName"], "brokerName": h["brokerName"], "nextBrokerId": next_id}
        return _reply(request, C.SUCCESS, ext=ext)

    def _apply_broker_id(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = APPLY_BROKER_ID.decode(request)
        name, broker_id, check_code = h["brokerName"], h["appliedBrokerId"], h["registerCheckCode"]
        ext = {"clusterName": h["clusterName"], "brokerName": name}
        group = self.state.group(name)
        if (refusal := self._cluster_refusal(request, group, h["clusterName"])) is not None:
            return refusal
        status = check_apply_broker_id(group, broker_id, check_code)
        if status is not _OK:
            return Reply(_apply_id_answer(request, status, ext, broker_id))
        if group is not None and group.is_registered(broker_id):
            return _reply(request, _SUCCESS, ext=ext)  # idempotent retry (same check code)
        address = check_code.split(";", 1)[0]  # spec 3.4: the address is before the first ';'
        command = ApplyBrokerId(h["clusterName"], name, broker_id, address, check_code, ctx.stamp_ms,
                                ctx.origin, self.config.cluster_name_check)
        # a partial, not a closure: the hottest write keeps two objects alive while it waits, not
        # a function and a cell per name (the cyclic collector's young generation fills slower)
        return Propose([command], partial(_apply_id_finish, request, ext, broker_id))

    # ---- 1003 REGISTER_BROKER -----------------------------------------------------------------

    def _register_broker(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = REGISTER_BROKER.decode(request)
        name, broker_id, address = h["brokerName"], h["brokerId"], h["brokerAddress"]
        ext = {"clusterName": h["clusterName"], "brokerName": name}
        group = self.state.group(name)
        refusal = _register_refusal(group, name, broker_id)
        if refusal is not None:
            return _reply(request, C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, refusal, ext)
        assert group is not None
        if (mismatch := self._cluster_refusal(request, group, h["clusterName"])) is not None:
            return mismatch
        if group.address_of(broker_id) == address:
            return Reply(self._register_answer(request, group, ext, ctx.now_ms))
        command = UpdateBrokerAddress(h["clusterName"], name, broker_id, address, ctx.stamp_ms, origin=ctx.origin)

        def finish(results: list[ApplyResult]) -> RemotingCommand:
            after = results[0].after
            refusal = _register_refusal(after, name, broker_id)
            if refusal is not None:
                return make_response(request, C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, refusal, ext)
            assert after is not None  # no refusal: the group exists
            return self._register_answer(request, after, ext, ctx.now_ms)

        return Propose([command], finish)

    def _register_answer(self, request: RemotingCommand, group: BrokerGroup, ext: dict[str, object],
                         now_ms: int) -> RemotingCommand:
        ext = dict(ext)
        master = group.master_id
        if master is not None and self._is_alive(group, master, now_ms):  # spec 3.5: only a live master
            ext.update(masterBrokerId=master, masterAddress=group.master_address,
                       masterEpoch=group.master_epoch, syncStateSetEpoch=group.sync_state_set_epoch)
        return make_response(request, C.SUCCESS, ext=ext, body=_bodies.sync_state_set_body(group))

    # ---- 1004 GET_REPLICA_INFO ----------------------------------------------------------------

    def _get_replica_info(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = REPLICA_INFO.decode(request)
        group = self.state.group(h["brokerName"])
        if group is None:
            return _reply(request, C.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        ext = {"masterBrokerId": group.master_id, "masterAddress": group.master_address,
               "masterEpoch": group.master_epoch}  # masterEpoch always present (brokers unbox it)
        return _reply(request, C.SUCCESS, ext=ext, body=_bodies.sync_state_set_body(group))

    # ---- 1006 GET_SYNC_STATE_DATA -------------------------------------------------------------

    def _get_sync_state_data(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        names = loads_fastjson(request.body) if request.body else []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequestBody("1006 body must be a JSON array of broker names")
        if not names:  # Java quirk (spec 13 item 10): no body, or an empty list, is a default answer
            return _reply(request, C.SYSTEM_ERROR, "not set any response code")
        groups = [g for g in (self.state.group(n) for n in dict.fromkeys(names)) if g is not None]
        body = _bodies.replicas_info_body(groups, lambda g, i: self._is_alive(g, i, ctx.now_ms))
        return _reply(request, C.SUCCESS, body=body)

    # ---- 1002 ELECT_MASTER --------------------------------------------------------------------

    def _elect_master(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = ELECT_MASTER.decode(request)
        group = self.state.group(h["brokerName"])
        if group is None:
            return _reply(request, C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, GROUP_NOT_REGISTERED_REMARK)
        if (refusal := self._cluster_refusal(request, group, h["clusterName"])) is not None:
            return refusal
        requester = None if h["brokerId"] == -1 else h["brokerId"]
        trigger = _trigger_of(h["designateElect"], requester)
        if group.master_epoch == 0 and requester is not None:
            candidate = requester  # spec 3.7 step 2: the first election takes the requester as is
            if not group.is_registered(candidate):
                remark = f"BrokerId: {candidate} hasn't been registered in broker-set: {group.broker_name}"
                return _reply(request, C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark)
        else:
            preferred = requester if trigger is Trigger.ADMIN else None
            candidate = self._choose(group, preferred, ctx.now_ms)
        if candidate is not None and candidate == group.master_id:
            return Reply(_master_still_exists(request, group))
        if candidate is None and trigger is not Trigger.CONTROLLER:
            return _reply(request, C.CONTROLLER_ELECT_MASTER_FAILED, ELECT_FAILED_REMARK)
        if candidate is None and group.master_epoch == 0:
            # Java would bump masterEpoch of a never-elected group here, after which the first
            # broker can no longer take it (spec 3.7 step 2 needs epoch 0): answer without a change.
            return _reply(request, C.CONTROLLER_MASTER_NOT_AVAILABLE, MASTER_NOT_AVAILABLE_REMARK)
        command = self._election_command(group, trigger, candidate, ctx.stamp_ms, requester=requester,
                                         origin=ctx.origin, reason=_REQUEST_REASONS[trigger],
                                         candidates=self._candidates(group, ctx.now_ms))
        return Propose([command], lambda results: _elect_answer(request, results[0]))

    def _election_command(self, group: BrokerGroup, trigger: Trigger, candidate: int | None, wall_ms: int,
                          *, requester: int | None = None, liveness_lost_ms: int | None = None,
                          master_last_alive_ms: int | None = None, attempt: int = 1,
                          origin: Origin | None = None, reason: ElectionReason | None = None,
                          deadline_missed_by_ms: int | None = None,
                          candidates: tuple[CandidateRow, ...] = ()) -> ElectMaster:
        return ElectMaster(
            cluster_name=group.cluster_name, broker_name=group.broker_name, trigger=trigger,
            candidate=candidate, expected_master_epoch=group.master_epoch,
            expected_sync_state_set_epoch=group.sync_state_set_epoch, leader_ts_ms=wall_ms,
            requester_id=requester, unclean=self.config.enable_elect_unclean_master,
            liveness_lost_ms=liveness_lost_ms, master_last_alive_ms=master_last_alive_ms, attempt=attempt,
            origin=origin, reason=reason, deadline_missed_by_ms=deadline_missed_by_ms, candidates=candidates,
        )

    # ---- 1001 ALTER_SYNC_STATE_SET ------------------------------------------------------------

    def _alter_sync_state_set(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = ALTER_SYNC_STATE_SET.decode(request)
        new_set, body_epoch = _parse_sync_state_set_body(request.body)
        name, master, epoch = h["brokerName"], h["masterBrokerId"], h["masterEpoch"]
        group = self.state.group(name)
        alive = None if group is None else (lambda i: self._is_alive(group, i, ctx.now_ms))
        status, detail = check_alter_sync_state_set(group, master, epoch, body_epoch, new_set, alive)
        facts = {"req_master": master, "req_epoch": epoch, "req_sss_epoch": body_epoch}
        if status is not ApplyStatus.OK:
            return Reply(_alter_failure(request, status, group, detail, facts))
        command = AlterSyncStateSet(name, master, epoch, body_epoch, tuple(sorted(new_set)), ctx.stamp_ms,
                                    origin=ctx.origin)

        def finish(results: list[ApplyResult]) -> RemotingCommand:
            result = results[0]
            if not result.ok:
                return _alter_failure(request, result.status, result.after, result.detail, facts)
            assert result.after is not None  # an applied 1001 leaves its group in place
            ext = {"newSyncStateSetEpoch": result.after.sync_state_set_epoch}
            return make_response(request, C.SUCCESS, ext=ext, body=_bodies.sync_state_set_body(result.after))

        return Propose([command], finish)

    # ---- 1011 CLEAN_BROKER_DATA ---------------------------------------------------------------

    def _clean_broker_data(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        h = CLEAN_BROKER_DATA.decode(request)
        name = h["brokerName"]
        group = self.state.group(name)
        if (refusal := self._cluster_refusal(request, group, h["clusterName"])) is not None:
            return refusal
        ids = None
        if not h["isCleanLivingBroker"]:  # Java quirk: with -l the id list is ignored
            ids_or_refusal = self._ids_to_clean(h, group, ctx.now_ms)
            if isinstance(ids_or_refusal, str):
                return _reply(request, C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, ids_or_refusal)
            ids = ids_or_refusal
        if group is None:
            return _reply(request, C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, _not_existed(name))
        command = CleanBrokerData(h["clusterName"], name, ids, ctx.stamp_ms, origin=ctx.origin)

        def finish(results: list[ApplyResult]) -> RemotingCommand:
            if results[0].ok:
                return make_response(request, C.SUCCESS)
            return make_response(request, C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, _not_existed(name))

        return Propose([command], finish)

    def _ids_to_clean(self, h: DecodedHeader, group: BrokerGroup | None, now_ms: int) -> tuple[int, ...] | str | None:
        """The ids to clean (None = whole group), or the 2009 remark refusing the request."""
        name, text = h["brokerName"], (h["brokerControllerIdsToClean"] or "").strip()
        if not text:
            if group is not None and group.master_id is not None:
                return f"Broker {name} is still alive, clean up failure"
            return None
        parts = text.split(";")
        while parts and parts[-1] == "":  # Java String.split drops trailing empty strings
            parts.pop()
        bad = next((p for p in parts if not _is_java_long(p)), None)
        if bad is not None:
            return ("Please set the option <brokerControllerIdsToClean> according to the format, "
                    f'exception: java.lang.NumberFormatException: For input string: "{bad}"')
        ids = tuple(sorted({int(p) for p in parts}))
        cluster = group.cluster_name if group is not None else (h["clusterName"] or "")
        for broker_id in ids:
            if self.liveness.is_alive(BrokerKey(cluster, name, broker_id), now_ms):
                return f"Broker [{name},  {broker_id}] is still alive, clean up failure"
        return ids

    # ---- 1009 / 1010 configuration -----------------------------------------------------------

    def _update_config(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        if not request.body:
            return _reply(request, C.SUCCESS)
        try:  # checked before anything enters the log; applied on every node once committed
            properties = self.config.check_update(request.body)
        except ConfigBlackListed:
            return _reply(request, C.NO_PERMISSION, "Can not update config in black list.")
        except PropertiesSyntaxError:
            return _reply(request, C.SYSTEM_ERROR, "string2Properties error")
        except ConfigInvalid as exc:  # an unknown key or a value of the wrong type: nothing changed
            return _reply(request, C.INVALID_PARAMETER, str(exc))
        if not properties:
            return _reply(request, C.SUCCESS)  # nothing to change (a body of comments only)
        command = UpdateControllerConfig(tuple(sorted(properties.items())), ctx.stamp_ms, origin=ctx.origin)
        return Propose([command], lambda results: make_response(request, C.SUCCESS))

    def config_applied(self, results: list[ApplyResult]) -> None:
        """After an entry is applied on this node (leader or follower): a committed 1009 changes
        this node's configuration."""
        for result in results:
            if isinstance(result.command, UpdateControllerConfig):
                self.config.apply_replicated(dict(result.command.properties))

    def config_restored(self) -> None:
        """After the state was restored from a snapshot: the options applied 1009s set."""
        self.config.apply_replicated(self.state.config_updates())

    def _get_config(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        return _reply(request, C.SUCCESS, body=self.config.to_properties())

    # ---- RMQC_IMPORT_GROUPS (rmqc migrate from-java) -------------------------------------------

    def _import_groups(self, request: RemotingCommand, ctx: RequestContext) -> Outcome:
        source, rows = _import_body(request.body)
        command = ImportGroups(source, rows, ctx.stamp_ms, origin=ctx.origin)
        status, remark = check_import_groups(self.state, command)  # checked again at apply
        if status is not _OK:
            return _reply(request, _IMPORT_REFUSALS[status], remark)
        if remark is not None:  # these very groups are here already: a re-run writes nothing
            return _reply(request, C.SUCCESS, remark, body=_import_answer(command, unchanged=True))
        return Propose([command], partial(_import_finish, request))

    # ---- controller-triggered elections (spec 5.2) -------------------------------------------

    def masters_among(self, keys: list[BrokerKey]) -> int:
        """How many of `keys` are the current master of their group."""
        return sum(1 for key in keys if (group := self.state.group(key.broker_name)) is not None
                   and group.master_id == key.broker_id)

    def elections_due(self, now_ms: int, inactive: list[BrokerKey], wall_ms: int | None = None, *,
                      wait_if_replicas_silent: bool = False,
                      reason: ElectionReason = ElectionReason.HEARTBEAT_MISSED) -> list[Command]:
        """Elections for every group whose master is among `inactive` (expired or disconnected),
        one command per group, to be proposed together in one entry. `now_ms` is the liveness
        clock, `wall_ms` (default: `now_ms`) the stamp of the commands. With
        `wait_if_replicas_silent` (the node's mass-expiry guard), a group none of whose replicas is
        alive is left to `inactive_master_scan`, which elects once one is heard again. `reason`:
        how they were found inactive (deadline passed, or connection closed)."""
        wall_ms = now_ms if wall_ms is None else wall_ms
        if self.config.elect_master_max_retry_count <= 0:
            return []  # spec 15: 0 = the controller makes no election attempt of its own
        commands: list[Command] = []
        seen: set[str] = set()
        for key in inactive:
            group = self.state.group(key.broker_name)
            if group is None or group.master_id != key.broker_id or key.broker_name in seen:
                continue
            seen.add(key.broker_name)
            if wait_if_replicas_silent and not self._any_replica_alive(group, now_ms):
                continue
            command = self._first_controller_election(group, now_ms, wall_ms, reason)
            if command is not None:
                commands.append(command)
        return commands

    def inactive_master_scan(self, now_ms: int, wall_ms: int | None = None) -> list[Command]:
        """Spec 5.2 safety net (Java's scanInactiveMasterInterval): groups whose master is not
        live while some replica is, e.g. because the inactive event fired before this node led."""
        if self.config.elect_master_max_retry_count <= 0:
            return []
        wall_ms = now_ms if wall_ms is None else wall_ms
        commands: list[Command] = []
        for group in self.state.groups():
            if group.master_id is None or self._is_alive(group, group.master_id, now_ms):
                continue
            if self._any_replica_alive(group, now_ms):
                command = self._first_controller_election(group, now_ms, wall_ms, ElectionReason.INACTIVE_MASTER_SCAN)
                if command is not None:
                    commands.append(command)
        return commands

    def election_retries(self, results: list[ApplyResult], now_ms: int, wall_ms: int | None = None) -> list[Command]:
        """Java retries a controller election that found no candidate, up to
        electMasterMaxRetryCount attempts in all (each attempt bumps masterEpoch: a kept quirk)."""
        wall_ms = now_ms if wall_ms is None else wall_ms
        commands: list[Command] = []
        for result in results:
            command = result.command
            if not (isinstance(command, ElectMaster) and command.trigger is Trigger.CONTROLLER
                    and result.ok and command.candidate is None and result.after is not None):
                continue
            if command.attempt >= self.config.elect_master_max_retry_count:
                continue
            detection = Detection(command.liveness_lost_ms, command.master_last_alive_ms, command.reason,
                                  command.deadline_missed_by_ms)
            retry = self._controller_election(result.after, now_ms, wall_ms, detection, command.attempt + 1)
            if retry is not None:
                commands.append(retry)
        return commands

    def _first_controller_election(self, group: BrokerGroup, now_ms: int, wall_ms: int,
                                   reason: ElectionReason) -> ElectMaster | None:
        # The failover is dated from when the master was last known alive (its last heartbeat or
        # its connection's close), not from when this node noticed: that can be a timeout later.
        # The liveness table keeps monotonic times, the command wall-clock stamps: the same
        # distance before this moment.
        assert group.master_id is not None
        master = BrokerKey(group.cluster_name, group.broker_name, group.master_id)
        last_alive = self.liveness.last_alive_ms(master)
        missed_deadline = self.liveness.missed_deadline_ms(master)
        if self.namesrv.unregistered_lately(master, now_ms):
            reason = ElectionReason.SHUT_DOWN  # however its loss was seen, it said it was stopping
        detection = Detection(
            liveness_lost_ms=wall_ms,
            master_last_alive_ms=None if last_alive is None else wall_ms - (now_ms - last_alive),
            reason=reason,
            deadline_missed_by_ms=None if missed_deadline is None else max(0, now_ms - missed_deadline),
        )
        return self._controller_election(group, now_ms, wall_ms, detection, 1)

    def _controller_election(self, group: BrokerGroup, now_ms: int, wall_ms: int, detection: Detection,
                             attempt: int) -> ElectMaster | None:
        """The attempt-th election of a failover, which carries how the failover was detected."""
        candidate = self._choose(group, None, now_ms)
        if candidate is not None and candidate == group.master_id:
            return None  # the master is live again: nothing to do (Java: 2011)
        return self._election_command(group, Trigger.CONTROLLER, candidate, wall_ms,
                                      liveness_lost_ms=detection.liveness_lost_ms,
                                      master_last_alive_ms=detection.master_last_alive_ms, attempt=attempt,
                                      origin=Origin(None, None, self.config.self_id), reason=detection.reason,
                                      deadline_missed_by_ms=detection.deadline_missed_by_ms,
                                      candidates=self._candidates(group, now_ms))

    # ---- 1008 NOTIFY_BROKER_ROLE_CHANGED (spec 5.4) -------------------------------------------

    def notifications_for(self, result: ApplyResult, now_ms: int | None = None) -> list[tuple[str, RemotingCommand]]:
        """After a successful election: a one-way 1008 to every live registered replica, and to
        the deposed master even when it is not live (Java's controller skips it).

        A master deposed while still running (hung past its heartbeat timeout, or cut off from the
        controllers only) keeps its clients: resumed, it finds its slaves gone, shrinks its own
        SyncStateSet to itself and acknowledges sends alone until its next metadata poll tells it
        of the new master; those sends are lost when it rejoins as a slave. A 1008 dialled to it
        at once reaches it as soon as it can read (a stopped process's kernel still accepts the
        connection), so it steps down before it acknowledges anything. Best effort, like every 1008:
        a dead master's port refuses it.

        Without `now_ms`, a replica counts as live while the table holds it (expiry removes
        brokers at their deadline, so this differs only between a deadline and the next expire).
        """
        command = result.command
        if not (isinstance(command, ElectMaster) and result.ok and command.candidate is not None):
            return []
        if not self.config.notify_broker_role_changed or result.after is None:  # read each time
            return []
        group = result.after
        ext = {"masterAddress": group.master_address, "masterEpoch": group.master_epoch,
               "syncStateSetEpoch": group.sync_state_set_epoch, "masterBrokerId": group.master_id}
        body = _bodies.sync_state_set_body(group)
        deposed = result.before.master_id if result.before is not None else None
        return [
            (replica.address, make_request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, 0, ext, body, oneway=True))
            for broker_id, replica in sorted(group.replicas.items())
            if broker_id == deposed or self._is_alive_or_known(group, broker_id, now_ms)
        ]

    def _is_alive_or_known(self, group: BrokerGroup, broker_id: int, now_ms: int | None) -> bool:
        if now_ms is not None:
            return self._is_alive(group, broker_id, now_ms)
        key = BrokerKey(group.cluster_name, group.broker_name, broker_id)
        return self.liveness.live_info(key) is not None


# ---- small pure helpers ---------------------------------------------------------------------------


def _ignore_heartbeat(_heartbeat: Heartbeat, _now_ms: int) -> None:
    pass


def _reply(request: RemotingCommand, code: int, remark: str | None = None, ext: Mapping[str, object] | None = None,
           body: bytes | None = None) -> Reply:
    return Reply(make_response(request, code, remark, ext, body))


def _may_serve(code: int, ctx: RequestContext) -> bool:
    if ctx.is_leader and ctx.leader_ready:
        return True
    return ctx.read_allowed and code in READ_REQUESTS


def _node_from_config(config: ControllerConfig, is_leader: bool) -> NodeInfo:
    peers = []
    for entry in str(config.get("controllerDLegerPeers")).split(";"):
        node_id, sep, address = entry.strip().partition("-")
        if sep:
            peers.append((node_id, address))
    self_id = config.self_id
    addresses = dict(peers)
    leader = self_id if is_leader else None
    return NodeInfo(config.controller_group, self_id, leader, addresses.get(leader) if leader else None,
                    tuple(peers))


class Detection(NamedTuple):
    """How a failover's master was found dead; its first election and every retry carry it."""

    liveness_lost_ms: int | None  # when the leader found it (wall clock)
    master_last_alive_ms: int | None  # its last heartbeat or its connection's close (wall clock)
    reason: ElectionReason | None
    deadline_missed_by_ms: int | None


# The reason of an election a 1002 asked for (a 1002 naming no broker and no designation: a client's).
_REQUEST_REASONS: dict[Trigger, ElectionReason] = {
    Trigger.ADMIN: ElectionReason.ADMIN,
    Trigger.BROKER: ElectionReason.BROKER,
    Trigger.CONTROLLER: ElectionReason.REQUEST,
}


def _trigger_of(designate: bool, requester: int | None) -> Trigger:
    if designate:
        return Trigger.ADMIN
    return Trigger.CONTROLLER if requester is None else Trigger.BROKER


def _register_refusal(group: BrokerGroup | None, name: str, broker_id: int) -> str | None:
    if group is None:
        return f"Broker-set: {name} hasn't been registered in controller"
    if not group.is_registered(broker_id):
        return f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}"
    return None


def _cluster_mismatch(request: RemotingCommand, group: BrokerGroup | None, cluster_name: str) -> RemotingCommand:
    registered = group.cluster_name if group is not None else "?"
    name = group.broker_name if group is not None else "?"
    remark = (f"Broker-set: {name} is registered in cluster {registered}, not in cluster {cluster_name}: "
              "two clusters may not share a brokerName (clusterNameCheck)")
    return make_response(request, C.CONTROLLER_INVALID_REQUEST, remark)


def _apply_id_finish(request: RemotingCommand, ext: dict[str, object], broker_id: int,
                     results: list[ApplyResult]) -> RemotingCommand:
    """The answer to a proposed 1013 once applied (`ext`: the request's clusterName and brokerName)."""
    if results[0].status is _CLUSTER_MISMATCH:  # another cluster created it meanwhile
        return _cluster_mismatch(request, results[0].before, str(ext["clusterName"]))
    return _apply_id_answer(request, results[0].status, ext, broker_id)


def _apply_id_answer(request: RemotingCommand, status: ApplyStatus, ext: dict[str, object],
                     broker_id: int) -> RemotingCommand:
    if status is _OK:
        return make_response(request, _SUCCESS, ext=ext)
    remark = _APPLY_ID_REMARKS[status].format(name=ext["brokerName"], id=broker_id)
    return make_response(request, C.CONTROLLER_BROKER_ID_INVALID, remark, ext)


def _master_still_exists(request: RemotingCommand, group: BrokerGroup) -> RemotingCommand:
    ext = {"masterBrokerId": group.master_id, "masterAddress": group.master_address,
           "masterEpoch": group.master_epoch, "syncStateSetEpoch": group.sync_state_set_epoch}
    return make_response(request, C.CONTROLLER_MASTER_STILL_EXIST, None, ext,
                         _bodies.master_still_exists_body(group))


def _elect_answer(request: RemotingCommand, result: ApplyResult) -> RemotingCommand:
    group, command = result.after, result.command
    assert isinstance(command, ElectMaster), "the answer to a 1002 proposal"
    if result.ok and group is not None and command.candidate is not None:
        ext = {"masterBrokerId": group.master_id, "masterAddress": group.master_address,
               "masterEpoch": group.master_epoch, "syncStateSetEpoch": group.sync_state_set_epoch}
        return make_response(request, C.SUCCESS, None, ext, _bodies.elect_master_body(group))
    if result.ok:
        return make_response(request, C.CONTROLLER_MASTER_NOT_AVAILABLE, MASTER_NOT_AVAILABLE_REMARK)
    if group is None:
        return make_response(request, C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, GROUP_NOT_REGISTERED_REMARK)
    if group.master_id is not None:
        return _master_still_exists(request, group)  # lost a race: report the winner
    return make_response(request, C.CONTROLLER_ELECT_MASTER_FAILED, ELECT_FAILED_REMARK)


_IMPORT_REFUSALS: dict[ApplyStatus, int] = {
    ApplyStatus.INVALID_IMPORT: C.INVALID_PARAMETER,
    ApplyStatus.TOO_MANY_GROUPS: C.INVALID_PARAMETER,
    ApplyStatus.NOT_EMPTY: C.CONTROLLER_INVALID_REQUEST,
}


def _import_body(body: bytes | None) -> tuple[str, tuple[GroupRow, ...]]:
    """The (source, rows) of a RMQC_IMPORT_GROUPS body; BadRequestBody naming what was wrong."""
    document = loads_fastjson(body) if body else None
    if not (isinstance(document, dict) and isinstance(document.get("source"), str)):
        raise BadRequestBody('the import body must be {"source": text, "groups": [group rows]}')
    try:
        return document["source"], group_rows(document.get("groups"))
    except TypeError as exc:
        raise BadRequestBody(f"the import body's groups: {exc}") from None


def _import_answer(command: ImportGroups, *, unchanged: bool) -> bytes:
    return orjson.dumps({"groups": len(command.groups), "unchanged": unchanged})


def _import_finish(request: RemotingCommand, results: list[ApplyResult]) -> RemotingCommand:
    result = results[0]
    assert isinstance(result.command, ImportGroups), "the answer to an import proposal"
    if not result.ok:  # another import (or a broker) got there first
        return make_response(request, _IMPORT_REFUSALS[result.status], result.remark)
    return make_response(request, C.SUCCESS, result.remark,
                         body=_import_answer(result.command, unchanged=result.remark is not None))


def _alter_failure(request: RemotingCommand, status: ApplyStatus, group: BrokerGroup | None,
                   detail: int | None, facts: dict[str, object]) -> RemotingCommand:
    code, template = _ALTER_FAILURES[status]
    remark = template.format(
        master=group.master_id if group else None, epoch=group.master_epoch if group else None,
        sss_epoch=group.sync_state_set_epoch if group else None, detail=detail, **facts,
    )
    return make_response(request, code, remark, {"newSyncStateSetEpoch": 0})


def _parse_sync_state_set_body(body: bytes | None) -> tuple[frozenset[int], int]:
    if not body:
        raise BadRequestBody("1001 needs a SyncStateSet body")
    document = loads_fastjson(body)
    ids = document.get("syncStateSet") if isinstance(document, dict) else None
    epoch = document.get("syncStateSetEpoch") if isinstance(document, dict) else None
    if not isinstance(ids, list) or not all(type(i) is int for i in ids) or type(epoch) is not int:
        raise BadRequestBody("1001 body must be {\"syncStateSet\":[ids],\"syncStateSetEpoch\":n}")
    return frozenset(ids), epoch


def _is_java_long(text: str) -> bool:
    return bool(_JAVA_LONG.fullmatch(text)) and -(2**63) <= int(text) < 2**63


def _not_existed(name: str) -> str:
    return f"Broker {name} is not existed,clean broker data failure."
