"""RocketMQ's remote address patterns (plain_acl.yml `globalWhiteRemoteAddresses` and an account's
`whiteRemoteAddress`): `*` or `*.*.*.*` (anyone), an exact address (IPv4 or IPv6), per-octet IPv4
patterns whose octets are a number, `*` or a range `n-m` (`192.168.*.*`, `192.168.1.10-20`), and a
last-octet set `192.168.1.{10,11,12}`."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ._errors import AclConfigError


@dataclass(frozen=True, slots=True)
class AddressPattern:
    text: str
    # per IPv4 octet, the inclusive ranges it may take; None = exact (or IPv6) match on `exact`;
    # both None = anyone (`*`, `*.*.*.*`: RocketMQ's NULL_NET_ADDRESS_STRATEGY, IPv6 included)
    octets: tuple[tuple[tuple[int, int], ...], ...] | None
    exact: str | None

    def matches(self, host: str) -> bool:
        if self.octets is None and self.exact is None:
            return True
        if self.exact is not None:
            return _normal(host) == self.exact
        assert self.octets is not None
        parts = host.split(".")
        if len(parts) != 4 or not all(part.isdigit() for part in parts):
            return False
        return all(any(low <= int(part) <= high for low, high in allowed)
                   for part, allowed in zip(parts, self.octets, strict=True))


ANY = ((0, 255),)


def parse_address_pattern(text: str) -> AddressPattern:
    text = text.strip()
    if text in ("*", "*.*.*.*"):
        return AddressPattern(text, None, None)
    try:
        return AddressPattern(text, None, _normal(text, strict=True))
    except ValueError:
        pass
    parts = text.split(".")
    if len(parts) != 4:
        raise AclConfigError(f"remote address pattern {text!r} is not an address, `*`, or a.b.c.d of "
                             "numbers, `*`, ranges n-m and a last {x,y} set")
    return AddressPattern(text, tuple(_octet(part, text, last=(i == 3)) for i, part in enumerate(parts)), None)


def _octet(part: str, text: str, last: bool) -> tuple[tuple[int, int], ...]:
    try:
        if part == "*":
            return ANY
        if last and part.startswith("{") and part.endswith("}"):
            return tuple((_byte(item), _byte(item)) for item in part[1:-1].split(","))
        low, dash, high = part.partition("-")
        ranged = (_byte(low), _byte(high) if dash else _byte(low))
        if ranged[0] > ranged[1]:
            raise ValueError(f"range {part} runs backwards")
        return (ranged,)
    except ValueError as error:
        raise AclConfigError(f"remote address pattern {text!r}: {error}") from None


def _byte(text: str) -> int:
    value = int(text.strip())
    if not 0 <= value <= 255:
        raise ValueError(f"{value} is not an octet")
    return value


def _normal(host: str, strict: bool = False) -> str:
    """The canonical text of an address (IPv6 compressed, IPv4-mapped IPv6 as IPv4)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if strict:
            raise
        return host
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)
