"""RocketMQ request signatures, as the Java client's AclClientRPCHook (and ali-ons) make them.

The client adds `AccessKey` (and `SecurityToken`, if it has one) to the extFields, sorts every
extField by key, skips `Signature`, concatenates the values only (no keys, no separators), appends
the raw body bytes, and signs that with HMAC-SHA1 under the UTF-8 secret key; the standard Base64
of the MAC goes into `Signature` (AclUtils.combineRequestContent / calSignature).
"""

from __future__ import annotations

import base64
import hashlib
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
    _signer: SigningKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_signer", SigningKey(self.secret_key))

    def sign(self, request: RemotingCommand) -> None:
        """Add AccessKey and Signature to `request` in place."""
        _sign(request, self.access_key, self._signer)


def _java_order(key: str) -> bytes:
    """Java's String.compareTo orders by UTF-16 code unit; Python's str by code point. They differ
    only past U+FFFF, and the signature must match Java's order there too."""
    return key.encode("utf-16-be")


# The signed order of a request's keys, by the order they were decoded in: one client sends the
# same fields in the same order every time, so sorting is paid once per kind of request. Bounded:
# past it, orders are computed each time (a client varying its fields cannot grow the node).
_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}
MAX_CACHED_ORDERS = 1024


def _signed_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    order = _ORDERS.get(keys)
    if order is None:
        ordered = sorted(keys)
        if not "".join(ordered).isascii():  # the two orders agree on ASCII; skip the cost there
            ordered.sort(key=_java_order)
        order = tuple(key for key in ordered if key != SIGNATURE)
        if len(_ORDERS) < MAX_CACHED_ORDERS:
            _ORDERS[keys] = order
    return order


def signature_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    values = "".join(map(ext_fields.__getitem__, _signed_order(tuple(ext_fields))))
    return values.encode() + (body or b"")


def signature(secret_key: str, content: bytes) -> str:
    return SigningKey(secret_key).signature(content).decode()


class SigningKey:
    """HMAC-SHA1 under one secret key, Base64: with the key's two padded blocks hashed once, a
    request costs two hash copies and three short updates (a third of hmac.digest's cost, which
    sets the key up again for every message: it was most of a signed heartbeat's check)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, secret_key: str) -> None:
        key = secret_key.encode()
        if len(key) > _SHA1_BLOCK:  # RFC 2104: a long key is hashed first
            key = hashlib.sha1(key).digest()
        key = key.ljust(_SHA1_BLOCK, b"\0")
        self._inner = hashlib.sha1(bytes(byte ^ 0x36 for byte in key))
        self._outer = hashlib.sha1(bytes(byte ^ 0x5C for byte in key))

    def signature(self, content: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(content)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return base64.b64encode(outer.digest())

    def matches(self, request: RemotingCommand) -> bool:
        """Whether the request's Signature is the one this key makes, compared in constant time."""
        given = request.ext(SIGNATURE) or ""
        expected = self.signature(signature_content(request.ext_fields or {}, request.body))
        return hmac.compare_digest(expected, given.encode("utf-8", "replace"))


_SHA1_BLOCK = 64


def sign_request(request: RemotingCommand, access_key: str, secret_key: str) -> None:
    """Add AccessKey and Signature to `request` in place (the client side)."""
    _sign(request, access_key, SigningKey(secret_key))


def _sign(request: RemotingCommand, access_key: str, signer: SigningKey) -> None:
    fields = dict(request.ext_fields or {})
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = access_key
    fields[SIGNATURE] = signer.signature(signature_content(fields, request.body)).decode()
    request.ext_fields = fields


def signature_matches(request: RemotingCommand, secret_key: str) -> bool:
    """Whether the request's Signature is the one `secret_key` makes, compared in constant time."""
    return SigningKey(secret_key).matches(request)
