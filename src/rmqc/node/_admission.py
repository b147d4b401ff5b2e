"""Which new connections the port takes: at most `max_connections` open in all and at most
`max_connections_per_ip` from one remote address, so one host cannot take every slot from the
brokers and peers. Loopback addresses count only towards the total: they are this machine (local
load generators and dev clusters open thousands), and a local attacker has easier ways in."""

from __future__ import annotations

from collections import Counter

from rmqc.config import NodeConfig, is_loopback


class ConnectionAdmission:
    def __init__(self, config: NodeConfig) -> None:
        self._max_total = config.max_connections
        self._max_per_ip = config.max_connections_per_ip
        self._per_ip: Counter[str] = Counter()
        self.open = 0

    def admit(self, host: str) -> str | None:
        """None and the connection is counted, or the name of the bound that refuses it."""
        if self.open >= self._max_total:
            return f"{self.open} connections open (max_connections {self._max_total})"
        limited = not is_loopback(host)
        if limited and self._per_ip[host] >= self._max_per_ip:
            return f"{self._per_ip[host]} connections open from {host} (max_connections_per_ip {self._max_per_ip})"
        self.open += 1
        if limited:
            self._per_ip[host] += 1
        return None

    def release(self, host: str) -> None:
        self.open -= 1
        if host in self._per_ip:
            self._per_ip[host] -= 1
            if not self._per_ip[host]:
                del self._per_ip[host]  # the table holds only hosts with open connections: bounded
