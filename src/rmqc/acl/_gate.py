"""The ACL gate's decision on one request, and its refusal counters, as the remoting port applies
them: allowed, or refused with the NO_PERMISSION answer to send (None for a one-way request, which
has nobody to answer: it is dropped). Pure: rmqc.node._acl wraps it with reading and reloading
`acl_file` and rate-limited logging, and the simulator runs this same class on every request it
delivers to a node."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rmqc.remoting import RemotingCommand, ResponseCode, make_response

from ._check import Allowed, Refusal, check_request
from ._plain_acl import AclRules


@dataclass(frozen=True, slots=True)
class Refused:
    refusal: Refusal
    answer: RemotingCommand | None  # NO_PERMISSION with the reason; None: a refused one-way, dropped


class RequestGate:
    """The decision of the gate, request by request, with what it refused counted."""

    __slots__ = ("dropped_oneway", "refused")

    def __init__(self) -> None:
        self.refused: Counter[str] = Counter()  # by Refusal name
        self.dropped_oneway = 0

    def check(self, rules: AclRules, request: RemotingCommand, host: str) -> Allowed | Refused:
        decision = check_request(rules, request, host)
        if isinstance(decision, Allowed):
            return decision
        self.refused[decision.name] += 1
        if request.is_oneway:
            self.dropped_oneway += 1
            return Refused(decision, None)
        return Refused(decision, _no_permission(request, decision))


def _no_permission(request: RemotingCommand, refusal: Refusal) -> RemotingCommand:
    """The answer to a refused two-way request: NO_PERMISSION (16), the reason as remark."""
    return make_response(request, ResponseCode.NO_PERMISSION, f"NO_PERMISSION: {refusal.value}")
