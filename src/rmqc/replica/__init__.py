"""rmqc.replica: the sans-IO controller node (driver, group commit, reads, forwarding, liveness and
elections, notifier decisions) that both `rmqc serve` (rmqc.node, the Trio shell) and the simulator
run. No trio, no sockets, no clocks, no threads: see _io.py for the contract."""

from ._alarms import (
    DISK_FULL as DISK_FULL,
    DISK_FULL_RETRY_MS as DISK_FULL_RETRY_MS,
    REPAIRING as REPAIRING,
    DiskFullAlarm as DiskFullAlarm,
)
from ._audit import client_origin as client_origin
from ._driver import FEED_ENTRIES as FEED_ENTRIES, FEED_MESSAGES as FEED_MESSAGES
from ._events import (
    FAILOVER_STEPS as FAILOVER_STEPS,
    MAX_EVENTS_PER_PAGE as MAX_EVENTS_PER_PAGE,
    NOTIFIED as NOTIFIED,
    BadEventsRequest as BadEventsRequest,
    EventLog as EventLog,
    EventPage as EventPage,
    EventsQuery as EventsQuery,
    events_answer as events_answer,
    events_query as events_query,
    is_failover as is_failover,
)
from ._failovers import (
    MAX_FAILOVERS_KEPT as MAX_FAILOVERS_KEPT,
    Failover as Failover,
    FailoverHistory as FailoverHistory,
)
from ._health import (
    DISK_PROBE_BOUND_S as DISK_PROBE_BOUND_S,
    LIVENESS_CHECKS as LIVENESS_CHECKS,
    LOOP_BOUND_S as LOOP_BOUND_S,
    READINESS_CHECKS as READINESS_CHECKS,
    READY_MAX_LAG_ENTRIES as READY_MAX_LAG_ENTRIES,
    WRITE_BOUND_S as WRITE_BOUND_S,
    DiskProbe as DiskProbe,
    HealthCheck as HealthCheck,
    HealthVerdict as HealthVerdict,
    disk_check as disk_check,
    endpoint_checks as endpoint_checks,
    health_verdict as health_verdict,
    loop_check as loop_check,
    readiness_checks as readiness_checks,
    writes_check as writes_check,
)
from ._io import (
    Action as Action,
    Answer as Answer,
    Clock as Clock,
    ForwardRequest as ForwardRequest,
    MembersChanged as MembersChanged,
    Notify as Notify,
    Observer as Observer,
    Outbox as Outbox,
    PeerLag as PeerLag,
    ReplicaConfig as ReplicaConfig,
    ReplicaStatus as ReplicaStatus,
    ReplicaStorage as ReplicaStorage,
    SaveNow as SaveNow,
    Saver as Saver,
    SendDigest as SendDigest,
    SendRaft as SendRaft,
    SnapshotOutcome as SnapshotOutcome,
    StopProcess as StopProcess,
    WriteSnapshot as WriteSnapshot,
)
from ._notify import (
    NotifierState as NotifierState,
    PendingNotifications as PendingNotifications,
    master_epoch_of as master_epoch_of,
)
from ._proposals import (
    COMMIT_TIMEOUT_REMARK as COMMIT_TIMEOUT_REMARK,
    NOT_LEADER_REMARK as NOT_LEADER_REMARK,
    RequestFailed as RequestFailed,
)
from ._reads import CONSISTENCY_LEVELS as CONSISTENCY_LEVELS
from ._replica import (
    KEEP_CURRENT_MASTER as KEEP_CURRENT_MASTER,
    SUCCESSOR_GRACE_MS as SUCCESSOR_GRACE_MS,
    Replica as Replica,
)
from ._runner import Runner as Runner
from ._status import (
    STATUS_VERSION as STATUS_VERSION,
    status_answer as status_answer,
    status_document as status_document,
)
