"""rmqc.replica: the sans-IO controller node (driver, group commit, reads, forwarding, liveness and
elections, notifier decisions) that both `rmqc serve` (rmqc.node, the Trio shell) and the simulator
run. No trio, no sockets, no clocks, no threads: see _io.py for the contract."""

from ._alarms import DISK_FULL as DISK_FULL
from ._alarms import DISK_FULL_RETRY_MS as DISK_FULL_RETRY_MS
from ._alarms import DiskFullAlarm as DiskFullAlarm
from ._driver import FEED_ENTRIES as FEED_ENTRIES
from ._driver import FEED_MESSAGES as FEED_MESSAGES
from ._io import (
    Action as Action,
)
from ._io import (
    Answer as Answer,
)
from ._io import (
    Clock as Clock,
)
from ._io import (
    ForwardRequest as ForwardRequest,
)
from ._io import (
    Notify as Notify,
)
from ._io import (
    Observer as Observer,
)
from ._io import (
    Outbox as Outbox,
)
from ._io import (
    PeerLag as PeerLag,
)
from ._io import (
    ReplicaConfig as ReplicaConfig,
)
from ._io import (
    ReplicaStatus as ReplicaStatus,
)
from ._io import (
    ReplicaStorage as ReplicaStorage,
)
from ._io import (
    SendDigest as SendDigest,
)
from ._io import (
    SendRaft as SendRaft,
)
from ._io import (
    SnapshotOutcome as SnapshotOutcome,
)
from ._io import (
    StopProcess as StopProcess,
)
from ._io import (
    WriteSnapshot as WriteSnapshot,
)
from ._notify import PendingNotifications as PendingNotifications
from ._notify import master_epoch_of as master_epoch_of
from ._proposals import (
    COMMIT_TIMEOUT_REMARK as COMMIT_TIMEOUT_REMARK,
)
from ._proposals import (
    NOT_LEADER_REMARK as NOT_LEADER_REMARK,
)
from ._proposals import (
    RequestFailed as RequestFailed,
)
from ._reads import CONSISTENCY_LEVELS as CONSISTENCY_LEVELS
from ._replica import SUCCESSOR_GRACE_MS as SUCCESSOR_GRACE_MS
from ._replica import KEEP_CURRENT_MASTER as KEEP_CURRENT_MASTER
from ._replica import Replica as Replica
from ._status import STATUS_VERSION as STATUS_VERSION, status_answer as status_answer, status_document as status_document
