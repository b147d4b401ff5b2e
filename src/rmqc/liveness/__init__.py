"""rmqc.liveness: the heartbeat table (spec section 6) with deadline expiry and follower digests.

Pure: time enters as `now_ms` arguments (one monotonic clock, never the wall clock); channels are
opaque hashable ids chosen by the server.
"""

from ._stall import (
    MASS_EXPIRY_MASTERS as MASS_EXPIRY_MASTERS,
    STALL_TOLERANCE_S as STALL_TOLERANCE_S,
    MassExpiry as MassExpiry,
    StallMeter as StallMeter,
)
from ._table import (
    DEFAULT_ELECTION_PRIORITY as DEFAULT_ELECTION_PRIORITY,
    DEFAULT_HEARTBEAT_TIMEOUT_MS as DEFAULT_HEARTBEAT_TIMEOUT_MS,
    DEFAULT_MAX_BROKERS as DEFAULT_MAX_BROKERS,
    BrokerKey as BrokerKey,
    Digest as Digest,
    DigestDecodeError as DigestDecodeError,
    Heartbeat as Heartbeat,
    HeartbeatTable as HeartbeatTable,
    LiveInfo as LiveInfo,
    LivenessTableFull as LivenessTableFull,
)
