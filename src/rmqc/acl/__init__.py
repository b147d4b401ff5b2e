"""rmqc.acl: RocketMQ ACL 1.0 as a controller needs it, pure (no I/O): plain_acl.yml rules, request
signatures (AclClientRPCHook's algorithm), the decision who may make which request, and the gate
that turns it into an answer (RequestGate). node/_acl.py reads and reloads the file and runs the
gate on every remoting request; the simulator runs the same gate on the requests it delivers."""

from rmqc.acl._address import AddressPattern as AddressPattern, parse_address_pattern as parse_address_pattern
from rmqc.acl._check import (
    ANONYMOUS as ANONYMOUS,
    Allowed as Allowed,
    Refusal as Refusal,
    check_request as check_request,
    needs_admin as needs_admin,
)
from rmqc.acl._errors import AclConfigError as AclConfigError
from rmqc.acl._gate import Refused as Refused, RequestGate as RequestGate
from rmqc.acl._plain_acl import Account as Account, AclRules as AclRules, parse_plain_acl as parse_plain_acl
from rmqc.acl._signature import (
    ACCESS_KEY as ACCESS_KEY,
    SIGNATURE as SIGNATURE,
    Credentials as Credentials,
    SigningKey as SigningKey,
    sign_request as sign_request,
    signature as signature,
    signature_content as signature_content,
    signature_matches as signature_matches,
)

__all__ = [
    "ACCESS_KEY",
    "ANONYMOUS",
    "SIGNATURE",
    "Account",
    "AclConfigError",
    "AclRules",
    "AddressPattern",
    "Allowed",
    "Credentials",
    "Refusal",
    "Refused",
    "RequestGate",
    "SigningKey",
    "check_request",
    "needs_admin",
    "parse_address_pattern",
    "parse_plain_acl",
    "sign_request",
    "signature",
    "signature_content",
    "signature_matches",
]
