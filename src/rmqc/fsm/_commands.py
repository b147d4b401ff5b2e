"""Commands: what the leader puts into the Raft log (spec section 4.2, redesigned).

A command carries everything apply needs, including its preconditions (expected epochs, the
chosen candidate) and the non-deterministic inputs the leader decided (liveness verdicts, the
election choice, `leader_ts_ms`). Applying is therefore a pure function of (state, command): every
replica gets the same result, and of two racing requests for one group the second fails its
precondition with a named `ApplyStatus` instead of silently winning too.

Several commands travel in one NORMAL entry (`encode_commands`), e.g. the elections of many groups
decided in one tick. An empty payload is the leader's no-op and decodes to no commands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any

import orjson

from ._errors import CommandDecodeError, TooManyCommands


class Trigger(StrEnum):
    """Who asked for an election (spec 3.7)."""

    BROKER = "broker"  # a broker found no master and asked with its own id
    ADMIN = "admin"  # mqadmin electMaster (designateElect=true)
    CONTROLLER = "controller"  # the leader saw the master go inactive


class ElectionReason(StrEnum):
    """Why an election was held, in more detail than its trigger (what `rmqc events` and
    `rmqc log dump` show an operator after a failover)."""

    SHUT_DOWN = "master_shut_down"  # the master unregistered (104, a broker stopping) before it was lost
    CONNECTION_CLOSED = "master_connection_closed"  # the master's connection to the leader (or a follower) closed
    HEARTBEAT_MISSED = "heartbeat_deadline_missed"  # the master's heartbeats stopped: its deadline passed
    INACTIVE_MASTER_SCAN = "inactive_master_scan"  # the periodic scan found the master not alive
    ADMIN = "admin_designation"  # mqadmin electMaster named the new master
    BROKER = "broker_request"  # a broker found no master and asked
    REQUEST = "elect_request"  # a 1002 that named no broker (a client's request)


# One replica the election policy weighed (its inputs, spec 5.1): (brokerId, epoch, maxOffset,
# electionPriority, in the SyncStateSet). Only live replicas are candidates.
CandidateRow = tuple[int, int, int, int, bool]


@dataclass(frozen=True, slots=True)
class Origin:
    """Who caused a command (the audit of design.md "Trust"), recorded in the replicated log.

    For a request: the ACL access key it was admitted under (None: unsigned, or ACL off, i.e.
    anonymous), the caller's `host:port`, and the controller node it arrived on (a follower's id
    when that follower forwarded it). For the controller's own decisions (a dead master's
    failover): no key, no address, the node that decided. Commands written before this existed
    have no origin at all (None)."""

    access_key: str | None
    address: str | None
    node: str | None

    @property
    def is_controller(self) -> bool:
        return self.address is None

    @property
    def caller(self) -> str:
        """"controller", the access key, or "anonymous"."""
        if self.is_controller:
            return CONTROLLER_CALLER
        return ANONYMOUS_CALLER if self.access_key is None else self.access_key


CONTROLLER_CALLER = "controller"
ANONYMOUS_CALLER = "anonymous"


class _NoBrokerGroup:
    """A command about no broker group: the export's broker_name column stays empty."""

    __slots__ = ()

    @property
    def broker_name(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class ApplyBrokerId:
    """1013: give `broker_id` to the broker whose check code is `register_check_code`."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    register_check_code: str
    leader_ts_ms: int
    origin: Origin | None = None
    # Refuse at apply, too, an id for a group registered under another cluster (the leader checked
    # when it decided; this closes the race of two clusters creating one group at once). False in
    # logs written before it existed, and with clusterNameCheck off.
    same_cluster_only: bool = False


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddress:
    """1003 with a changed address: replace the address of a registered id (check code kept)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class ElectMaster:
    """Make `candidate` master, or clear the master when `candidate` is None (spec 3.7 step 6).

    Preconditions: the group's masterEpoch and syncStateSetEpoch still equal the values the leader
    decided against (so a SyncStateSet change or another election in between voids this one).
    """

    cluster_name: str
    broker_name: str
    trigger: Trigger
    candidate: int | None
    expected_master_epoch: int
    expected_sync_state_set_epoch: int
    leader_ts_ms: int
    requester_id: int | None = None  # brokerId of the request (broker: itself; admin: designated)
    unclean: bool = False  # enableElectUncleanMaster when the leader decided
    liveness_lost_ms: int | None = None  # controller trigger: when the leader saw the master inactive
    attempt: int = 1  # controller trigger: 1..electMasterMaxRetryCount
    # controller trigger: when the old master was last known alive (last heartbeat or connection
    # close). None in logs written before it existed, or when the leader never heard the master.
    master_last_alive_ms: int | None = None
    origin: Origin | None = None
    # Why, and what the policy chose from (None and () in logs written before they existed).
    reason: ElectionReason | None = None
    deadline_missed_by_ms: int | None = None  # heartbeat_deadline_missed: how late the detection was
    candidates: tuple[CandidateRow, ...] = ()  # sorted by brokerId


@dataclass(frozen=True, slots=True)
class AlterSyncStateSet:
    """1001: the master reports a new in-sync replica set, fenced by both epochs."""

    broker_name: str
    master_id: int
    expected_master_epoch: int
    expected_sync_state_set_epoch: int
    new_sync_state_set: tuple[int, ...]  # sorted
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class CleanBrokerData:
    """1011: remove ids from a group, or the whole group when `broker_ids` is None."""

    cluster_name: str | None
    broker_name: str
    broker_ids: tuple[int, ...] | None  # sorted; None = the whole group
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class UpdateControllerConfig(_NoBrokerGroup):
    """1009: set controller options (`properties`: (key, value) text pairs, sorted by key) on every
    node. The leader validated them against its own configuration before proposing; each node applies
    what its configuration accepts once the entry is applied (rmqc.config's options stay local)."""

    properties: tuple[tuple[str, str], ...]
    leader_ts_ms: int
    origin: Origin | None = None


class OperatorAction(StrEnum):
    """An operator request that changes no state but belongs in the audit."""

    TRANSFER_LEADER = "transfer_leader"  # rmqc admin transfer-leader
    SNAPSHOT_SAVE = "snapshot_save"  # rmqc admin snapshot save: the whole state read out


@dataclass(frozen=True, slots=True)
class RecordOperation(_NoBrokerGroup):
    """The record of an operator request that changes no state (who asked for a leadership
    transfer, who read the whole state out as a snapshot): applied as nothing, kept in the log for
    `rmqc log dump`, the export and `rmqc analyze`. `detail` says what, in words."""

    action: OperatorAction
    detail: str
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class NotificationSent:
    """The leader sent a replica its 1008 after a failover: which broker heard of the new master,
    and how long after the commit, on every node (the `notified` step of `rmqc events`) and in the
    history, even after the leader is gone. Changes no state."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    master_epoch: int
    after_commit_ms: int  # on the leader that sent it
    leader_ts_ms: int
    origin: Origin | None = None


# ---- the NameServer role (docs/namesrv.md): routes, registrations and KV config ----------------

# One topic of a registration: (topic, readQueueNums, writeQueueNums, perm, topicSysFlag).
TopicRow = tuple[str, int, int, int, int]


@dataclass(frozen=True, slots=True)
class RegisterBrokerRoute:
    """103 that changes something: the registration (keyed by cluster and address, as Java's
    BrokerAddrInfo) and the topics of its TopicConfigSerializeWrapper. Whether the topics become
    the group's queue data is decided at apply (the fencing rule, fsm._namesrv)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    ha_address: str
    state_version: int  # the DataVersion of the topic table
    data_timestamp: int
    data_counter: int
    topics: tuple[TopicRow, ...]  # sorted by topic
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRoute:
    """104, or the leader's verdict that a registration expired or its broker died (`reason`)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    reason: str  # "request" | "expired" | "inactive"
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicRoute(_NoBrokerGroup):
    """216: remove a topic's queue data (of one cluster's broker names, or everywhere)."""

    topic: str
    cluster_name: str | None
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class PutKvConfig(_NoBrokerGroup):
    """100: set namespace/key to value."""

    namespace: str
    key: str
    value: str
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class DeleteKvConfig(_NoBrokerGroup):
    """102: remove namespace/key."""

    namespace: str
    key: str
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class RegisterTopicRoute(_NoBrokerGroup):
    """217 (REGISTER_TOPIC_IN_NAMESRV): an operator's queue data of one topic. Each row is
    (brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag): a TopicRow keyed by broker name."""

    topic: str
    queues: tuple[TopicRow, ...]  # sorted by broker name
    leader_ts_ms: int
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class SetWritePermOfBroker:
    """205 (`wipe`: PERM_WRITE taken from every topic's queue data of the broker name) or 327 (read
    and write given back), as Java's RouteInfoManager.operateWritePermOfBroker."""

    broker_name: str
    wipe: bool
    leader_ts_ms: int
    origin: Origin | None = None


