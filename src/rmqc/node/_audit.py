"""Who asked (the audit of design.md "Trust"): the `Origin` of a client's request, from its
connection. A request from a client: the ACL access key it was admitted under (only with
`acl_enabled`; without it a key is an unverified claim, recorded as anonymous), the address it came
from, and this node. Forwarded requests carry their origin with them (rmqc.replica's
`forwarded_origin`)."""

from __future__ import annotations

from rmqc.acl import ACCESS_KEY
from rmqc.config import NodeConfig
from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand

from ._server import Channel


def origin_of(request: RemotingCommand, channel: Channel, config: NodeConfig) -> Origin:
    access_key = request.ext(ACCESS_KEY) if config.acl_enabled else None
    return Origin(access_key, channel.remote, config.node_id)
