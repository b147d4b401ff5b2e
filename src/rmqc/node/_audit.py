"""Who asked (the audit of design.md "Trust"): the `Origin` every command of a request records.

A request from a client: the ACL access key it was admitted under (only with `acl_enabled`; without
it a key is an unverified claim, recorded as anonymous), the address it came from, and this node.
A follower that forwards a request to the leader writes that origin into the copy it forwards (ext
field ORIGIN_FIELD) and the leader records it as is: peer links are authenticated, and only a
request that came over one is served on FORWARD_CHANNEL. The field is never read from a client's
own request (and a forwarding follower overwrites it), so a client cannot choose its origin.
"""

from __future__ import annotations

import dataclasses

import orjson

from rmqc.acl import ACCESS_KEY
from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand

from ._config import NodeConfig
from ._server import Channel

ORIGIN_FIELD = "rmqcOrigin"
# The channel of requests a follower forwarded to this node (the leader) over a peer link.
FORWARD_CHANNEL = Channel(0, "forwarded")
# What a forwarded request without ORIGIN_FIELD records (a follower of an rmqc before the audit,
# during a rolling upgrade): someone, somewhere.
UNKNOWN_FORWARDED = Origin(None, "?", None)


def origin_of(request: RemotingCommand, channel: Channel, config: NodeConfig) -> Origin:
    if channel is FORWARD_CHANNEL:
        return _forwarded_origin(request)
    access_key = request.ext(ACCESS_KEY) if config.acl_enabled else None
    return Origin(access_key, channel.remote, config.node_id)


def with_origin(request: RemotingCommand, origin: Origin) -> RemotingCommand:
    """A copy of `request` that tells the leader `origin` (the caller's own fields unchanged)."""
    fields = dict(request.ext_fields or {})
    fields[ORIGIN_FIELD] = orjson.dumps([origin.access_key, origin.address, origin.node]).decode()
    return dataclasses.replace(request, ext_fields=fields)


def _forwarded_origin(request: RemotingCommand) -> Origin:
    raw = request.ext(ORIGIN_FIELD)
    if raw is None:
        return UNKNOWN_FORWARDED
    try:
        values = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return UNKNOWN_FORWARDED
    if not (isinstance(values, list) and len(values) == 3
            and all(value is None or type(value) is str for value in values)):
        return UNKNOWN_FORWARDED
    return Origin(*values)
