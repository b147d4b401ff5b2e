"""Request, response and language codes of the remoting protocol (spec sections 1.2 and 2).

Tables, not branches: callers look codes up here (names for logs, which requests are reads or
leader-only) instead of repeating the numbers.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "LEADER_ONLY_REQUESTS",
    "LEADER_WRITE_REQUESTS",
    "NAMESRV_READ_REQUESTS",
    "NAMESRV_WRITE_REQUESTS",
    "READ_REQUESTS",
    "RMQC_EVENTS",
    "RMQC_IMPORT_GROUPS",
    "RMQC_MEMBERS_ADD",
    "RMQC_MEMBERS_LIST",
    "RMQC_MEMBERS_PROMOTE",
    "RMQC_MEMBERS_REMOVE",
    "RMQC_NODE_STATUS",
    "RMQC_PRIVATE_REQUESTS",
    "RMQC_RECORD_OPERATION",
    "RMQC_SNAPSHOT_SAVE",
    "RMQC_TRANSFER_LEADER",
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
]


class RequestCode(IntEnum):
    """Request codes of spec section 2.1 (plus the nearby non-controller codes it names)."""

    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    WIPE_WRITE_PERM_OF_BROKER = 205
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    NOTIFY_MIN_BROKER_ID_CHANGE = 905
    EXCHANGE_BROKER_HA_INFO = 906
    GET_BROKER_HA_STATUS = 907
    RESET_MASTER_FLUSH_OFFSET = 908
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    BROKER_CLOSE_CHANNEL_REQUEST = 1014
    CHECK_NOT_ACTIVE_BROKER_REQUEST = 1015
    GET_BROKER_LIVE_INFO_REQUEST = 1016
    GET_SYNC_STATE_DATA_REQUEST = 1017
    RAFT_BROKER_HEART_BEAT_EVENT_REQUEST = 1018


class ResponseCode(IntEnum):
    """Response codes of spec section 2.2."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22
    INVALID_PARAMETER = 29
    GO_AWAY = 1500
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016


class LanguageCode(IntEnum):
    """The `language` enum: its name travels in JSON headers, its number in ROCKETMQ headers."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


# Spec 3.0: requests a Java controller executes only on the leader (others answer 2007).
LEADER_ONLY_REQUESTS: frozenset[int] = frozenset(
    {1001, 1002, 1003, 1004, 1006, 1011, 1012, 1013}
)

# The NameServer role (docs/namesrv.md): writes decided by the leader (a follower forwards them;
# 322 only refreshes the leader's liveness of a registration), reads served by every node. 318 and
# 319 are answered by the node asked (its constants; 318 is refused).
NAMESRV_WRITE_REQUESTS: frozenset[int] = frozenset({100, 102, 103, 104, 205, 216, 217, 322, 327})
NAMESRV_READ_REQUESTS: frozenset[int] = frozenset({101, 105, 106, 206, 219, 224})

# Requests that only read state; rmqc lets them name a consistency level (design.md "Read path").
READ_REQUESTS: frozenset[int] = frozenset({1004, 1005, 1006, 1012}) | NAMESRV_READ_REQUESTS

# rmqc's private requests: far above every RocketMQ request code (spec 2.1); Java controllers answer
# them 3 (not supported). Written once here: the node, the CLI, the ACL rights and the metrics use them.
RMQC_NODE_STATUS = 60001  # what one node knows about itself (rmqc status; replica/_status.py)
RMQC_TRANSFER_LEADER = 60002  # move the leadership (rmqc admin transfer-leader; node/_operations.py)
RMQC_SNAPSHOT_SAVE = 60003  # an online backup of the applied state (rmqc admin snapshot save)
# Membership changes (rmqc admin members ...; replica/_membership.py): only the leader decides.
RMQC_MEMBERS_LIST = 60004
RMQC_MEMBERS_ADD = 60005  # extFields id, address: joins as a learner
RMQC_MEMBERS_PROMOTE = 60006  # extFields id: a caught-up learner becomes a voter
RMQC_MEMBERS_REMOVE = 60007  # extFields id
RMQC_EVENTS = 60008  # extFields after, waitMs: the node's recent events (rmqc events; replica/_events.py)
# rmqc migrate from-java: body {"source": text, "groups": [GroupRow arrays]}, one replicated
# ImportGroups (fsm); only the leader decides (a follower forwards it); admin accounts only.
RMQC_IMPORT_GROUPS = 60010
# Between controller nodes only: a follower asks the leader to log an operator request it served
# (replica/_operations.py); refused from a client connection.
RMQC_RECORD_OPERATION = 60020  # extFields action, detail
RMQC_PRIVATE_REQUESTS: dict[int, str] = {
    RMQC_NODE_STATUS: "RMQC_NODE_STATUS",
    RMQC_TRANSFER_LEADER: "RMQC_TRANSFER_LEADER",
    RMQC_SNAPSHOT_SAVE: "RMQC_SNAPSHOT_SAVE",
    RMQC_MEMBERS_LIST: "RMQC_MEMBERS_LIST",
    RMQC_MEMBERS_ADD: "RMQC_MEMBERS_ADD",
    RMQC_MEMBERS_PROMOTE: "RMQC_MEMBERS_PROMOTE",
    RMQC_MEMBERS_REMOVE: "RMQC_MEMBERS_REMOVE",
    RMQC_EVENTS: "RMQC_EVENTS",
    RMQC_RECORD_OPERATION: "RMQC_RECORD_OPERATION",
    RMQC_IMPORT_GROUPS: "RMQC_IMPORT_GROUPS",
}

# The writes only the leader decides (a follower forwards them or answers 2007): Java's leader-only
# requests, 1009 (rmqc replicates it), the NameServer role's writes and the import.
LEADER_WRITE_REQUESTS: frozenset[int] = (LEADER_ONLY_REQUESTS | {int(RequestCode.UPDATE_CONTROLLER_CONFIG)}
                                         | NAMESRV_WRITE_REQUESTS | {RMQC_IMPORT_GROUPS})
