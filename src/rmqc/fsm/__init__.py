"""rmqc.fsm: the replicated controller state (spec section 4), commands, apply, snapshot, export.

Pure: no I/O, no clock, no threads. Every replica applying the same commands in the same order
reaches the same state and the same results.
"""

from ._commands import (
    COMMAND_TAGS as COMMAND_TAGS,
    MAX_COMMANDS_PER_ENTRY as MAX_COMMANDS_PER_ENTRY,
    AlterSyncStateSet as AlterSyncStateSet,
    ApplyBrokerId as ApplyBrokerId,
    CandidateRow as CandidateRow,
    CleanBrokerData as CleanBrokerData,
    Command as Command,
    DeleteKvConfig as DeleteKvConfig,
    DeleteTopicRoute as DeleteTopicRoute,
    ElectionReason as ElectionReason,
    ElectMaster as ElectMaster,
    GroupRow as GroupRow,
    ImportGroups as ImportGroups,
    NamesrvCommand as NamesrvCommand,
    NotificationSent as NotificationSent,
    OperatorAction as OperatorAction,
    Origin as Origin,
    PutKvConfig as PutKvConfig,
    RecordOperation as RecordOperation,
    RegisterBrokerRoute as RegisterBrokerRoute,
    RegisterTopicRoute as RegisterTopicRoute,
    SetWritePermOfBroker as SetWritePermOfBroker,
    TopicRow as TopicRow,
    Trigger as Trigger,
    UnregisterBrokerRoute as UnregisterBrokerRoute,
    UpdateBrokerAddress as UpdateBrokerAddress,
    UpdateControllerConfig as UpdateControllerConfig,
    command_tag as command_tag,
    decode_commands as decode_commands,
    encode_commands as encode_commands,
    encode_commands_as_decoded as encode_commands_as_decoded,
    group_rows as group_rows,
)
from ._describe import (
    describe_command as describe_command,
    describe_entry as describe_entry,
    describe_origin as describe_origin,
)
from ._errors import CommandDecodeError as CommandDecodeError, TooManyCommands as TooManyCommands
from ._export import (
    EXPORT_COLUMN_NAMES as EXPORT_COLUMN_NAMES,
    EXPORT_COLUMNS as EXPORT_COLUMNS,
    HistoryExporter as HistoryExporter,
)
from ._model import BrokerGroup as BrokerGroup, Replica as Replica
from ._namesrv import (
    MASTER_ID as MASTER_ID,
    MAX_CACHED_ROUTES as MAX_CACHED_ROUTES,
    MAX_KV_ENTRIES as MAX_KV_ENTRIES,
    MAX_KV_VALUE_BYTES as MAX_KV_VALUE_BYTES,
    MAX_NAME_BYTES as MAX_NAME_BYTES,
    MAX_REGISTRATIONS as MAX_REGISTRATIONS,
    MAX_TOPICS as MAX_TOPICS,
    MAX_TOPICS_PER_REGISTRATION as MAX_TOPICS_PER_REGISTRATION,
    NamesrvRefused as NamesrvRefused,
    NamesrvState as NamesrvState,
    QueueData as QueueData,
    Registration as Registration,
    check_kv as check_kv,
    check_topic as check_topic,
    registration_of as registration_of,
)
from ._replay import Applied as Applied, apply_entry as apply_entry, replay as replay
from ._state import (
    MAX_GROUPS as MAX_GROUPS,
    MAX_REPLICAS_PER_GROUP as MAX_REPLICAS_PER_GROUP,
    ApplyResult as ApplyResult,
    ApplyStatus as ApplyStatus,
    ControllerState as ControllerState,
    StateCapture as StateCapture,
    check_alter_sync_state_set as check_alter_sync_state_set,
    check_apply_broker_id as check_apply_broker_id,
    check_elect_master as check_elect_master,
    check_import_groups as check_import_groups,
    group_of_row as group_of_row,
    row_of_group as row_of_group,
)
