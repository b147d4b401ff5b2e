"""rmqc.raft: the pure Raft core (etcd raft's shape): RawNode + Ready, MemoryStorage, types.

No I/O, no clocks, no threads: time enters as tick(), randomness as an injected random.Random.
The application loop is: persist (storage.save), send, apply, then RawNode.advance (see _rawnode).
"""

from ._confchange import (
    conf_state_after as conf_state_after,
    decode_conf_change as decode_conf_change,
    encode_conf_change as encode_conf_change,
)
from ._config import Config as Config, Role as Role
from ._core import (
    CAMPAIGN_TAKEOVER as CAMPAIGN_TAKEOVER,
    CAMPAIGN_TRANSFER as CAMPAIGN_TRANSFER,
    RepairState as RepairState,
)
from ._describe import (
    describe_entry as describe_entry,
    describe_hard_state as describe_hard_state,
    describe_message as describe_message,
    describe_ready as describe_ready,
)
from ._errors import (
    ConfChangeRefused as ConfChangeRefused,
    InflightsFull as InflightsFull,
    NoLeader as NoLeader,
    NotLeader as NotLeader,
    RaftInvariantError as RaftInvariantError,
    ReadIndexDropped as ReadIndexDropped,
    ReadyMisuse as ReadyMisuse,
    StaleTermProposal as StaleTermProposal,
    TransferInProgress as TransferInProgress,
    UncommittedSizeExceeded as UncommittedSizeExceeded,
)
from ._memory_storage import MemoryStorage as MemoryStorage
from ._progress import ProgressState as ProgressState
from ._quorum import has_quorum as has_quorum
from ._rawnode import RawNode as RawNode
from ._ready import (
    LeaseStatus as LeaseStatus,
    ProgressStatus as ProgressStatus,
    ReadState as ReadState,
    Ready as Ready,
    SoftState as SoftState,
    Status as Status,
)
from ._storage import Storage as Storage
from ._types import (
    ConfChange as ConfChange,
    ConfChangeType as ConfChangeType,
    ConfState as ConfState,
    Entry as Entry,
    EntryType as EntryType,
    HardState as HardState,
    Message as Message,
    MessageType as MessageType,
    Snapshot as Snapshot,
    SnapshotMeta as SnapshotMeta,
)

__all__ = [
    "CAMPAIGN_TAKEOVER",
    "CAMPAIGN_TRANSFER",
    "ConfChange",
    "ConfChangeRefused",
    "ConfChangeType",
    "ConfState",
    "Config",
    "Entry",
    "EntryType",
    "HardState",
    "InflightsFull",
    "LeaseStatus",
    "MemoryStorage",
    "Message",
    "MessageType",
    "NoLeader",
    "NotLeader",
    "ProgressState",
    "ProgressStatus",
    "RaftInvariantError",
    "RawNode",
    "ReadIndexDropped",
    "ReadState",
    "Ready",
    "ReadyMisuse",
    "Role",
    "Snapshot",
    "SnapshotMeta",
    "SoftState",
    "StaleTermProposal",
    "Status",
    "Storage",
    "TransferInProgress",
    "UncommittedSizeExceeded",
    "conf_state_after",
    "decode_conf_change",
    "describe_entry",
    "describe_hard_state",
    "describe_message",
    "describe_ready",
    "encode_conf_change",
    "has_quorum",
]
