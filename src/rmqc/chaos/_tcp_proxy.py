"""A fault-injecting TCP proxy for real-process tests: put one between two nodes and cut, delay or
heal the link while the nodes run.

One `TcpProxy` listens on its own loopback port and forwards every accepted connection to one
target. "forward" is the direction client -> target (the dialling node's own traffic), "backward"
target -> client (answers on that connection). Faults:
- `cut(forward=..., backward=...)`: bytes in a cut direction are swallowed, as by a partition that
  drops packets. New connections while forward is cut are accepted and black-holed (never reach the
  target), like a SYN that is answered but whose data is lost; nothing is refused, so the nodes see
  a silent network, not a dead process.
- `delay(ms)`: every chunk is delivered `ms` after it arrived, in order.
- `lose(rate, rng)`: packet loss as a TCP stream sees it. A stream has no holes: a lost segment is
  sent again after the retransmission timeout (RTO, at least 200 ms on Linux, doubled at each
  further loss of the same segment), and everything behind it waits (head-of-line blocking). So
  each chunk is lost with probability `rate`, and each loss holds it, and the stream behind it, one
  RTO; a chunk lost LOSS_RESET_AFTER times in a row resets the connection, as TCP gives up after
  its retries (sooner here: tcp_retries2 takes minutes).
- `reject()`: a firewall REJECT rule (or a host whose stack answers with resets): every connection
  is reset (RST, both sides), and new ones are refused (the port stays bound but stops listening,
  so a SYN is answered with RST: ECONNREFUSED), as if the target's process were gone, though it
  runs on.
- `heal()`: stops swallowing and refusing; connections that lost bytes are closed (their byte
  streams have holes, so continuing them would only produce framing errors), and the nodes
  reconnect through the proxy.
"""

from __future__ import annotations

import errno
import logging
import random
import socket as stdlib_socket
import struct
from collections.abc import Awaitable
from dataclasses import dataclass, field

import trio

from rmqc.errors import BoundExceeded

log = logging.getLogger("rmqc.testing.proxy")

CHUNK_BYTES = 64 * 1024
# Chunks held per direction for delayed delivery: 1024 x 64 KiB bounds one direction to 64 MiB, far
# above what a delayed Raft link carries in a test; past it the reader waits (TCP backpressure).
MAX_CHUNKS_IN_FLIGHT = 1024
# Connections through one proxy; the nodes open one or two each, tests never more than a few.
MAX_CONNECTIONS = 256
LISTEN_BACKLOG = 128
# SO_LINGER on with a zero timeout: close() sends RST instead of FIN (a reset connection).
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)
# Packet loss (lose()): Linux's smallest retransmission timeout (TCP_RTO_MIN), doubled at each
# further loss of one segment; a segment lost this many times in a row resets the connection.
RTO_MIN_S = 0.2
LOSS_RESET_AFTER = 4
# Re-binding the port after a reject may briefly find it taken by a socket still closing.
REBIND_ATTEMPTS = 100
REBIND_PAUSE_S = 0.01


class TooManyProxyConnections(BoundExceeded):
    """The proxy already carries MAX_CONNECTIONS connections; the new one is closed at once."""


@dataclass(slots=True, eq=False)
class _Connection:
    client: trio.SocketStream
    target: trio.SocketStream | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    lost_bytes: int = 0
    reset: bool = False  # closed with RST (reject), not FIN


