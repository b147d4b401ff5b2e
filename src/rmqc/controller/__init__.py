"""rmqc.controller: request processors (one handler per code), election policy, configuration.

Pure decision logic: no trio, sockets, clocks or threads. The server turns a `RemotingCommand`
into an `Outcome` with `ControllerProcessor.handle`, proposes the commands of a `Propose`, and
answers with `finish(apply_results)`.
"""

from ._config import (
    CONFIG_KEYS as CONFIG_KEYS,
    LIVE_UPDATABLE_KEYS as LIVE_UPDATABLE_KEYS,
    ConfigBlackListed as ConfigBlackListed,
    ConfigInvalid as ConfigInvalid,
    ConfigKey as ConfigKey,
    ControllerConfig as ControllerConfig,
    PropertiesSyntaxError as PropertiesSyntaxError,
    parse_properties as parse_properties,
)
from ._headers import BadRequestBody as BadRequestBody, MissingHeaderField as MissingHeaderField
from ._namesrv_bodies import register_body as register_body
from ._outcome import (
    NodeInfo as NodeInfo,
    NoReply as NoReply,
    Outcome as Outcome,
    Propose as Propose,
    Reply as Reply,
    RequestContext as RequestContext,
)
from ._policy import choose_master as choose_master
from ._processor import NOT_LEADER_REMARK as NOT_LEADER_REMARK, ControllerProcessor as ControllerProcessor