NamesrvCommand = (
    RegisterBrokerRoute | UnregisterBrokerRoute | DeleteTopicRoute | PutKvConfig | DeleteKvConfig | RegisterTopicRoute
    | SetWritePermOfBroker
)


# ---- migration (docs/operations.md "Migrating from the Java controller") ---------------------------

# One broker group as another controller holds it, in the snapshot's row layout (fsm._state):
# (clusterName, brokerName, nextBrokerId, ((brokerId, address, registerCheckCode), ...), masterBrokerId
# or None, masterEpoch, (syncStateSet ids, sorted), syncStateSetEpoch).
GroupRow = tuple[str, str, int, tuple[tuple[int, str, str], ...], int | None, int, tuple[int, ...], int]


@dataclass(frozen=True, slots=True)
class ImportGroups(_NoBrokerGroup):  # many groups: the export's broker_name column stays empty
    """`rmqc migrate from-java`: broker groups read from a Java controller, taken over exactly (ids,
    addresses, master, both epochs, SyncStateSet), all in one entry. Applies only to a cluster with
    no broker group yet, or one that holds exactly these groups already (a re-run changes nothing)."""

    source: str  # where the groups were read, e.g. "java controller 10.0.0.5:9878"
    groups: tuple[GroupRow, ...]  # sorted by broker name
    leader_ts_ms: int
    origin: Origin | None = None