@dataclass(slots=True)
class ProxyStats:
    connections: int = 0
    forwarded_bytes: int = 0
    dropped_bytes: int = 0
    resets: int = 0  # connections reset by lose()


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1",
                 listen_port: int = 0, name: str = "proxy") -> None:
        self.target = (target_host, target_port)
        self.name = name
        self._listen = (listen_host, listen_port)
        self._cut = {"forward": False, "backward": False}
        self._delay_s = 0.0
        self._loss_rate = 0.0
        self._loss_rng = random.Random(0)
        self._connections: set[_Connection] = set()
        self._healed = trio.Event()
        self._rejecting = False
        self._accepting = trio.Event()  # set while the port listens (not rejecting)
        self._accept_scope: trio.CancelScope | None = None
        self.stats = ProxyStats()
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self._listen[0]}:{self.port}"

    # ----- faults -----

    def cut(self, *, forward: bool = True, backward: bool = True) -> None:
        self._cut["forward"] = self._cut["forward"] or forward
        self._cut["backward"] = self._cut["backward"] or backward
        if self._healed.is_set():
            self._healed = trio.Event()
        log.info("%s: cut forward=%s backward=%s", self.name, self._cut["forward"], self._cut["backward"])

    def delay(self, delay_ms: float) -> None:
        self._delay_s = max(0.0, delay_ms / 1000)

    def lose(self, rate: float, rng: random.Random) -> None:
        """Lose each chunk with probability `rate` (0 <= rate < 1), drawn from `rng` (seeded)."""
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"loss rate {rate} is not in [0, 1)")
        self._loss_rate = rate
        self._loss_rng = rng
        log.info("%s: losing %.0f%% of chunks", self.name, rate * 100)

    def reject(self) -> None:
        """Reset every connection and refuse new ones until heal()."""
        self._rejecting = True
        self._accepting = trio.Event()
        if self._accept_scope is not None:
            self._accept_scope.cancel()
        for connection in list(self._connections):
            connection.reset = True
            connection.scope.cancel()
        log.info("%s: rejecting (connections reset, new ones refused)", self.name)

    def heal(self) -> None:
        self._cut = {"forward": False, "backward": False}
        self._delay_s = 0.0
        self._loss_rate = 0.0
        if self._rejecting:
            self._rejecting = False
            self._accepting.set()
        for connection in list(self._connections):
            if connection.lost_bytes or connection.target is None:
                connection.scope.cancel()
        self._healed.set()
        log.info("%s: healed", self.name)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def is_cut(self) -> bool:
        return self._cut["forward"] or self._cut["backward"] or self._rejecting

    # ----- serving -----

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        sock = await self._bound_socket(self._listen[1])
        self.port = sock.getsockname()[1]
        self._accepting.set()
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(self.address)
                while True:
                    await self._accepting.wait()
                    sock.listen(LISTEN_BACKLOG)
                    with trio.CancelScope() as self._accept_scope:
                        await trio.serve_listeners(self._serve, [trio.SocketListener(sock)],
                                                   handler_nursery=nursery)
                    # reject(): stop listening but keep the port, so connections are refused (not
                    # timed out) and no one else can take it before heal()
                    sock.close()
                    sock = await self._bound_socket(self.port)
        finally:
            sock.close()

    async def _bound_socket(self, port: int) -> trio.socket.SocketType:
        for _ in range(REBIND_ATTEMPTS):
            sock = trio.socket.socket(stdlib_socket.AF_INET, stdlib_socket.SOCK_STREAM)
            sock.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_REUSEADDR, 1)
            try:
                await sock.bind((self._listen[0], port))
            except OSError as error:
                sock.close()
                if error.errno != errno.EADDRINUSE or port == 0:
                    raise
                await trio.sleep(REBIND_PAUSE_S)
                continue
            return sock
        raise OSError(errno.EADDRINUSE, f"{self.name}: port {port} still in use after a reject")

    async def _serve(self, client: trio.SocketStream) -> None:
        if len(self._connections) >= MAX_CONNECTIONS:
            log.warning("%s: %s", self.name, TooManyProxyConnections(f"{MAX_CONNECTIONS} connections open"))
            await trio.aclose_forcefully(client)
            return
        connection = _Connection(client, reset=self._rejecting)
        self._connections.add(connection)
        self.stats.connections += 1
        try:
            with connection.scope:
                if connection.reset:
                    return  # accepted just before a reject: reset at once
                if self._cut["forward"]:
                    await self._black_hole(connection)
                else:
                    await self._relay(connection)
        finally:
            self._connections.discard(connection)
            # closed without awaiting: under cancellation an await here would skip the second close
            for stream in (client, connection.target):
                if stream is not None:
                    if connection.reset:
                        stream.socket.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_LINGER,
                                                 _RESET_ON_CLOSE)
                    stream.socket.close()

    async def _black_hole(self, connection: _Connection) -> None:
        """Swallow what the client sends until healed; then the connection is closed (heal)."""
        while True:
            data = await connection.client.receive_some(CHUNK_BYTES)
            if not data:
                return
            connection.lost_bytes += len(data)
            self.stats.dropped_bytes += len(data)

    async def _relay(self, connection: _Connection) -> None:
        try:
            connection.target = await trio.open_tcp_stream(*self.target)
        except OSError:
            return  # the target is down: the client sees its connection close, and retries
        async with trio.open_nursery() as nursery:
            for source, sink, direction in ((connection.client, connection.target, "forward"),
                                            (connection.target, connection.client, "backward")):
                nursery.start_soon(self._pump, connection, source, sink, direction, nursery.cancel_scope)

    async def _pump(self, connection: _Connection, source: trio.SocketStream, sink: trio.SocketStream,
                    direction: str, scope: trio.CancelScope) -> None:
        send, receive = trio.open_memory_channel[tuple[float, bytes]](MAX_CHUNKS_IN_FLIGHT)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_until_broken, self._deliver(receive, sink), nursery.cancel_scope)
                await _until_broken(self._read_into(connection, source, send, direction), nursery.cancel_scope)
        finally:
            scope.cancel()  # one side ended: close the whole connection, as TCP would

    async def _read_into(self, connection: _Connection, source: trio.SocketStream,
                         send: trio.MemorySendChannel[tuple[float, bytes]], direction: str) -> None:
        not_before = 0.0  # in order: a chunk held by a loss holds every chunk behind it
        while True:
            data = await source.receive_some(CHUNK_BYTES)
            if not data:
                return
            if self._cut[direction]:
                connection.lost_bytes += len(data)
                self.stats.dropped_bytes += len(data)
                continue
            held_s = self._retransmission_s()
            if held_s is None:
                connection.reset = True
                self.stats.resets += 1
                connection.scope.cancel()
                return
            not_before = max(not_before, trio.current_time() + self._delay_s + held_s)
            await send.send((not_before, data))

    def _retransmission_s(self) -> float | None:
        """How long a chunk waits for its losses: each loss one RTO, doubled from RTO_MIN_S; None
        when it was lost LOSS_RESET_AFTER times in a row (the connection is reset)."""
        held_s, rto_s = 0.0, RTO_MIN_S
        for _ in range(LOSS_RESET_AFTER):
            if self._loss_rng.random() >= self._loss_rate:
                return held_s
            held_s += rto_s
            rto_s *= 2
        return None

    async def _deliver(self, receive: trio.MemoryReceiveChannel[tuple[float, bytes]],
                       sink: trio.SocketStream) -> None:
        async for deliver_at, data in receive:
            await trio.sleep_until(deliver_at)
            await sink.send_all(data)
            self.stats.forwarded_bytes += len(data)


