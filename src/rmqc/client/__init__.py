"""rmqc.client: the Trio client for RocketMQ 5 controllers (rmqc or Java).

`ControllerClient` is used as `async with ControllerClient(["127.0.0.1:9878"]) as client:`. asyncio
programs use `rmqc.client.asyncio_client` (through trio-asyncio).
"""

from rmqc.acl import Credentials as Credentials
from rmqc.client._client import CONSISTENCY_LEVELS as CONSISTENCY_LEVELS
from rmqc.client._client import ControllerClient as ControllerClient
from rmqc.client._client import heartbeat_ext as heartbeat_ext
from rmqc.client._errors import ClientClosed as ClientClosed
from rmqc.client._errors import ClientError as ClientError
from rmqc.client._errors import ConnectionLost as ConnectionLost
from rmqc.client._errors import NoLeaderError as NoLeaderError
from rmqc.client._errors import NotLeaderError as NotLeaderError
from rmqc.client._errors import RequestTimeout as RequestTimeout
from rmqc.client._errors import RetriesExhausted as RetriesExhausted
from rmqc.client._errors import TooManyConnections as TooManyConnections
from rmqc.client._errors import TooManyInFlight as TooManyInFlight
from rmqc.client._tls import client_tls_context as client_tls_context

__all__ = [
    "CONSISTENCY_LEVELS",
    "ClientClosed",
    "ClientError",
    "ConnectionLost",
    "ControllerClient",
    "Credentials",
    "NoLeaderError",
    "NotLeaderError",
    "RequestTimeout",
    "RetriesExhausted",
    "TooManyConnections",
    "TooManyInFlight",
    "client_tls_context",
    "heartbeat_ext",
]
