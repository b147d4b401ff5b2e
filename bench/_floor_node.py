"""One node of bench/bench_cpu_floor.py: the least a replicated durable write has to do, in Trio,
with none of rmqc's logic. `python -m bench._floor_node ROLE LOG_FILE PORT [FOLLOWER_PORT ...]
[--saver-thread] [--no-fdatasync]`, ROLE `leader` or `follower`: the node listens on PORT of
127.0.0.1 and prints `listening on PORT` once it takes connections (a leader after it has connected
to its followers, trying again until they listen: the three start together).

Frames are a 4-byte big-endian length and that many bytes. A follower takes one connection (the
leader's); whatever frames it has read when it gets to run are one batch: appended to LOG_FILE
with one `os.write`, one `fdatasync`, then one ack frame carrying how many frames the batch held. A
leader takes client connections: every request read joins the pending list, and one committer task
takes everything pending as one batch (group commit), sends it to every follower (one send each,
the frames as they came), appends + fdatasyncs it itself, waits until one follower (with the leader,
a majority of 3) has acked every frame of it, and answers each request. Requests that arrive
meanwhile wait for the next batch; the followers' later acks are read as they come.

Sockets are read and written straight from their descriptors (`os.read`/`os.write` on the
non-blocking socket, `trio.lowlevel.wait_readable`/`wait_writable` only when it would block), the
cheapest I/O Trio allows (as rmqc.node._direct_read does): a floor, not a style. With
`--saver-thread` every append + fdatasync goes through rmqc's own saver thread
(rmqc.node._saver.BackgroundSaver.run: a hand-off over a pipe, the loop waiting for its end), as
`rmqc serve` saves; without it the loop's thread does it. `--no-fdatasync` leaves the flush out
(the append only): not durable, a diagnostic of what the flush costs in CPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

import trio

LENGTH_BYTES = 4
READ_BYTES = 65536  # a read this long may have left bytes in the socket: read again before waiting
ANSWER = LENGTH_BYTES.to_bytes(LENGTH_BYTES, "big") + b"done"
READY = "listening on"
CONNECT_TIMEOUT_S = 60.0  # the followers start at the same time, importing trio (and rmqc's saver)

Save = Callable[[bytes], Awaitable[None]]


def take_frames(buffer: bytearray) -> list[bytes]:
    """The complete frames at the front of `buffer` (length prefix included), removed from it."""
    frames = []
    start = 0
    while len(buffer) - start >= LENGTH_BYTES:
        end = start + LENGTH_BYTES + int.from_bytes(buffer[start:start + LENGTH_BYTES], "big")
        if end > len(buffer):
            break
        frames.append(bytes(buffer[start:end]))
        start = end
    del buffer[:start]
    return frames


async def read(fd: int) -> bytes:
    """What the socket holds now, waiting only when it holds nothing (b"": closed)."""
    while True:
        try:
            data = os.read(fd, READ_BYTES)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)
            continue
        while len(data) % READ_BYTES == 0 and data:  # maybe more waiting
            try:
                more = os.read(fd, READ_BYTES)
            except BlockingIOError:
                break
            data += more
            if not more:
                break
        return data


async def send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            sent = 0
        view = view[sent:]
        if view:
            await trio.lowlevel.wait_writable(fd)


def append_and_sync(log_fd: int, data: bytes) -> None:
    os.write(log_fd, data)
    os.fdatasync(log_fd)


def append_only(log_fd: int, data: bytes) -> None:
    os.write(log_fd, data)


def savers(log_fd: int, saver_thread: bool, fdatasync: bool) -> tuple[Save, Callable[[], None]]:
    """How this node saves a batch, and what to call on the way out."""
    write = append_and_sync if fdatasync else append_only
    if not saver_thread:
        async def save_in_loop(data: bytes) -> None:
            write(log_fd, data)

        return save_in_loop, lambda: None
    from rmqc.node._saver import BackgroundSaver

    saver = BackgroundSaver(None)
    saver.start()

    async def save(data: bytes) -> None:
        await saver.run(partial(write, log_fd, data))

    return save, saver.close


async def follower(stream: trio.SocketStream, save: Save) -> None:
    fd = stream.socket.fileno()
    buffer = bytearray()
    while data := await read(fd):
        buffer += data
        if frames := take_frames(buffer):
            await save(b"".join(frames))
            await send(fd, LENGTH_BYTES.to_bytes(LENGTH_BYTES, "big") + len(frames).to_bytes(4, "big"))


class Batching:
    """A leader's requests waiting for the next batch (client connection, what it asked), the
    parking lot its committer waits in for them, and the one it waits in for acks."""

    def __init__(self, followers: list[trio.SocketStream], save: Save) -> None:
        self.followers = followers
        self.save = save
        self.pending: list[tuple[trio.SocketStream, bytes]] = []
        self.work = trio.lowlevel.ParkingLot()
        self.acks = trio.lowlevel.ParkingLot()
        self.majority = (len(followers) + 1) // 2  # followers' acks that make a majority with the leader

    async def next_batch(self) -> list[tuple[trio.SocketStream, bytes]]:
        """Everything pending, once something is (group commit)."""
        while not self.pending:
            await self.work.park()
        batch, self.pending = self.pending, []
        return batch

    async def follower_acks(self, index: int) -> None:
        """Follower `index`'s acks as they come (take_ack each), then the committer woken."""
        fd = self.followers[index].socket.fileno()
        buffer = bytearray()
        while data := await read(fd):
            buffer += data
            for frame in take_frames(buffer):
                self.take_ack(index, frame)
            self.acks.unpark_all()
        raise ConnectionError(f"follower {index} closed its connection")

    def take_ack(self, index: int, frame: bytes) -> None:
        raise NotImplementedError


