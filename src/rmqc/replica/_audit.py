"""Who asked (the audit of design.md "Trust"), as it travels with a forwarded request.

A follower that forwards a request to the leader writes the caller's `Origin` into the copy it
forwards (ext field ORIGIN_FIELD) and the leader records it as is: peer links are authenticated,
and only a request that came over one is read this way (`forwarded_origin`). The field is never
read from a client's own request (and a forwarding follower overwrites it), so a client cannot
choose its origin. A client's own request gets its origin from its connection (`client_origin`):
the shell and the simulator hand the replica the address it came from.
"""

from __future__ import annotations

import dataclasses

import orjson

from rmqc.acl import ACCESS_KEY
from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand

ORIGIN_FIELD = "rmqcOrigin"
# What a forwarded request without ORIGIN_FIELD records (a follower of an rmqc before the audit,
# during a rolling upgrade): someone, somewhere.
UNKNOWN_FORWARDED = Origin(None, "?", None)


def client_origin(request: RemotingCommand, address: str, node_id: str, *, acl_enabled: bool) -> Origin:
    """Who asked, for a client's own request that came from `address` to node `node_id`: the ACL
    access key it was admitted under (only with `acl_enabled`; without it a key is an unverified
    claim, recorded as anonymous), the address it came from, and this node."""
    access_key = request.ext(ACCESS_KEY) if acl_enabled else None
    return Origin(access_key, address, node_id)


def with_origin(request: RemotingCommand, origin: Origin) -> RemotingCommand:
    """A copy of `request` that tells the leader `origin` (the caller's own fields unchanged)."""
    fields = dict(request.ext_fields or {})
    fields[ORIGIN_FIELD] = orjson.dumps([origin.access_key, origin.address, origin.node]).decode()
    return dataclasses.replace(request, ext_fields=fields)


def forwarded_origin(request: RemotingCommand) -> Origin:
    """The origin a forwarding follower wrote into `request` (UNKNOWN_FORWARDED if none or bad)."""
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