Command = (
    ApplyBrokerId | UpdateBrokerAddress | ElectMaster | AlterSyncStateSet | CleanBrokerData | UpdateControllerConfig
    | RegisterBrokerRoute | UnregisterBrokerRoute | DeleteTopicRoute | PutKvConfig | DeleteKvConfig
    | RecordOperation | RegisterTopicRoute | SetWritePermOfBroker | ImportGroups | NotificationSent
)

# The tag written into the log; also the `command` column of the history export.
COMMAND_TAGS: dict[type, str] = {
    ApplyBrokerId: "apply_broker_id",
    UpdateBrokerAddress: "update_broker_address",
    ElectMaster: "elect_master",
    AlterSyncStateSet: "alter_sync_state_set",
    CleanBrokerData: "clean_broker_data",
    UpdateControllerConfig: "update_controller_config",
    RegisterBrokerRoute: "register_broker_route",
    UnregisterBrokerRoute: "unregister_broker_route",
    DeleteTopicRoute: "delete_topic_route",
    PutKvConfig: "put_kv_config",
    DeleteKvConfig: "delete_kv_config",
    RecordOperation: "record_operation",
    RegisterTopicRoute: "register_topic_route",
    SetWritePermOfBroker: "set_write_perm_of_broker",
    ImportGroups: "import_groups",
    NotificationSent: "notification_sent",
}
_TYPES_BY_TAG: dict[str, type] = {tag: cls for cls, tag in COMMAND_TAGS.items()}

# Why: one entry is bounded by the Raft entry size anyway; this bound keeps a corrupt or hostile
# payload from making the decoder build millions of objects before anything notices.
MAX_COMMANDS_PER_ENTRY = 100_000


def command_tag(command: Command) -> str:
    return COMMAND_TAGS[type(command)]


def encode_commands(commands: list[Command]) -> bytes:
    """The NORMAL entry payload for `commands` (an empty list gives the no-op payload b"").

    Raises TooManyCommands past the bound, and TypeError for a command whose field does not have
    its annotated type (which decoding would refuse)."""
    return encode_commands_as_decoded(commands)[0]


