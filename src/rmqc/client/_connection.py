"""One TCP connection to one controller: many requests in flight, answers matched by opaque.

Three parts, each owned by the connection's task (run in the client's nursery): the stream, a writer
that drains a bounded outbox (so a cancelled caller never leaves half a frame on the wire), and a
reader that feeds the sans-IO FrameDecoder and wakes the waiting caller of each answer. Whatever ends
the connection (EOF, I/O error, protocol error, the client closing) fails every waiting caller with
ConnectionLost; the client then retries on a fresh connection.
"""

from __future__ import annotations

import ssl

import trio

from rmqc.client._address import parse_address
from rmqc.client._errors import ConnectionLost
from rmqc.remoting import FrameDecoder, RemotingCommand, RemotingProtocolError, encode

__all__ = ["Connection"]

RECEIVE_BYTES = 64 * 1024  # one read; the decoder buffers at most one partial frame beyond it
# Frames the writer joins into one send: enough to coalesce a burst of small requests into few
# syscalls, small enough that one write stays well below a megabyte.
WRITE_BATCH_FRAMES = 64


class _Waiter:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: RemotingCommand | None = None


class Connection:
    """Use `await run(...)` in a nursery, `await ready.wait()`, then `await send(...)` from any task."""

    def __init__(self, address: str, *, outbox_frames: int, max_frame_bytes: int,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.address = address
        self._ssl_context = ssl_context  # None: plain TCP
        self.host, self.port = parse_address(address)
        self.ready = trio.Event()  # set once connected, or once the attempt has failed
        self.closed = False
        self.reason = "not connected yet"
        self._max_frame_bytes = max_frame_bytes
        self._pending: dict[int, _Waiter] = {}
        # Bounded by the client's in-flight limit: each waiting request has at most one frame queued.
        self._outbox_send, self._outbox_receive = trio.open_memory_channel[bytes](outbox_frames)
        self._cancel_scope = trio.CancelScope()

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    def lost(self) -> ConnectionLost:
        return ConnectionLost(f"connection to {self.address} lost: {self.reason}")

    def close(self, reason: str) -> None:
        """Ends the connection from any task; waiting callers get ConnectionLost."""
        self._end(reason)
        self._cancel_scope.cancel()

    async def run(self, connect_timeout_s: float) -> None:
        stream: trio.abc.Stream | None = None
        try:
            with self._cancel_scope:
                stream = await self._connect(connect_timeout_s)
                if stream is None:
                    return
                self.ready.set()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_loop, stream)
                    await self._read_loop(stream)
                    nursery.cancel_scope.cancel()
        finally:
            self._end("client closed" if self.reason == "connected" else self.reason)
            if stream is not None:
                await trio.aclose_forcefully(stream)

    async def send(self, cmd: RemotingCommand, *, expect_response: bool) -> RemotingCommand | None:
        """Queue `cmd`; for a two-way request wait for the answer with the same opaque."""
        if self.closed:
            raise self.lost()
        frame = encode(cmd, max_frame_bytes=self._max_frame_bytes)
        waiter = _Waiter() if expect_response else None
        if waiter is not None:
            self._pending[cmd.opaque] = waiter
        try:
            try:
                await self._outbox_send.send(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise self.lost() from None
            if waiter is None:
                return None
            await waiter.event.wait()
            if waiter.response is None:
                raise self.lost()
            return waiter.response
        finally:
            if waiter is not None and self._pending.get(cmd.opaque) is waiter:
                del self._pending[cmd.opaque]

    def send_nowait(self, cmd: RemotingCommand) -> bool:
        """Queue a one-way `cmd` without waiting; False (nothing queued) if the connection is
        closed or its bounded outbox is full."""
        if self.closed:
            return False
        try:
            self._outbox_send.send_nowait(encode(cmd, max_frame_bytes=self._max_frame_bytes))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _connect(self, timeout_s: float) -> trio.abc.Stream | None:
        stream: trio.abc.Stream | None = None
        try:
            with trio.fail_after(timeout_s):
                stream = await trio.open_tcp_stream(self.host, self.port)
                if self._ssl_context is not None:
                    # controllers are named by IP, as in RocketMQ: the CA file decides, not host names
                    stream = trio.SSLStream(stream, self._ssl_context, server_hostname=None)
                    await stream.do_handshake()
        except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            self.reason = f"connect failed ({exc!r})"
            if stream is not None:
                await trio.aclose_forcefully(stream)
            return None
        self.reason = "connected"
        return stream

    async def _write_loop(self, stream: trio.abc.Stream) -> None:
        try:
            async for frame in self._outbox_receive:
                await stream.send_all(b"".join([frame, *self._queued_frames()]))
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.close(f"write failed ({exc!r})")

    def _queued_frames(self) -> list[bytes]:
        frames: list[bytes] = []
        while len(frames) < WRITE_BATCH_FRAMES - 1:
            try:
                frames.append(self._outbox_receive.receive_nowait())
            except trio.WouldBlock:
                break
        return frames

    async def _read_loop(self, stream: trio.abc.Stream) -> None:
        decoder = FrameDecoder(max_frame_bytes=self._max_frame_bytes)
        try:
            while data := await stream.receive_some(RECEIVE_BYTES):
                for cmd in decoder.feed(data):
                    self._deliver(cmd)
            decoder.eof()
            self.reason = "closed by the controller"
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.reason = f"read failed ({exc!r})"
        except RemotingProtocolError as exc:
            self.reason = f"controller sent a malformed frame ({exc})"

    def _deliver(self, cmd: RemotingCommand) -> None:
        if not cmd.is_response:
            return  # controllers send requests (1008) only on connections they open themselves
        waiter = self._pending.pop(cmd.opaque, None)
        if waiter is None:
            return  # the caller gave up (timeout); Java drops such late answers too
        waiter.response = cmd
        waiter.event.set()

    def _end(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.reason = reason
        self.ready.set()
        self._outbox_receive.close()
        for waiter in self._pending.values():
            waiter.event.set()  # response None: the caller raises ConnectionLost
        self._pending.clear()
