"""NOTIFY_BROKER_ROLE_CHANGED (1008) fan-out: one-way, best-effort, newest epoch wins (spec 5.4).

The replica emits Notify(address, command) actions after elections. What waits, which newer
masterEpoch supersedes which, which addresses have a sender (up to MAX_SENDERS at once, each address
its own, so a broker that hangs delays only its own notifications), which connection is reused and
what a failed send costs are decided by rmqc.replica's NotifierState. This is the transport: the
connects, the writes and the sender tasks. A cached connection the broker closed (it was killed,
perhaps restarted on the same port) is noticed before use and replaced, not written into: a write on
it would vanish without an error.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable

import trio

from rmqc.remoting import RemotingCommand, encode
from rmqc.replica import NotifierState

from ._tls import TlsStream, dial_tls

log = logging.getLogger("rmqc.node.notifier")

Stream = trio.SocketStream | TlsStream

# Loopback and LAN connects finish in microseconds to milliseconds, and an unanswered SYN is only
# retried after 1 s: a broker that has not accepted within this is down or unreachable, and it learns
# the new master from its 1004 poll. Short, so a dead address holds its sender only briefly.
CONNECT_TIMEOUT_S = 0.5
# Java gives a one-way send 3 s; a send blocks only when the broker stopped reading (a full buffer).
SEND_TIMEOUT_S = 3.0
# Senders at once. Each holds at most one socket while it connects, so this bounds the descriptors
# and the connects in flight: 512 connects cost ~50 ms of CPU, well inside CONNECT_TIMEOUT_S even
# when all start together (with 2,000 at once, live loopback brokers timed out). A hanging broker
# holds one sender for CONNECT_TIMEOUT_S, so it takes 512 of them before live ones wait at all.
MAX_SENDERS = 512
# One read of what a TLS broker sent on its own (session tickets) before a notification.
RECEIVE_BYTES = 64 * 1024
# What a failed connect or send raises (ValueError: an address without a numeric port).
SEND_ERRORS = (OSError, ValueError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError)


async def open_stream(address: str) -> trio.SocketStream:
    """One TCP connection to `host:port`, the first address the host resolves to. Not
    trio.open_tcp_stream: its happy-eyeballs machinery costs three times as much CPU per connect,
    and a mass failover connects to thousands of brokers at once."""
    host, _, port = address.rpartition(":")
    resolved = await trio.socket.getaddrinfo(host, int(port), type=trio.socket.SOCK_STREAM)  # numeric: no thread
    if not resolved:
        raise OSError(f"{address} resolves to no address")
    family, kind, protocol, _, socket_address = resolved[0]
    sock = trio.socket.socket(family, kind, protocol)
    try:
        await sock.connect(socket_address)
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


class Notifier(NotifierState[Stream]):
    def __init__(self, ssl_context: ssl.SSLContext | None = None,
                 on_sent: Callable[[str, RemotingCommand], None] | None = None) -> None:
        super().__init__(MAX_SENDERS)
        self._ssl_context = ssl_context  # None: plain TCP (tls_notify off)
        self._on_sent = on_sent or _ignore_sent  # each 1008 written to its broker (a failover's step)
        self._nursery: trio.Nursery | None = None

    def submit(self, address: str, command: RemotingCommand) -> None:
        super().submit(address, command)
        self._start_senders()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._start_senders()  # what was submitted before the notifier ran
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            # shielded: we are usually here because of a cancellation, and every socket must close
            with trio.CancelScope(shield=True):
                for stream in self.forget_all():
                    await trio.aclose_forcefully(stream)

    def _start_senders(self) -> None:
        if self._nursery is not None:
            for address in self.senders_to_start():
                self._nursery.start_soon(self._sender, address, name="notifier-sender")

    async def _sender(self, address: str | None) -> None:
        """Send what waits for `address` until nothing does, then serve the next queued address."""
        while address is not None:
            while (command := self.next_command(address)) is not None:
                await self._send(address, command)
            address = self.served(address)

    async def _send(self, address: str, command: RemotingCommand) -> None:
        frame = encode(command)
        cached = self.reuse(address)
        while True:  # at most twice: a retry is on a new connection, and that one is not retried
            try:
                await self._write(address, cached, frame)
                break
            except SEND_ERRORS as error:
                if (failed := self.forget(address)) is not None:
                    await trio.aclose_forcefully(failed)
                if not self.retry_after_failure(on_cached=cached is not None,
                                                timed_out=isinstance(error, trio.TooSlowError)):
                    log.info("1008 to %s failed: %s", address, error)
                    return
                cached = None
        self.delivered()
        log.debug("sent 1008 to %s (masterEpoch %s)", address, command.ext("masterEpoch"))
        self._on_sent(address, command)

    async def _write(self, address: str, cached: Stream | None, frame: bytes) -> None:
        """`frame` on the `cached` connection, or on a new one (None). A cached connection the broker
        closed is not written into: the write would vanish without an error."""
        if cached is not None and _broker_gone(cached):
            raise trio.BrokenResourceError(f"{address} closed the cached connection")
        stream = await self._connect(address) if cached is None else cached
        with trio.fail_after(SEND_TIMEOUT_S):
            await stream.send_all(frame)

    async def _connect(self, address: str) -> Stream:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            tcp = await open_stream(address)
        stream: Stream = tcp
        if self._ssl_context is not None:
            try:
                stream = await dial_tls(tcp, self._ssl_context)  # its own deadline
            except BaseException:
                await trio.aclose_forcefully(tcp)
                raise
        for evicted in self.connected(address, stream):
            await trio.aclose_forcefully(evicted)
        return stream


def _ignore_sent(_address: str, _command: RemotingCommand) -> None:
    pass


def _broker_gone(stream: Stream) -> bool:
    """Brokers never write on a one-way connection, so readable means end of stream or a reset: the
    broker process that accepted it is gone, maybe restarted on the same port. Under TLS the
    broker's own TLS messages (session tickets after the handshake) are read and set aside first."""
    if not isinstance(stream, TlsStream):
        return stream.socket.is_readable()
    while stream.transport.socket.is_readable():
        try:
            data = os.read(stream.fd, RECEIVE_BYTES)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not data:
            return True
        try:
            stream.decrypt(data)
        except trio.BrokenResourceError:
            return True
        if stream.closed_by_peer:
            return True
    return False
