"""Who asked (the audit of design.md "Trust"), as it travels with a forwarded request.

A follower that forwards a request to the leader writes the caller's `Origin` into the copy it
forwards (ext field ORIGIN_FIELD) and the leader records it as is: peer links are authenticated,
and only a request that came over one is read this way (`forwarded_origin`). The field is never
read from a client's own request (and a forwarding follower overwrites it), so a client cannot
choose its origin. Where a client's origin comes from (its connection) is the shell's business:
node/_audit.py.
"""

from __future__ import annotations

import dataclasses

import orjson

from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand

ORIGIN_FIELD = "rmqcOrigin"
# What a forwarded request without ORIGIN_FIELD records (a follower of an rmqc before the audit,
# during a rolling upgrade): someone, somewhere.
UNKNOWN_FORWARDED = Origin(None, "?", None)


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
