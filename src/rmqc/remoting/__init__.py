"""rmqc.remoting: the sans-IO RocketMQ remoting codec (spec section 1), in the manner of h11.

Bytes in, commands out (`FrameDecoder.feed`); commands in, bytes out (`encode`). No sockets, no clocks,
no trio: the Trio shells (node/, client/) move the bytes and close the connection when the decoder
raises `RemotingProtocolError`. A server connection's decisions (its bounds, back-pressure and idle
deadline) are `RemotingConnection`'s, and what a new connection to the port is, `classify_opening`'s.
"""

from rmqc.remoting._builders import make_request as make_request, make_response as make_response
from rmqc.remoting._codes import (
    LEADER_ONLY_REQUESTS as LEADER_ONLY_REQUESTS,
    LEADER_WRITE_REQUESTS as LEADER_WRITE_REQUESTS,
    NAMESRV_READ_REQUESTS as NAMESRV_READ_REQUESTS,
    NAMESRV_WRITE_REQUESTS as NAMESRV_WRITE_REQUESTS,
    READ_REQUESTS as READ_REQUESTS,
    RMQC_EVENTS as RMQC_EVENTS,
    RMQC_IMPORT_GROUPS as RMQC_IMPORT_GROUPS,
    RMQC_MEMBERS_ADD as RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_LIST as RMQC_MEMBERS_LIST,
    RMQC_MEMBERS_PROMOTE as RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE as RMQC_MEMBERS_REMOVE,
    RMQC_NODE_STATUS as RMQC_NODE_STATUS,
    RMQC_PRIVATE_REQUESTS as RMQC_PRIVATE_REQUESTS,
    RMQC_RECORD_OPERATION as RMQC_RECORD_OPERATION,
    RMQC_SNAPSHOT_SAVE as RMQC_SNAPSHOT_SAVE,
    RMQC_TRANSFER_LEADER as RMQC_TRANSFER_LEADER,
    LanguageCode as LanguageCode,
    RequestCode as RequestCode,
    ResponseCode as ResponseCode,
)
from rmqc.remoting._command import (
    ONEWAY_FLAG as ONEWAY_FLAG,
    RESPONSE_FLAG as RESPONSE_FLAG,
    RemotingCommand as RemotingCommand,
    SerializeType as SerializeType,
)
from rmqc.remoting._connection import (
    MAX_IN_FLIGHT_PER_CONNECTION as MAX_IN_FLIGHT_PER_CONNECTION,
    MAX_UNSENT_BYTES_PER_CONNECTION as MAX_UNSENT_BYTES_PER_CONNECTION,
    IdleTimeout as IdleTimeout,
    RemotingConnection as RemotingConnection,
    RequestsInFlightExceeded as RequestsInFlightExceeded,
)
from rmqc.remoting._errors import FrameTooLarge as FrameTooLarge, RemotingProtocolError as RemotingProtocolError
from rmqc.remoting._ext_fields import ext_fields_from as ext_fields_from
from rmqc.remoting._fastjson import dumps_fastjson as dumps_fastjson, loads_fastjson as loads_fastjson
from rmqc.remoting._frames import (
    DEFAULT_MAX_FRAME_BYTES as DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder as FrameDecoder,
    encode as encode,
)
from rmqc.remoting._opening import (
    FIRST_BYTES_TIMEOUT_S as FIRST_BYTES_TIMEOUT_S,
    TLS_HANDSHAKE_RECORD as TLS_HANDSHAKE_RECORD,
    Opening as Opening,
    classify_opening as classify_opening,
    first_bytes_timeout_s as first_bytes_timeout_s,
)
from rmqc.remoting._properties import dumps_properties as dumps_properties, loads_properties as loads_properties

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FIRST_BYTES_TIMEOUT_S",
    "LEADER_ONLY_REQUESTS",
    "LEADER_WRITE_REQUESTS",
    "MAX_IN_FLIGHT_PER_CONNECTION",
    "MAX_UNSENT_BYTES_PER_CONNECTION",
    "NAMESRV_READ_REQUESTS",
    "NAMESRV_WRITE_REQUESTS",
    "ONEWAY_FLAG",
    "READ_REQUESTS",
    "RESPONSE_FLAG",
    "TLS_HANDSHAKE_RECORD",
    "FrameDecoder",
    "FrameTooLarge",
    "IdleTimeout",
    "LanguageCode",
    "Opening",
    "RemotingCommand",
    "RemotingConnection",
    "RemotingProtocolError",
    "RequestCode",
    "RequestsInFlightExceeded",
    "ResponseCode",
    "SerializeType",
    "classify_opening",
    "dumps_fastjson",
    "dumps_properties",
    "encode",
    "ext_fields_from",
    "first_bytes_timeout_s",
    "loads_fastjson",
    "loads_properties",
    "make_request",
    "make_response",
]