async def send_answer(stream: trio.SocketStream, answer: bytes) -> None:
    """An answer to a client, unless it has gone meanwhile."""
    if (fd := stream.socket.fileno()) >= 0:  # -1: closed meanwhile
        with contextlib.suppress(OSError):  # a client gone
            await send(fd, answer)


class Leader(Batching):
    def __init__(self, followers: list[trio.SocketStream], save: Save) -> None:
        super().__init__(followers, save)
        self.sent = 0  # frames sent to the followers
        self.acked = [0] * len(followers)  # frames each follower has acked

    async def client(self, stream: trio.SocketStream) -> None:
        fd = stream.socket.fileno()
        buffer = bytearray()
        async with stream:
            try:
                while data := await read(fd):
                    buffer += data
                    self.pending += [(stream, frame) for frame in take_frames(buffer)]
                    self.work.unpark()
            except OSError:
                pass  # a client gone: its connection only

    async def committer(self) -> None:
        while True:
            batch = await self.next_batch()
            data = b"".join(frame for _, frame in batch)
            for peer in self.followers:
                await send(peer.socket.fileno(), data)
            self.sent += len(batch)
            await self.save(data)
            while sorted(self.acked, reverse=True)[self.majority - 1] < self.sent:
                await self.acks.park()
            for stream, _ in batch:
                await send_answer(stream, ANSWER)

    def take_ack(self, index: int, frame: bytes) -> None:
        self.acked[index] += int.from_bytes(frame[LENGTH_BYTES:], "big")


async def connect(port: int) -> trio.SocketStream:
    """A connection to 127.0.0.1:`port`, tried again until something listens there."""
    with trio.fail_after(CONNECT_TIMEOUT_S):
        while True:
            try:
                return await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.02)


class LeaderNode(Protocol):
    """What serve() runs of a leader: a task per follower's acks, one committer, one per client."""

    followers: list[trio.SocketStream]

    async def committer(self) -> None: ...

    async def follower_acks(self, index: int) -> None: ...

    async def client(self, stream: trio.SocketStream) -> None: ...


async def serve(role: str, log_path: str, port: int, follower_ports: list[int], saver_thread: bool,
                fdatasync: bool, follow: Callable[[trio.SocketStream, Save], Awaitable[None]] = follower,
                lead: Callable[[list[trio.SocketStream], Save], LeaderNode] = Leader) -> None:
    """One node: a follower takes the leader's connection and runs `follow` on it; a leader
    connects to its followers and runs `lead`'s tasks (bench._least_node passes its own)."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    save, close = savers(log_fd, saver_thread, fdatasync)
    try:
        (listener,) = await trio.open_tcp_listeners(port, host="127.0.0.1")
        port = listener.socket.getsockname()[1]
        if role == "follower":
            print(f"{READY} {port}", flush=True)
            await follow(await listener.accept(), save)
            return
        leader = lead([await connect(p) for p in follower_ports], save)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(leader.committer)
            for index in range(len(leader.followers)):
                nursery.start_soon(leader.follower_acks, index)
            print(f"{READY} {port}", flush=True)
            await trio.serve_listeners(leader.client, [listener])
    finally:
        close()
        os.close(log_fd)


def parse_argv(argv: list[str], known_flags: set[str]) -> tuple[str, str, int, list[int], set[str]]:
    """ROLE LOG_FILE PORT [FOLLOWER_PORT ...] and the flags, each checked."""
    flags = {arg for arg in argv if arg.startswith("--")}
    if unknown := flags - known_flags:
        raise SystemExit(f"unknown options {sorted(unknown)}")
    role, log_path, port, *follower_ports = [arg for arg in argv if arg not in flags]
    if role not in ("leader", "follower"):
        raise SystemExit(f"role {role!r}: leader or follower")
    return role, log_path, int(port), [int(p) for p in follower_ports], flags


def main(argv: list[str]) -> None:
    role, log_path, port, follower_ports, flags = parse_argv(argv, {"--saver-thread", "--no-fdatasync"})
    trio.run(serve, role, log_path, port, follower_ports, "--saver-thread" in flags, "--no-fdatasync" not in flags)


if __name__ == "__main__":
    main(sys.argv[1:])
