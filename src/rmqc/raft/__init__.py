"""rmqc.raft: the pure Raft core (etcd raft's shape): RawNode + Ready, MemoryStorage, types.

No I/O, no clocks, no threads: time enters as tick(), randomness as an injected random.Random.
The application loop is: persist (storage.save), send, apply, then RawNode.advance (see _rawnode).
"""

from ._config import Config as Config
from ._config import Role as Role
from ._confchange import decode_conf_change as decode_conf_change
from ._confchange import encode_conf_change as encode_conf_change
from ._core import CAMPAIGN_TAKEOVER as CAMPAIGN_TAKEOVER
from ._core import CAMPAIGN_TRANSFER as CAMPAIGN_TRANSFER
from ._describe import describe_entry as describe_entry
from ._describe import describe_hard_state as describe_hard_state
from ._describe import describe_message as describe_message
from ._describe import describe_ready as describe_ready
from ._errors import ConfChangeRefused as ConfChangeRefused
from ._errors import InflightsFull as InflightsFull
from ._errors import NoLeader as NoLeader
from ._errors import NotLeader as NotLeader
from ._errors import RaftInvariantError as RaftInvariantError
from ._errors import ReadIndexDropped as ReadIndexDropped
from ._errors import ReadyMisuse as ReadyMisuse
from ._errors import StaleTermProposal as StaleTermProposal
from ._errors import TransferInProgress as TransferInProgress
from ._errors import UncommittedSizeExceeded as UncommittedSizeExceeded
from ._memory_storage import MemoryStorage as MemoryStorage
from ._progress import ProgressState as ProgressState
from ._rawnode import RawNode as RawNode
from ._ready import ProgressStatus as ProgressStatus
from ._ready import ReadState as ReadState
from ._ready import Ready as Ready
from ._ready import SoftState as SoftState
from ._ready import Status as Status
from ._storage import Storage as Storage
from ._types import ConfChange as ConfChange
from ._types import ConfChangeType as ConfChangeType
from ._types import ConfState as ConfState
from ._types import Entry as Entry
from ._types import EntryType as EntryType
from ._types import HardState as HardState
from ._types import Message as Message
from ._types import MessageType as MessageType
from ._types import Snapshot as Snapshot
from ._types import SnapshotMeta as SnapshotMeta

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
    "SoftState",
    "StaleTermProposal",
    "Snapshot",
    "SnapshotMeta",
    "Status",
    "Storage",
    "TransferInProgress",
    "UncommittedSizeExceeded",
    "decode_conf_change",
    "describe_entry",
    "describe_hard_state",
    "describe_message",
    "describe_ready",
    "encode_conf_change",
]