def encode_commands_as_decoded(commands: list[Command]) -> tuple[bytes, bool]:
    """encode_commands's payload, and whether `commands` equal the payload's decoding field by
    field, types included (every field already of the type decoding gives: a tuple, not a list;
    an enum member, not its name). When they do, the proposing leader applies `commands` and
    skips decoding its own entry: applying either is the same to the state machine."""
    if not commands:
        return b"", True
    if len(commands) > MAX_COMMANDS_PER_ENTRY:
        raise TooManyCommands(f"{len(commands)} commands in one entry exceed the bound of {MAX_COMMANDS_PER_ENTRY}")
    as_decoded = [True]
    payload = orjson.dumps([[command_tag(c), _fields_of(c, as_decoded)] for c in commands])
    return payload, as_decoded[0]


def decode_commands(data: bytes) -> list[Command]:
    """The commands of a NORMAL entry payload; raises CommandDecodeError naming what was wrong."""
    if not data:
        return []
    try:
        items = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CommandDecodeError(f"entry payload is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise CommandDecodeError("entry payload is not a list of commands")
    if len(items) > MAX_COMMANDS_PER_ENTRY:
        raise CommandDecodeError(f"{len(items)} commands exceed the bound of {MAX_COMMANDS_PER_ENTRY}")
    return [_decode_one(position, item) for position, item in enumerate(items)]


def _decode_one(position: int, item: object) -> Command:
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict)):
        raise CommandDecodeError(f"command {position} is not a [tag, fields] pair")
    cls = _TYPES_BY_TAG.get(item[0]) if isinstance(item[0], str) else None
    if cls is None:
        raise CommandDecodeError(f"command {position} has unknown tag {item[0]!r}")
    try:
        command: Command = _decoded(cls, item[1])
    except (ValueError, TypeError) as exc:
        raise CommandDecodeError(f"command {position} ({item[0]}) has bad fields: {exc}") from None
    return command


# ---- the fields of a command in the log ----------------------------------------------------------
# A command is written as a JSON object of all its fields in declaration order (enums as their
# values, tuples as arrays). Encoding and decoding check each field's type against its annotation
# (a table, written by hand rather than through cattrs: the codec is on the apply path and its import
# on every node start); unknown keys are ignored, so a newer leader's optional fields can be read.

_MISSING_FIELD = object()
_new = object.__new__


def _fields_of(command: Command, as_decoded: list[bool]) -> dict[str, object]:
    """The fields to write, each checked as decoding will check it: a command of the wrong shape
    (a bug) fails here, on the leader before it is proposed, instead of failing the apply of a
    committed entry on every node, forever. `as_decoded[0]` is cleared when a field's value is
    not what decoding it gives back (a list where the field is a tuple, say)."""
    values: dict[str, object] = {}
    for name, exact, nullable, (_, check, _default), _store in _FIELD_ROWS[type(command)]:
        value = getattr(command, name)
        if type(value) is not exact and not (nullable and value is None):
            try:
                checked = check(value)
            except (ValueError, TypeError) as exc:
                raise TypeError(f"{command_tag(command)} command: field {name!r}: {exc}") from None
            if checked is not value and not (type(checked) is type(value) and checked == value):
                as_decoded[0] = False
        values[name] = value
    return values


def _decoded(cls: type, raw_fields: dict[str, object]) -> Command:
    """The command of class `cls` whose JSON object is `raw_fields`; raises ValueError or
    TypeError naming the first field that is missing or of the wrong type. Every field is
    checked, then stored straight into its slot (as fsm._model's restored records are: the
    frozen __init__ costs twice as much, and this runs for every command on every node)."""
    command: Command = _new(cls)
    get = raw_fields.get
    for name, exact, nullable, spec, store in _FIELD_ROWS[cls]:
        raw = get(name, _MISSING_FIELD)
        # the common value, exactly what its check would accept and return as is, taken inline;
        # everything else (a missing field, a tuple, an origin, a wrong type) through the check
        store(command, raw if type(raw) is exact or (nullable and raw is None) else _field_value(raw_fields, spec))
    return command


def _field_value(raw_fields: dict[str, object], spec: _FieldSpec) -> object:
    name, check, default = spec
    raw = raw_fields.get(name, _MISSING_FIELD)
    if raw is _MISSING_FIELD:
        if default is _MISSING_FIELD:
            raise ValueError(f"field {name!r} is missing")
        return default
    try:
        return check(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"field {name!r}: {exc}") from None


