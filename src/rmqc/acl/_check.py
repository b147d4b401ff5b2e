"""Who may make a request: the decision of a RocketMQ ACL check, as a pure function.

Following RocketMQ's PlainPermissionManager.validate: an address in `globalWhiteRemoteAddresses`
passes unsigned; otherwise the request must name a known AccessKey; an address in that account's
`whiteRemoteAddress` passes without a signature; otherwise the signature must match. Then the
controller's rights: every account may make the broker's requests and the reads; only `admin`
accounts may elect a designated master (1002 with designateElect), clean a broker group away
(1011), change the configuration (1009), move the leadership (60002), save a snapshot (60003) or
change the membership (60005-60007) or import broker groups (60010).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rmqc.remoting import (
    RMQC_IMPORT_GROUPS,
    RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE,
    RMQC_SNAPSHOT_SAVE,
    RMQC_TRANSFER_LEADER,
    RemotingCommand,
    RequestCode,
)

from ._plain_acl import AclRules
from ._signature import ACCESS_KEY

ANONYMOUS = "anonymous"
# rmqc's operator requests too: moving the leadership, a backup of the whole state (which holds the
# node's only thread while it is encoded) and changing the membership are an operator's, not a
# broker's (listing the members is a read any account may make).
ADMIN_ONLY_CODES = frozenset({RequestCode.UPDATE_CONTROLLER_CONFIG, RequestCode.CLEAN_BROKER_DATA,
                              RMQC_TRANSFER_LEADER, RMQC_SNAPSHOT_SAVE, RMQC_MEMBERS_ADD, RMQC_MEMBERS_PROMOTE,
                              RMQC_MEMBERS_REMOVE, RMQC_IMPORT_GROUPS})


class Refusal(Enum):
    """Why a request was refused; the value is the remark (it never says which part of a signature
    was wrong, nor whether the key exists with another secret)."""

    ADDRESS_NOT_ALLOWED = "address not allowed: unsigned requests are accepted only from whitelisted addresses"
    UNKNOWN_ACCESS_KEY = "unknown access key"
    BAD_SIGNATURE = "bad signature"
    NOT_ADMIN = "not an admin: this request needs an account with admin: true"


@dataclass(frozen=True, slots=True)
class Allowed:
    who: str  # the access key, or ANONYMOUS for a whitelisted unsigned request


def needs_admin(request: RemotingCommand) -> bool:
    if request.code in ADMIN_ONLY_CODES:
        return True
    if request.code != RequestCode.CONTROLLER_ELECT_MASTER:
        return False
    return (request.ext("designateElect") or "").lower() == "true"


def check_request(rules: AclRules, request: RemotingCommand, host: str) -> Allowed | Refusal:
    access_key = request.ext(ACCESS_KEY)
    if rules.globally_white(host):
        return Allowed(access_key or ANONYMOUS)
    if access_key is None:
        return Refusal.ADDRESS_NOT_ALLOWED
    account = rules.accounts.get(access_key)
    if account is None:
        return Refusal.UNKNOWN_ACCESS_KEY
    if account.white_remote_address is not None and account.white_remote_address.matches(host):
        return Allowed(access_key)
    if not account.signer.matches(request):
        return Refusal.BAD_SIGNATURE
    if needs_admin(request) and not account.admin:
        return Refusal.NOT_ADMIN
    return Allowed(access_key)
