"""The 904 (BROKER_HEARTBEAT) header as a liveness `Heartbeat`, in one pass.

904 is the hottest request (one per broker per second per node), so `heartbeat_of` skips the
generic per-field decoding when every number is plain ASCII digits (what brokers send): one regex
checks all six and only the int fields need a range check. Anything else (a sign, an empty or
missing field, a 19-digit value, other digits) takes `HEARTBEAT.decode`, which keeps Java's
defaults and errors. Both give the same result for every header (tests compare them).
"""

from __future__ import annotations

import re
from operator import itemgetter

from rmqc.liveness import BrokerKey, Heartbeat
from rmqc.remoting import RemotingCommand

from ._headers import INT_MAX, HeaderField, HeaderSpec

__all__ = ["HEARTBEAT", "heartbeat_of"]

F = HeaderField
HEARTBEAT = HeaderSpec(
    F("clusterName", required="cf"), F("brokerAddr", required="cf"), F("brokerName", required="cf"),
    F("brokerId", "long"), F("epoch", "int", -1), F("maxOffset", "long", -1),
    F("confirmOffset", "long", -1), F("heartbeatTimeoutMills", "long", 10_000),
    F("electionPriority", "int", 2_147_483_647),
)
# The six numbers of a broker's 904 as one text, each plain ASCII digits: up to 18 always fit a
# Java long (19 may not), so only the two int fields need a range check after int().
_PLAIN_NUMBERS = re.compile(r"\d{1,18}(?:,\d{1,18}){5}", re.ASCII).fullmatch
# Every field a broker sends, in one C call (KeyError if any is missing).
_HEARTBEAT_FIELDS = itemgetter(*(field.name for field in HEARTBEAT.fields))
# The same tuples BrokerKey(...) and Heartbeat(...) build, without NamedTuple's Python-level __new__.
_new_tuple = tuple.__new__


def heartbeat_of(request: RemotingCommand) -> Heartbeat | None:
    """The heartbeat a 904 with extFields carries, or None when it has no usable brokerId (Java
    answers 2005). Raises MissingHeaderField for a missing cluster, address or broker name.
    A 904 without extFields is the caller's to refuse (Java does not decode it at all)."""
    assert request.ext_fields is not None, "the caller refuses a 904 without extFields"
    try:
        cluster, address, name, broker_id, epoch, max_offset, confirm_offset, timeout_ms, priority = (
            _HEARTBEAT_FIELDS(request.ext_fields))
    except KeyError:  # a field is missing: its default, or MissingHeaderField, as the checked path says
        return heartbeat_checked(request)
    if _PLAIN_NUMBERS(f"{broker_id},{epoch},{max_offset},{confirm_offset},{timeout_ms},{priority}"):
        epoch, priority = int(epoch), int(priority)
        if epoch <= INT_MAX and priority <= INT_MAX:
            key = _new_tuple(BrokerKey, (cluster, name, int(broker_id)))
            return _new_tuple(Heartbeat, (key, address, int(timeout_ms), epoch, int(max_offset),
                                          int(confirm_offset), priority))
    return heartbeat_checked(request)


def heartbeat_checked(request: RemotingCommand) -> Heartbeat | None:
    """`heartbeat_of` through the generic header decoding, field by field."""
    h = HEARTBEAT.decode(request)
    if h["brokerId"] is None:
        return None
    key = BrokerKey(h["clusterName"], h["brokerName"], h["brokerId"])
    return Heartbeat(key, h["brokerAddr"], h["heartbeatTimeoutMills"], h["epoch"], h["maxOffset"],
                     h["confirmOffset"], h["electionPriority"])
