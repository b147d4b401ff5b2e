"""RocketMQ request signatures, as the Java client's AclClientRPCHook (and ali-ons) make them.

The client adds `AccessKey` (and `SecurityToken`, if it has one) to the extFields, sorts every
extField by key, skips `Signature`, concatenates the values only (no keys, no separators), appends
the raw body bytes, and signs that with HMAC-SHA1 under the UTF-8 secret key; the standard Base64
of the MAC goes into `Signature` (AclUtils.combineRequestContent / calSignature).
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmqc.remoting import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


@dataclass(frozen=True, slots=True)
class Credentials:
    """An ACL account as a client holds it (RocketMQ's SessionCredentials)."""

    access_key: str
    secret_key: str = field(repr=False)  # never in a log line or a traceback's locals

    def sign(self, request: RemotingCommand) -> None:
        sign_request(request, self.access_key, self.secret_key)


def _java_order(key: str) -> bytes:
    """Java's String.compareTo orders by UTF-16 code unit; Python's str by code point. They differ
    only past U+FFFF, and the signature must match Java's order there too."""
    return key.encode("utf-16-be")


def signature_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    keys = sorted(ext_fields)
    if not "".join(keys).isascii():  # the two orders agree on ASCII; skip the cost there
        keys.sort(key=_java_order)
    values = "".join([ext_fields[key] for key in keys if key != SIGNATURE])
    return values.encode() + (body or b"")


def signature(secret_key: str, content: bytes) -> str:
    return _signature_bytes(secret_key, content).decode()


def _signature_bytes(secret_key: str, content: bytes) -> bytes:
    # hmac.digest is OpenSSL's one-shot HMAC: about half the cost of an hmac.new object per request
    return base64.b64encode(hmac.digest(secret_key.encode(), content, "sha1"))


def sign_request(request: RemotingCommand, access_key: str, secret_key: str) -> None:
    """Add AccessKey and Signature to `request` in place (the client side)."""
    fields = dict(request.ext_fields or {})
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = access_key
    fields[SIGNATURE] = signature(secret_key, signature_content(fields, request.body))
    request.ext_fields = fields


def signature_matches(request: RemotingCommand, secret_key: str) -> bool:
    """Whether the request's Signature is the one `secret_key` makes, compared in constant time."""
    given = request.ext(SIGNATURE) or ""
    expected = _signature_bytes(secret_key, signature_content(request.ext_fields or {}, request.body))
    return hmac.compare_digest(expected, given.encode("utf-8", "replace"))