def _exactly(kind: type) -> Callable[[object], object]:
    def check(raw: object) -> object:
        if type(raw) is not kind:  # bool is not an int here, nor 1.0 an int
            raise TypeError(f"expected {kind.__name__}, got {raw!r}")
        return raw

    return check


def _int_tuple(raw: object) -> tuple[int, ...]:
    # A JSON array when decoding, the command's tuple when encoding.
    # isinstance for the type checker, type() to refuse subclasses (a namedtuple is no list of ids)
    if not isinstance(raw, list | tuple) or type(raw) not in (list, tuple) or any(type(i) is not int for i in raw):
        raise TypeError(f"expected a list of integers, got {raw!r}")
    return tuple(raw)


def _str_pairs(raw: object) -> tuple[tuple[str, str], ...]:
    # A JSON array of [key, value] arrays when decoding, the command's tuple of pairs when encoding.
    if not isinstance(raw, list | tuple) or type(raw) not in (list, tuple):
        raise TypeError(f"expected a list of [key, value] pairs, got {raw!r}")
    pairs = []
    for pair in raw:
        if not (type(pair) in (list, tuple) and len(pair) == 2 and all(type(text) is str for text in pair)):
            raise TypeError(f"expected a [key, value] pair of strings, got {pair!r}")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _topic_rows(raw: object) -> tuple[TopicRow, ...]:
    # A JSON array of [topic, read, write, perm, sysFlag] arrays, or the command's tuple of them.
    if not isinstance(raw, list | tuple) or type(raw) not in (list, tuple):
        raise TypeError(f"expected a list of topic rows, got {raw!r}")
    rows = []
    for row in raw:
        if not (type(row) in (list, tuple) and len(row) == 5 and type(row[0]) is str
                and all(type(n) is int for n in row[1:])):
            raise TypeError(f"expected a [topic, read, write, perm, sysFlag] row, got {row!r}")
        rows.append((row[0], row[1], row[2], row[3], row[4]))
    return tuple(rows)


def group_rows(raw: object) -> tuple[GroupRow, ...]:
    """Broker group rows (GroupRow) from JSON arrays (or the command's tuples); TypeError naming
    the first row that has the wrong shape. Whether the rows make sense together (the master a
    registered id, ...) is fsm._state's check_import_groups."""
    if not isinstance(raw, list | tuple) or type(raw) not in (list, tuple):
        raise TypeError(f"expected a list of broker group rows, got {raw!r}")
    return tuple(_group_row(position, row) for position, row in enumerate(raw))


def _group_row(position: int, row: Any) -> GroupRow:  # a decoded JSON value: every field checked here
    if not (type(row) in (list, tuple) and len(row) == 8):
        raise TypeError(f"group row {position} is not an array of 8 fields")
    cluster, name, next_id, replicas, master, master_epoch, sync_state_set, sync_state_set_epoch = row
    if not (type(cluster) is str and type(name) is str and type(next_id) is int and type(master_epoch) is int
            and type(sync_state_set_epoch) is int and (master is None or type(master) is int)):
        raise TypeError(f"group row {position} has a field of the wrong type")
    if type(replicas) not in (list, tuple) or not all(
            type(r) in (list, tuple) and len(r) == 3 and type(r[0]) is int and type(r[1]) is str
            and type(r[2]) is str for r in replicas):
        raise TypeError(f"group row {position}: replicas must be [brokerId, address, checkCode] arrays")
    return (cluster, name, next_id, tuple((r[0], r[1], r[2]) for r in replicas), master, master_epoch,
            _int_tuple(sync_state_set), sync_state_set_epoch)


def _candidate_rows(raw: object) -> tuple[CandidateRow, ...]:
    # A JSON array of [brokerId, epoch, maxOffset, priority, inSync] arrays, or the command's tuple.
    if not isinstance(raw, list | tuple) or type(raw) not in (list, tuple):
        raise TypeError(f"expected a list of candidate rows, got {raw!r}")
    rows = []
    for row in raw:
        if not (type(row) in (list, tuple) and len(row) == 5 and all(type(n) is int for n in row[:4])
                and type(row[4]) is bool):
            raise TypeError(f"expected a [brokerId, epoch, maxOffset, priority, inSync] row, got {row!r}")
        rows.append((row[0], row[1], row[2], row[3], row[4]))
    return tuple(rows)