async def _until_broken(work: Awaitable[None], scope: trio.CancelScope) -> None:
    """Run one half of a pump; a closed or reset socket ends it quietly, and ends the other half."""
    try:
        await work
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        scope.cancel()


class ProxyMesh:
    """One proxy per ordered pair of nodes (i dials j through proxy (i, j)), so any link can be cut
    in either direction and any node isolated. `peers_for(i)` is node i's peers list: its own real
    listen address, the proxies for everyone else."""

    def __init__(self, listen_ports: dict[str, int], host: str = "127.0.0.1") -> None:
        self.listen_ports = dict(listen_ports)
        self.host = host
        self.proxies = {
            (src, dst): TcpProxy(host, port, name=f"proxy {src}->{dst}")
            for src in listen_ports for dst, port in listen_ports.items() if src != dst
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for proxy in self.proxies.values():
                await nursery.start(proxy.run)
            task_status.started()

    def peers_for(self, node_id: str) -> str:
        parts = []
        for other, port in self.listen_ports.items():
            address = f"{self.host}:{port}" if other == node_id else self.proxies[(node_id, other)].address
            parts.append(f"{other}-{address}")
        return ";".join(parts)

    def isolate(self, node_id: str) -> None:
        """Cut every link to and from `node_id`, both directions."""
        for (src, dst), proxy in self.proxies.items():
            if node_id in (src, dst):
                proxy.cut()

    def reject(self, node_id: str) -> None:
        """A REJECT rule around `node_id`'s peer links: every link to and from it is reset, and
        reconnections either way are refused; the node itself (and its client port) runs on."""
        for (src, dst), proxy in self.proxies.items():
            if node_id in (src, dst):
                proxy.reject()

    def heal_all(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()
