"""`ControllerState`: all broker groups, changed only by `apply(command)` (pure, deterministic).

The check functions (`check_apply_broker_id`, `check_alter_sync_state_set`, ...) are the single
place where each precondition is written: the leader runs them before proposing (to answer at once
without a log entry when a request cannot succeed) and apply runs them again on every replica
(because between deciding and committing another command for the same group may have won).
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any

import orjson

from rmqc._gc import collector_paused
from rmqc._hot import hot_record

from ._chunks import (
    CONFIG,
    DOCUMENT_VERSION,
    GROUPS,
    KV_ENTRIES,
    KV_NAMESPACE,
    REGISTRATIONS,
    SNAPSHOT_STEP_ITEMS,
    TOPICS,
    ChunkWriter,
    batches,
    read_index,
    topic_weight,
    walk,
    where,
)
from ._commands import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    Command,
    DeleteKvConfig,
    DeleteTopicRoute,
    ElectMaster,
    GroupRow,
    ImportGroups,
    NotificationSent,
    PutKvConfig,
    RecordOperation,
    RegisterBrokerRoute,
    RegisterTopicRoute,
    SetWritePermOfBroker,
    UnregisterBrokerRoute,
    UpdateBrokerAddress,
    UpdateControllerConfig,
)
from ._errors import CommandDecodeError
from ._model import BrokerGroup, Replica, evolve, restored_group, restored_replica
from ._namesrv import NamesrvCapture, NamesrvRefused, NamesrvState

# Why these bounds: they are far above a real fleet (the target is 10,000 groups of 3) but keep a
# misbehaving client from growing the replicated state, and every snapshot, without limit. They
# are constants, not options, because apply must decide identically on every replica.
MAX_GROUPS = 1_000_000
MAX_REPLICAS_PER_GROUP = 1024

SNAPSHOT_FORMAT_VERSION = DOCUMENT_VERSION  # the document's; the chunked layout is fsm._chunks

# How many records one step of the decode builds: building a record costs about three times what
# encoding it does (restored groups, queue data, the indexes), so a step builds fewer than a piece
# holds; a piece is parsed in a step of its own (one orjson call of at most SNAPSHOT_STEP_ITEMS
# records). About 10 ms a step on a loaded machine.
DECODE_STEP_ITEMS = 1_024


class ApplyStatus(StrEnum):
    """The outcome of applying one command: `ok`, or which precondition did not hold."""

    OK = "ok"
    UNKNOWN_GROUP = "unknown_group"
    UNKNOWN_BROKER = "unknown_broker"
    FIRST_ID_NOT_ONE = "first_id_not_one"
    BROKER_ID_TAKEN = "broker_id_taken"
    STALE_MASTER_EPOCH = "stale_master_epoch"
    STALE_SYNC_STATE_SET_EPOCH = "stale_sync_state_set_epoch"
    NOT_MASTER = "not_master"
    SYNC_STATE_SET_UNCHANGED = "sync_state_set_unchanged"
    UNREGISTERED_REPLICA = "unregistered_replica"
    REPLICA_NOT_ALIVE = "replica_not_alive"  # leader pre-check only (liveness is not replicated)
    MASTER_NOT_IN_SYNC_STATE_SET = "master_not_in_sync_state_set"
    UNKNOWN_CANDIDATE = "unknown_candidate"
    TOO_MANY_GROUPS = "too_many_groups"
    TOO_MANY_REPLICAS = "too_many_replicas"
    CLUSTER_MISMATCH = "cluster_mismatch"  # the group is registered under another cluster name
    # the NameServer role (fsm._namesrv): refusals by bound or rule, and deletes of what is absent
    TOO_MANY_TOPICS = "too_many_topics"
    TOO_MANY_REGISTRATIONS = "too_many_registrations"
    STALE_REGISTRATION = "stale_registration"
    TOO_MANY_KV_ENTRIES = "too_many_kv_entries"
    KV_TOO_LARGE = "kv_too_large"
    NAME_TOO_LONG = "name_too_long"
    NOT_FOUND = "not_found"
    # rmqc migrate from-java (ImportGroups): the rows contradict themselves, or the cluster already
    # holds other broker groups (an import never overwrites)
    INVALID_IMPORT = "invalid_import"
    NOT_EMPTY = "not_empty"


# Apply compares with OK several times per command: a module constant reads in a third of the
# time of an enum member (ApplyStatus.OK goes through the enum's metaclass).
_OK = ApplyStatus.OK


@hot_record
class ApplyResult:
    """What applying `command` did: the group before and after (same object when unchanged)."""

    command: Command
    status: ApplyStatus
    before: BrokerGroup | None
    after: BrokerGroup | None
    detail: int | None = None  # the offending broker id, for remarks (2003, 2006)
    remark: str | None = None  # why a NameServer command was refused, in words

    @property
    def ok(self) -> bool:
        return self.status is _OK


# ---- preconditions (shared by the leader's pre-check and apply) -------------------------------


def check_apply_broker_id(group: BrokerGroup | None, broker_id: int, check_code: str,
                          cluster_name: str | None = None) -> ApplyStatus:
    """Spec 3.4: a new group must start with id 1; a used id only with the same check code. With
    `cluster_name`, an existing group must be registered under it (Java does not check)."""
    if group is None:
        return _OK if broker_id == 1 else ApplyStatus.FIRST_ID_NOT_ONE
    if cluster_name is not None and group.cluster_name != cluster_name:
        return ApplyStatus.CLUSTER_MISMATCH
    existing = group.replicas.get(broker_id)
    if existing is None:
        full = len(group.replicas) >= MAX_REPLICAS_PER_GROUP
        return ApplyStatus.TOO_MANY_REPLICAS if full else _OK
    same = existing.register_check_code == check_code
    return _OK if same else ApplyStatus.BROKER_ID_TAKEN


def check_alter_sync_state_set(
    group: BrokerGroup | None,
    master_id: int,
    master_epoch: int,
    sync_state_set_epoch: int,
    new_set: frozenset[int],
    is_alive: Callable[[int], bool] | None = None,
) -> tuple[ApplyStatus, int | None]:
    """Spec 3.8 checks in Java's order; `is_alive` is given on the leader only.

    rmqc checks registration of every proposed id before liveness of any (spec 15), so a set
    naming both an unregistered and a dead id always gets 2003.
    """
    if group is None:
        return ApplyStatus.UNKNOWN_GROUP, None
    if new_set == group.sync_state_set:
        return ApplyStatus.SYNC_STATE_SET_UNCHANGED, None
    if group.master_id is None or group.master_id != master_id:
        return ApplyStatus.NOT_MASTER, None
    if master_epoch != group.master_epoch:
        return ApplyStatus.STALE_MASTER_EPOCH, None
    if sync_state_set_epoch != group.sync_state_set_epoch:
        return ApplyStatus.STALE_SYNC_STATE_SET_EPOCH, None
    for broker_id in sorted(new_set):
        if not group.is_registered(broker_id):
            return ApplyStatus.UNREGISTERED_REPLICA, broker_id
    if is_alive is not None:
        for broker_id in sorted(new_set):
            if not is_alive(broker_id):
                return ApplyStatus.REPLICA_NOT_ALIVE, broker_id
    if group.master_id not in new_set:
        return ApplyStatus.MASTER_NOT_IN_SYNC_STATE_SET, None
    return _OK, None


def check_elect_master(group: BrokerGroup | None, command: ElectMaster) -> ApplyStatus:
    if group is None:
        return ApplyStatus.UNKNOWN_GROUP
    if group.master_epoch != command.expected_master_epoch:
        return ApplyStatus.STALE_MASTER_EPOCH
    if group.sync_state_set_epoch != command.expected_sync_state_set_epoch:
        return ApplyStatus.STALE_SYNC_STATE_SET_EPOCH
    if command.candidate is not None and not group.is_registered(command.candidate):
        return ApplyStatus.UNKNOWN_CANDIDATE
    return _OK


def check_import_groups(state: ControllerState, command: ImportGroups) -> tuple[ApplyStatus, str | None]:
    """Whether `command` may be applied to `state`: (OK, None), (OK, "unchanged") when the state
    holds exactly these groups already, or the refusal and why in words."""
    if len(command.groups) > MAX_GROUPS:
        return ApplyStatus.TOO_MANY_GROUPS, f"{len(command.groups)} groups exceed the bound of {MAX_GROUPS}"
    names = [row[1] for row in command.groups]
    if len(set(names)) != len(names):
        return ApplyStatus.INVALID_IMPORT, "a broker name appears twice"
    for row in command.groups:
        problem = _import_row_problem(row)
        if problem is not None:
            return ApplyStatus.INVALID_IMPORT, f"broker group {row[1]}: {problem}"
    if not len(state):
        return _OK, None
    if sorted(g.broker_name for g in state.groups()) == sorted(names) and all(state.group(row[1]) == group_of_row(row)
                                                       for row in command.groups):
        return _OK, "unchanged"
    return ApplyStatus.NOT_EMPTY, (f"this cluster already holds {len(state)} broker group(s) that differ from the "
                                   "import: an import only fills an empty cluster")


def _import_row_problem(row: GroupRow) -> str | None:
    """What makes one imported group impossible (the rules every group rmqc builds itself keeps)."""
    _cluster, _name, next_id, replicas, master, master_epoch, sync_state_set, sync_state_set_epoch = row
    ids = [replica[0] for replica in replicas]
    if not ids:
        return "no broker ids"
    if len(ids) > MAX_REPLICAS_PER_GROUP:
        return f"{len(ids)} replicas exceed the bound of {MAX_REPLICAS_PER_GROUP}"
    if len(set(ids)) != len(ids) or min(ids) < 1:
        return f"broker ids {sorted(ids)} are not distinct positive ids"
    if next_id <= max(ids):
        return f"nextBrokerId {next_id} would hand out an id already taken"
    if master_epoch < 0 or sync_state_set_epoch < 0:
        return "a negative epoch"
    if master is not None and (master not in ids or master_epoch == 0):
        return f"master {master} is not a registered id with a masterEpoch"
    if not set(sync_state_set) <= set(ids):
        return f"SyncStateSet {list(sync_state_set)} names an id that is not registered"
    if master is not None and master not in sync_state_set:
        return f"master {master} is not in its SyncStateSet {list(sync_state_set)}"
    return None


def group_of_row(row: GroupRow) -> BrokerGroup:
    """The group an imported row describes."""
    cluster, name, next_id, replicas, master, master_epoch, sync_state_set, sync_state_set_epoch = row
    return BrokerGroup(cluster, name, next_id, {i: Replica(address, code) for i, address, code in replicas},
                       master, master_epoch, frozenset(sync_state_set), sync_state_set_epoch)


def row_of_group(group: BrokerGroup) -> GroupRow:
    """The import row of `group` (group_of_row's inverse; replicas sorted by id)."""
    return (group.cluster_name, group.broker_name, group.next_broker_id,
            tuple((i, r.address, r.register_check_code) for i, r in sorted(group.replicas.items())),
            group.master_id, group.master_epoch, tuple(group.sorted_sync_state_set()), group.sync_state_set_epoch)


# ---- the state -----------------------------------------------------------------------------------


class ControllerState:
    """Every broker group, keyed by brokerName (as Java: two clusters sharing a name collide)."""

    def __init__(self) -> None:
        self._groups: dict[str, BrokerGroup] = {}
        # Controller options set by applied 1009s (UpdateControllerConfig), merged, key -> text: a
        # node applies them over its startup configuration (so a snapshot carries them too).
        self._config: dict[str, str] = {}
        # The NameServer role: registrations, routes and KV config (fsm._namesrv).
        self.namesrv = NamesrvState()

    def config_updates(self) -> dict[str, str]:
        """Every option an applied 1009 set (the latest value of each), as properties text."""
        return dict(self._config)

    def group(self, broker_name: str) -> BrokerGroup | None:
        return self._groups.get(broker_name)

    def groups(self) -> Iterator[BrokerGroup]:
        return iter(list(self._groups.values()))

    def __len__(self) -> int:
        return len(self._groups)

    def apply(self, command: Command) -> ApplyResult:
        return _APPLIERS[type(command)](self, command)

    def apply_all(self, commands: list[Command]) -> list[ApplyResult]:
        return [self.apply(command) for command in commands]

    # -- snapshot --

    # Restore and snapshot allocate a few objects per group and nothing cyclic; letting the cyclic
    # collector run meanwhile re-traverses the growing heap over and over (it doubled restore time
    # for 10,000 groups, and nearly tripled the median snapshot time). Each step runs without a
    # yield, so nothing else allocates while the collector is paused.

    def snapshot(self) -> bytes:
        return self.capture().encode()

    def capture(self) -> StateCapture:
        """The state as it is now, to be encoded later, in steps, while this state moves on."""
        return StateCapture(list(self._groups.values()), dict(self._config), self.namesrv.capture())

    def restore(self, data: bytes) -> None:
        """Replace the whole state by a snapshot; on a bad snapshot the state is left unchanged."""
        with collector_paused():
            for decoded in ControllerState.decode_steps(data):
                if decoded is not None:
                    self.adopt(decoded)

    @staticmethod
    def decode_steps(data: bytes, items_per_step: int = DECODE_STEP_ITEMS, *,
                     freeze: bool = False) -> Iterator[ControllerState | None]:
        """A NEW state decoded from a snapshot a bounded step at a time: None after each step, the
        state last; nothing else is touched, so the steps may run in a worker thread while the live
        state serves (then `adopt` it), and a bad snapshot (CommandDecodeError, naming where) leaves
        nothing behind.

        A chunked snapshot (fsm._chunks) takes a step per piece (one parse of at most
        SNAPSHOT_STEP_ITEMS records, as the encoder wrote them), then a step per `items_per_step`
        records built. A version-1 snapshot without an index can only be parsed whole (one long
        call), then its records are built `items_per_step` a step. The collector is paused within
        each step only.

        `freeze`: gc.freeze() after each step, which moves every object the collector tracks (the
        records just built, and the rest of the process) to its permanent generation. For a serving
        node: otherwise the records built in a step are promoted by the young collections between
        steps, and the full collections the growing state triggers walk all of it, each in one call
        that holds the GIL: at 100,000 groups and 250,000 topics the event loop stood still 0.78 s
        (a collection), longer than the one-piece restore's 0.62 s; frozen, 13 ms
        (bench/bench_snapshot_install.py). Cyclic garbage among objects frozen is never collected;
        gc.unfreeze() once the state is adopted ends that (the state then lies in the oldest
        generation, as a restored one does; what `rmqc serve` froze at start is unfrozen with it).
        The caller decides: the collector is the process's, this module only pauses it otherwise."""
        located = read_index(data)
        steps = (_decode_document_steps(data, items_per_step) if located is None
                 else _decode_chunk_steps(data, *located, items_per_step))
        for step in steps:
            if freeze:
                gc.freeze()
            yield step

    def adopt(self, other: ControllerState) -> None:
        """Take `other`'s contents in O(1), and give it this state's: `other` then holds the old
        contents (drop it, or empty it with `release_steps` first: freeing a big state at once is
        one long call). The route cache (node-local) starts empty, as after restore."""
        self._groups, other._groups = other._groups, self._groups
        self._config, other._config = other._config, self._config
        self.namesrv, other.namesrv = other.namesrv, self.namesrv

    def release_steps(self, items_per_step: int = SNAPSHOT_STEP_ITEMS) -> Iterator[None]:
        """Empties this state about `items_per_step` records a step (None after each), so that a
        state `adopt` swapped out is freed in short calls, not in one that holds the GIL."""
        groups = self._groups
        while groups:
            for _ in range(min(items_per_step, len(groups))):
                groups.popitem()
            yield None
        self._config = {}
        yield from self.namesrv.release_steps(items_per_step)

    # -- appliers (one per command type) --

    def _result(self, command: Command, status: ApplyStatus, before: BrokerGroup | None,
                after: BrokerGroup | None = None, detail: int | None = None) -> ApplyResult:
        if after is None and status is not _OK:
            after = before
        if status is _OK:
            assert command.broker_name is not None  # the command of a broker group
            self._store(command.broker_name, after)
        return ApplyResult(command, status, before, after, detail)

    def _store(self, broker_name: str, group: BrokerGroup | None) -> None:
        self.namesrv.forget_broker_name(broker_name)  # cached routes name the group's master
        if group is None:
            self._groups.pop(broker_name, None)
        else:
            self._groups[broker_name] = group

    def _apply_broker_id(self, cmd: ApplyBrokerId) -> ApplyResult:
        before = self._groups.get(cmd.broker_name)
        cluster = cmd.cluster_name if cmd.same_cluster_only else None
        status = check_apply_broker_id(before, cmd.broker_id, cmd.register_check_code, cluster)
        if status is _OK and before is None and len(self._groups) >= MAX_GROUPS:
            status = ApplyStatus.TOO_MANY_GROUPS
        if status is not _OK:
            return self._result(cmd, status, before)
        if before is not None and before.is_registered(cmd.broker_id):
            return self._result(cmd, status, before, before)  # idempotent retry: no change at all
        base = before or BrokerGroup(cmd.cluster_name, cmd.broker_name)
        replicas = dict(base.replicas)
        replicas[cmd.broker_id] = Replica(cmd.broker_address, cmd.register_check_code)
        # Java adds one regardless of the id; rmqc also skips past the applied id so that 1012
        # never hands out an id that is already taken (only differs when a broker picks its own id).
        next_id = max(base.next_broker_id + 1, cmd.broker_id + 1)
        after = evolve(base, replicas=replicas, next_broker_id=next_id)
        return self._result(cmd, status, before, after)

    def _update_broker_address(self, cmd: UpdateBrokerAddress) -> ApplyResult:
        before = self._groups.get(cmd.broker_name)
        if before is None:
            return self._result(cmd, ApplyStatus.UNKNOWN_GROUP, None)
        replica = before.replicas.get(cmd.broker_id)
        if replica is None:
            return self._result(cmd, ApplyStatus.UNKNOWN_BROKER, before)
        replicas = dict(before.replicas)
        replicas[cmd.broker_id] = Replica(cmd.broker_address, replica.register_check_code)
        return self._result(cmd, _OK, before, evolve(before, replicas=replicas))

    def _elect_master(self, cmd: ElectMaster) -> ApplyResult:
        before = self._groups.get(cmd.broker_name)
        status = check_elect_master(before, cmd)
        if status is not _OK:
            return self._result(cmd, status, before)
        assert before is not None
        if cmd.candidate is None:
            after = evolve(before, master_id=None, master_epoch=before.master_epoch + 1)
        else:
            after = evolve(
                before,
                master_id=cmd.candidate,
                master_epoch=before.master_epoch + 1,
                sync_state_set=frozenset((cmd.candidate,)),
                sync_state_set_epoch=before.sync_state_set_epoch + 1,
            )
        return self._result(cmd, status, before, after)

    def _alter_sync_state_set(self, cmd: AlterSyncStateSet) -> ApplyResult:
        before = self._groups.get(cmd.broker_name)
        new_set = frozenset(cmd.new_sync_state_set)
        status, detail = check_alter_sync_state_set(
            before, cmd.master_id, cmd.expected_master_epoch, cmd.expected_sync_state_set_epoch, new_set
        )
        if status is not _OK:
            return self._result(cmd, status, before, detail=detail)
        assert before is not None
        after = evolve(
            before, sync_state_set=new_set, sync_state_set_epoch=before.sync_state_set_epoch + 1
        )
        return self._result(cmd, status, before, after)

    def _clean_broker_data(self, cmd: CleanBrokerData) -> ApplyResult:
        before = self._groups.get(cmd.broker_name)
        if before is None:
            return self._result(cmd, ApplyStatus.UNKNOWN_GROUP, None)
        if not cmd.broker_ids:
            return self._result(cmd, _OK, before, None)
        removed = frozenset(cmd.broker_ids)
        replicas = {i: r for i, r in before.replicas.items() if i not in removed}
        if not replicas:
            return self._result(cmd, _OK, before, None)
        # As Java: epochs and masterBrokerId stay (a cleaned dead master is still the master, so
        # the inactive-master scan can re-elect); unlike Java the group's two halves never split.
        after = evolve(before, replicas=replicas, sync_state_set=before.sync_state_set - removed)
        return self._result(cmd, _OK, before, after)

    def _notification_sent(self, cmd: NotificationSent) -> ApplyResult:
        return ApplyResult(cmd, _OK, None, None)  # nothing to change: the log entry is the record

    def _record_operation(self, cmd: RecordOperation) -> ApplyResult:
        return ApplyResult(cmd, _OK, None, None)  # nothing to change: the log entry is the record

    def _update_controller_config(self, cmd: UpdateControllerConfig) -> ApplyResult:
        self._config.update(cmd.properties)  # always applies: the leader validated the keys
        return ApplyResult(cmd, _OK, None, None)

    def _import_groups(self, cmd: ImportGroups) -> ApplyResult:
        status, remark = check_import_groups(self, cmd)
        if status is _OK and remark is None:
            self._groups = {row[1]: group_of_row(row) for row in cmd.groups}
        return ApplyResult(cmd, status, None, None, remark=remark)


    # -- the NameServer role: no broker group changes; `before`/`after` are the controller's group
    # of the broker name (the fencing input), unchanged

    def _namesrv_result(self, cmd: Command, done: bool | None = True, refused: NamesrvRefused | None = None,
                        group: BrokerGroup | None = None) -> ApplyResult:
        if refused is not None:
            return ApplyResult(cmd, ApplyStatus(refused.status), group, group, remark=refused.detail)
        return ApplyResult(cmd, _OK if done else ApplyStatus.NOT_FOUND, group, group)

    def _register_broker_route(self, cmd: RegisterBrokerRoute) -> ApplyResult:
        group = self._groups.get(cmd.broker_name)
        try:
            self.namesrv.register(cmd, group)
        except NamesrvRefused as refused:
            return self._namesrv_result(cmd, refused=refused, group=group)
        return self._namesrv_result(cmd, group=group)

    def _unregister_broker_route(self, cmd: UnregisterBrokerRoute) -> ApplyResult:
        return self._namesrv_result(cmd, self.namesrv.unregister(cmd))

    def _delete_topic_route(self, cmd: DeleteTopicRoute) -> ApplyResult:
        return self._namesrv_result(cmd, self.namesrv.delete_topic(cmd))

    def _put_kv_config(self, cmd: PutKvConfig) -> ApplyResult:
        try:
            self.namesrv.put_kv(cmd)
        except NamesrvRefused as refused:
            return self._namesrv_result(cmd, refused=refused)
        return self._namesrv_result(cmd)

    def _delete_kv_config(self, cmd: DeleteKvConfig) -> ApplyResult:
        return self._namesrv_result(cmd, self.namesrv.delete_kv(cmd))

    def _register_topic_route(self, cmd: RegisterTopicRoute) -> ApplyResult:
        try:
            self.namesrv.register_topic(cmd)
        except NamesrvRefused as refused:
            return self._namesrv_result(cmd, refused=refused)
        return self._namesrv_result(cmd)

    def _set_write_perm_of_broker(self, cmd: SetWritePermOfBroker) -> ApplyResult:
        """`detail`: how many topics were touched (the answer's wipeTopicCount / addTopicCount)."""
        return ApplyResult(cmd, _OK, None, None, detail=self.namesrv.set_write_perm(cmd))


# keyed by the command's type, so each applier takes that type (Any: a dict cannot say so)
_APPLIERS: dict[type, Callable[[ControllerState, Any], ApplyResult]] = {
    ApplyBrokerId: ControllerState._apply_broker_id,
    UpdateBrokerAddress: ControllerState._update_broker_address,
    ElectMaster: ControllerState._elect_master,
    AlterSyncStateSet: ControllerState._alter_sync_state_set,
    CleanBrokerData: ControllerState._clean_broker_data,
    UpdateControllerConfig: ControllerState._update_controller_config,
    RegisterBrokerRoute: ControllerState._register_broker_route,
    UnregisterBrokerRoute: ControllerState._unregister_broker_route,
    DeleteTopicRoute: ControllerState._delete_topic_route,
    PutKvConfig: ControllerState._put_kv_config,
    DeleteKvConfig: ControllerState._delete_kv_config,
    RecordOperation: ControllerState._record_operation,
    RegisterTopicRoute: ControllerState._register_topic_route,
    SetWritePermOfBroker: ControllerState._set_write_perm_of_broker,
    ImportGroups: ControllerState._import_groups,
    NotificationSent: ControllerState._notification_sent,
}




# How many groups one step of StateCapture.encode_steps turns into rows (and topics' queue data,
# registrations, KV entries): about 10 ms of the event loop's time on a loaded machine (100,000
# groups took 240 ms in one piece). A piece of the snapshot holds as many, so each parse of the
# stepped decode is as short.
SNAPSHOT_STEP_GROUPS = SNAPSHOT_STEP_ITEMS


class StateCapture:
    """The applied state at one index, captured by reference: broker groups and NameServer records
    are immutable and replaced on change, so copying the containers (a pointer per group, about
    1 ms for 100,000) freezes them. Encoding them is the slow part (Python per group); it runs in
    steps, so a node's event loop runs between two (a snapshot of 100,000 groups blocked it for
    a quarter of a second)."""

    __slots__ = ("_config", "_groups", "_namesrv")

    def __init__(self, groups: list[BrokerGroup], config: dict[str, str], namesrv: NamesrvCapture) -> None:
        self._groups, self._config, self._namesrv = groups, config, namesrv

    def encode(self) -> bytes:
        for done in self.encode_steps():
            if done is not None:
                return done
        raise AssertionError("encode_steps ends with the bytes")

    def encode_steps(self, groups_per_step: int = SNAPSHOT_STEP_GROUPS) -> Iterator[bytes | None]:
        """None after each step, then the snapshot's bytes: the chunked layout (fsm._chunks), each
        piece of at most `groups_per_step` groups (topics' queue data, registrations, KV entries)
        encoded in a step of its own. The document is the version-1 one with a chunk index, its
        pieces joined as one orjson call over the whole state gives them (orjson writes no spaces)."""
        writer = ChunkWriter()
        groups = self._groups
        for start in range(0, len(groups), groups_per_step):
            with collector_paused():
                rows = [_group_to_row(g) for g in groups[start:start + groups_per_step]]
                writer.add(GROUPS, orjson.dumps(rows)[1:-1])
            yield None
        if self._config:  # absent when no 1009 was applied: the snapshot is as before
            writer.add(CONFIG, orjson.dumps(self._config))
        if self._namesrv:  # absent when the NameServer role holds nothing: as before it existed
            for kind, piece in self._namesrv.chunks(groups_per_step):
                writer.add(kind, piece)
                yield None
        with collector_paused():
            yield writer.document()  # one copy of what may be tens of MB


# ---- the decode, in steps (ControllerState.decode_steps) -------------------------------------------

def _decode_chunk_steps(data: bytes, pieces: list[tuple[int, int, int]], offset: int, items_per_step: int
                        ) -> Iterator[ControllerState | None]:
    """A chunked snapshot: each piece parsed in a step (one short call), its records then built
    `items_per_step` a step."""
    state = ControllerState()
    rows_before = 0  # groups in the pieces before: a bad row is named by its position in the document
    namespace = ""
    for number, kind, piece in walk(data, pieces, offset):
        place = where(number, kind)
        with collector_paused():
            try:
                if kind in (GROUPS, REGISTRATIONS):
                    value = orjson.loads(b"".join((b"[", piece, b"]")))
                elif kind in (TOPICS, KV_ENTRIES):
                    value = orjson.loads(b"".join((b"{", piece, b"}")))
                else:
                    value = orjson.loads(piece)
            except orjson.JSONDecodeError as exc:
                raise CommandDecodeError(f"{place} is not JSON: {exc}") from None
        yield None
        if kind == KV_NAMESPACE:
            namespace = value
            value = {}
        yield from _build_steps(state, kind, value, items_per_step, place, f"{place}: group", rows_before, namespace)
        if kind == GROUPS:
            rows_before += len(value)
    yield state


def _decode_document_steps(data: bytes, items_per_step: int) -> Iterator[ControllerState | None]:
    """A version-1 document without an index: parsed whole (one step, as long as it takes), its
    records then built `items_per_step` a step."""
    with collector_paused():
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CommandDecodeError(f"snapshot is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != SNAPSHOT_FORMAT_VERSION:
        raise CommandDecodeError("snapshot has no supported 'version' (expected 1)")
    rows = document.get("groups")
    if not isinstance(rows, list):
        raise CommandDecodeError("snapshot has no 'groups' list")
    state = ControllerState()
    state._config = _checked_config(document.get("config", {}))  # absent before 1009 was replicated
    section = document.get("namesrv")  # absent in snapshots written before the NameServer role: empty
    yield None
    yield from _build_steps(state, GROUPS, rows, items_per_step, "", "snapshot group")
    if section is not None:
        place = "snapshot 'namesrv' section"
        try:
            if not isinstance(section, dict):
                raise TypeError("not an object")
            registrations, topics = section.get("registrations", []), section.get("topics", {})
            kv = section.get("kv", {})
            if not (isinstance(registrations, list) and isinstance(topics, dict) and isinstance(kv, dict)):
                raise TypeError("registrations, topics or kv of the wrong type")
        except (TypeError, ValueError) as exc:
            raise CommandDecodeError(f"{place} is malformed: {exc}") from None
        yield from _build_steps(state, REGISTRATIONS, registrations, items_per_step, place)
        yield from _build_steps(state, TOPICS, topics, items_per_step, place)
        for namespace, table in kv.items():
            yield from _build_steps(state, KV_NAMESPACE, {}, items_per_step, place, namespace=namespace)
            yield from _build_steps(state, KV_ENTRIES, table, items_per_step, place, namespace=namespace)
    yield state


def _build_steps(state: ControllerState, kind: int, value: Any, items_per_step: int, place: str,
                 group_place: str = "", rows_before: int = 0, namespace: object = None) -> Iterator[None]:
    """The records of `value` (a parsed piece, or a section of a version-1 document) of `kind` added
    to `state` (being built: not the live one), `items_per_step` records a step, None after each.
    A topic counts its broker names' queue data (a record each)."""
    namesrv = state.namesrv
    try:
        if kind == GROUPS:
            groups = state._groups
            for start in range(0, len(value), items_per_step):
                with collector_paused():
                    for position in range(start, min(start + items_per_step, len(value))):
                        try:
                            group = _build_group(value[position])
                        except (TypeError, ValueError) as exc:
                            raise CommandDecodeError(
                                f"{group_place} {rows_before + position} is malformed: {exc}") from None
                        groups[group.broker_name] = group
                yield None
        elif kind == CONFIG:
            state._config = _checked_config(value)
        elif kind == REGISTRATIONS:
            for start in range(0, len(value), items_per_step):
                with collector_paused():
                    namesrv.restore_registrations(value[start:start + items_per_step])
                yield None
        elif kind == TOPICS:
            for batch in batches(value.items(), items_per_step, topic_weight):
                with collector_paused():
                    namesrv.restore_topics(batch)
                yield None
        elif kind == KV_NAMESPACE:
            namesrv.restore_kv(namespace, {})
        else:  # KV_ENTRIES: of the namespace last restored
            entries = iter(value.items())
            while True:
                with collector_paused():
                    part = dict(itertools.islice(entries, items_per_step))
                    namesrv.restore_kv(namespace, part, merge=True)
                if not part:
                    break
                yield None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise CommandDecodeError(f"{place} is malformed: {exc}") from None


def _checked_config(config: object) -> dict[str, str]:
    if not (isinstance(config, dict) and all(type(v) is str for v in config.values())):
        raise CommandDecodeError("snapshot 'config' is not an object of strings")
    return config


# ---- snapshot rows -------------------------------------------------------------------------------
# A group is written as a flat list: compact, and cheap both ways. Restore is on the restart path
# (design target: serving again within 1 s), so each row is checked once, by hand, while its objects
# are built (cattrs cost about 0.1 ms per group here, and a checking pass before the building pass
# re-walked every row), with the model's slot-storing constructors; a damaged snapshot still names
# its bad row.

_NO_IDS: frozenset[int] = frozenset()  # shared by every group with an empty sync state set


def _group_to_row(g: BrokerGroup) -> list[Any]:
    sync_state_set = g.sync_state_set
    return [
        g.cluster_name, g.broker_name, g.next_broker_id,
        [[i, r.address, r.register_check_code] for i, r in g.replicas.items()],
        g.master_id, g.master_epoch, sorted(sync_state_set) if sync_state_set else [], g.sync_state_set_epoch,
    ]


def _build_group(row: Any) -> BrokerGroup:  # a decoded JSON row: every field checked below
    cluster, name, next_id, replica_rows, master, epoch, sss, sss_epoch = row
    if not (type(cluster) is str and type(name) is str and type(next_id) is int and type(epoch) is int
            and type(sss_epoch) is int and (master is None or type(master) is int)):
        raise ValueError("a field has the wrong type")
    replicas = {}
    for broker_id, address, code in replica_rows:
        if not (type(broker_id) is int and type(address) is str and type(code) is str):
            raise ValueError("a replica field has the wrong type")
        replicas[broker_id] = restored_replica(address, code)
    for broker_id in sss:
        if type(broker_id) is not int:
            raise ValueError("a sync state set id is not an integer")
    sync_state_set = frozenset(sss) if sss else _NO_IDS
    return restored_group(cluster, name, next_id, replicas, master, epoch, sync_state_set, sss_epoch)
