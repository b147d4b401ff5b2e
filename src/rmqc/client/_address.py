"""`host:port` text, as RocketMQ writes controller and broker addresses."""

from __future__ import annotations

from rmqc.errors import ConfigError

__all__ = ["parse_address"]


def parse_address(address: str) -> tuple[str, int]:
    """Split `host:port` (IPv6 hosts in brackets); ConfigError names the address if it is not one."""
    host, sep, port_text = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"controller address {address!r} is not host:port")
    return host, int(port_text)
