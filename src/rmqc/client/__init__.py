"""rmqc.client: the Trio client for RocketMQ 5 controllers (rmqc or Java).

`ControllerClient` is used as `async with ControllerClient(["127.0.0.1:9878"]) as client:`. asyncio
programs use `rmqc.client.asyncio_client` (through trio-asyncio).
"""

from rmqc.acl import Credentials as Credentials
from rmqc.client._client import (
    CONSISTENCY_LEVELS as CONSISTENCY_LEVELS,
    ControllerClient as ControllerClient,
    heartbeat_ext as heartbeat_ext,
)
from rmqc.client._errors import (
    ClientClosed as ClientClosed,
    ClientError as ClientError,
    ConnectionLost as ConnectionLost,
    NoLeaderError as NoLeaderError,
    NotLeaderError as NotLeaderError,
    RequestTimeout as RequestTimeout,
    RetriesExhausted as RetriesExhausted,
    TooManyConnections as TooManyConnections,
    TooManyInFlight as TooManyInFlight,
)
from rmqc.client._join import (
    JoinAttempts as JoinAttempts,
    JoinFailed as JoinFailed,
    join_credentials as join_credentials,
)
from rmqc.client._members import (
    MemberChangeFailed as MemberChangeFailed,
    members_of as members_of,
    replace_member as replace_member,
)
from rmqc.client._node_status import node_views as node_views
from rmqc.client._tls import client_tls_context as client_tls_context

__all__ = [
    "CONSISTENCY_LEVELS",
    "ClientClosed",
    "ClientError",
    "ConnectionLost",
    "ControllerClient",
    "Credentials",
    "JoinAttempts",
    "JoinFailed",
    "MemberChangeFailed",
    "NoLeaderError",
    "NotLeaderError",
    "RequestTimeout",
    "RetriesExhausted",
    "TooManyConnections",
    "TooManyInFlight",
    "client_tls_context",
    "heartbeat_ext",
    "join_credentials",
    "members_of",
    "node_views",
    "replace_member",
]