def _reason(raw: object) -> ElectionReason:
    if not isinstance(raw, str):
        raise TypeError(f"expected an election reason, got {raw!r}")
    return ElectionReason(raw)  # ValueError for an unknown name


def _trigger(raw: object) -> Trigger:
    if not isinstance(raw, str):
        raise TypeError(f"expected a trigger name, got {raw!r}")
    return Trigger(raw)  # ValueError for an unknown name


def _operator_action(raw: object) -> OperatorAction:
    if not isinstance(raw, str):
        raise TypeError(f"expected an operator action name, got {raw!r}")
    return OperatorAction(raw)  # ValueError for an unknown name


def _origin(raw: object) -> Origin:
    # A JSON object when decoding, the command's Origin when encoding; unknown keys are ignored.
    if isinstance(raw, Origin):
        access_key, address, node = raw.access_key, raw.address, raw.node
    elif isinstance(raw, dict):
        get = raw.get
        access_key, address, node = get("access_key"), get("address"), get("node")
    else:
        raise TypeError(f"expected an origin object, got {raw!r}")
    # written out, not a loop: this runs for every command encoded and decoded
    if not ((access_key is None or type(access_key) is str) and (address is None or type(address) is str)
            and (node is None or type(node) is str)):
        raise TypeError(f"origin fields must be strings or null, got {raw!r}")
    if isinstance(raw, Origin):
        return raw
    origin: Origin = _new(Origin)  # stored as _decoded stores a command (the checks are done)
    _set_access_key(origin, access_key)
    _set_address(origin, address)
    _set_node(origin, node)
    return origin


# by name: every field of Origin (tests/fsm compares decoded origins with constructed ones)
_set_access_key, _set_address, _set_node = (getattr(Origin, name).__set__ for name in ("access_key", "address", "node"))


def _optional(check: Callable[[object], object]) -> Callable[[object], object]:
    return lambda raw: None if raw is None else check(raw)


# Annotation (as written in the dataclasses above) -> the check of its JSON value.
_CHECKS: dict[str, Callable[[object], object]] = {
    "str": _exactly(str),
    "int": _exactly(int),
    "bool": _exactly(bool),
    "Trigger": _trigger,
    "OperatorAction": _operator_action,
    "ElectionReason | None": _optional(_reason),
    "tuple[CandidateRow, ...]": _candidate_rows,
    "str | None": _optional(_exactly(str)),
    "int | None": _optional(_exactly(int)),
    "tuple[int, ...]": _int_tuple,
    "tuple[int, ...] | None": _optional(_int_tuple),
    "Origin | None": _optional(_origin),
    "tuple[tuple[str, str], ...]": _str_pairs,
    "tuple[TopicRow, ...]": _topic_rows,
    "tuple[GroupRow, ...]": group_rows,
}


def _field_specs(cls: type) -> tuple[tuple[str, Callable[[object], object], object], ...]:
    return tuple(
        (f.name, _CHECKS[str(f.type)], _MISSING_FIELD if f.default is MISSING else f.default) for f in fields(cls)
    )


_FIELD_SPECS: dict[type, tuple[tuple[str, Callable[[object], object], object], ...]] = {
    cls: _field_specs(cls) for cls in COMMAND_TAGS
}

# Annotations whose check only asks for exactly one JSON type (or null): a value of that type
# passes unchanged, so encode and decode test it inline (a call per field was a third of the
# cost of decoding an entry, on every node; issue 21).
_EXACT_TYPES: dict[str, type] = {"str": str, "int": int, "bool": bool, "str | None": str, "int | None": int}


_FieldSpec = tuple[str, Callable[[object], object], object]
_FieldRow = tuple[str, type | None, bool, _FieldSpec, Callable[[object, object], None]]


def _field_rows(cls: type) -> tuple[_FieldRow, ...]:
    """Per field: its name, the one exact type its check accepts as is (or None), whether null
    is allowed, its spec, and the setter of its slot."""
    return tuple(
        (f.name, _EXACT_TYPES.get(str(f.type)), str(f.type).endswith(" | None"), spec, getattr(cls, f.name).__set__)
        for f, spec in zip(fields(cls), _FIELD_SPECS[cls], strict=True)
    )


_FIELD_ROWS = {cls: _field_rows(cls) for cls in COMMAND_TAGS}
