"""One load generator design for every system under test: closed loop, one TCP connection per
client, one request outstanding per client, latency measured from send to complete answer.

The connection classes speak each system's own protocol over Trio streams (RocketMQ remoting for
rmqc, HTTP/1.1 JSON for etcd's gRPC gateway, a line protocol for the PySyncObj node wrapper), so
the client-side cost per request is of the same kind for all of them.
"""

from __future__ import annotations

import collections
import itertools
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson
import trio

from rmqc.acl import Credentials
from rmqc.node._tls import dial_tls
from rmqc.remoting import FrameDecoder, RemotingCommand, encode, make_request

RECEIVE_BYTES = 65536
# Latency samples kept per run: a 60 s run at 20,000 ops/s fits; beyond it we keep counting ops
# but stop storing samples (percentiles then describe the first part of the run).
MAX_SAMPLES = 2_000_000
# A response bigger than this from an anchor is a bug in our parsing, not something to buffer.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class LoadError(RuntimeError):
    """A request got no usable answer (connection lost, protocol error, bad status)."""


class ResponseTooLarge(LoadError):
    pass


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class RemotingConn:
    """One connection to an rmqc node; `call` sends one request and waits for its answer. With
    `credentials` every request is signed (RocketMQ ACL); `open` with an `ssl_context` speaks TLS."""

    def __init__(self, stream: trio.abc.Stream, address: str, credentials: Credentials | None = None) -> None:
        self.stream = stream
        self.address = address
        self.credentials = credentials
        self._decoder = FrameDecoder()
        self._ready: list[RemotingCommand] = []
        self._opaques = itertools.count(1)

    @classmethod
    async def open(cls, address: str, ssl_context: ssl.SSLContext | None = None,
                   credentials: Credentials | None = None) -> RemotingConn:
        host, port = split_address(address)
        tcp = await trio.open_tcp_stream(host, port)
        stream: trio.abc.Stream = tcp
        if ssl_context is not None:
            # the node's own sans-IO TLS stream: the load side's cost per request stays small on
            # a machine it shares with the nodes (trio.SSLStream costs several times more)
            stream = await dial_tls(tcp, ssl_context)
        return cls(stream, address, credentials)

    def request(self, code: int, ext: Mapping[str, object] | None = None, body: bytes | None = None,
                oneway: bool = False, version: int = 0) -> RemotingCommand:
        request = make_request(code, next(self._opaques), ext, body, oneway=oneway, version=version)
        if self.credentials is not None:
            self.credentials.sign(request)
        return request

    async def call(self, code: int, ext: Mapping[str, object] | None = None,
                   body: bytes | None = None, version: int = 0) -> RemotingCommand:
        """`version` is the sender's RocketMQ version ordinal (a NameServer reads a 103's body and
        answers a 105 in standard JSON only from a recent enough one)."""
        request = self.request(code, ext, body, version=version)
        opaque = request.opaque
        await self.stream.send_all(encode(request))
        while True:
            while self._ready:
                response = self._ready.pop(0)
                if response.opaque == opaque:
                    return response
            data = await self.stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise LoadError(f"{self.address} closed the connection")
            self._ready.extend(self._decoder.feed(data))

    async def oneway(self, code: int, ext: Mapping[str, object] | None = None) -> None:
        await self.stream.send_all(encode(self.request(code, ext, oneway=True)))

    async def send_oneway_batch(self, requests: list[tuple[int, Mapping[str, object]]]) -> None:
        """Several one-way requests in one write (a heartbeat burst)."""
        frames = [encode(self.request(code, ext, oneway=True)) for code, ext in requests]
        await self.stream.send_all(b"".join(frames))

    async def aclose(self) -> None:
        await self.stream.aclose()


class HttpConn:
    """A keep-alive HTTP/1.1 connection posting JSON (etcd's v3 gRPC gateway)."""

    def __init__(self, stream: trio.SocketStream, address: str) -> None:
        self.stream = stream
        self.address = address
        self._buffer = bytearray()

    @classmethod
    async def open(cls, address: str) -> HttpConn:
        host, port = split_address(address)
        return cls(await trio.open_tcp_stream(host, port), address)

    async def post_json(self, path: str, document: Mapping[str, Any]) -> tuple[int, Any]:
        body = orjson.dumps(document)
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.address}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        await self.stream.send_all(head + body)
        status, headers = await self._read_head()
        if headers.get("transfer-encoding") == "chunked":
            payload = await self._read_chunked()
        else:
            payload = await self._read_exactly(int(headers.get("content-length", "0")))
        return status, orjson.loads(payload) if payload else None

    async def _fill(self) -> None:
        data = await self.stream.receive_some(RECEIVE_BYTES)
        if not data:
            raise LoadError(f"{self.address} closed the connection")
        self._buffer += data
        if len(self._buffer) > MAX_RESPONSE_BYTES:
            raise ResponseTooLarge(f"{self.address}: more than {MAX_RESPONSE_BYTES} bytes buffered")

    async def _read_line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            await self._fill()
        line = bytes(self._buffer[:end])
        del self._buffer[:end + 2]
        return line

    async def _read_exactly(self, count: int) -> bytes:
        while len(self._buffer) < count:
            await self._fill()
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def _read_head(self) -> tuple[int, dict[str, str]]:
        status_line = await self._read_line()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while line := await self._read_line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        return status, headers

    async def _read_chunked(self) -> bytes:
        parts = []
        while size := int((await self._read_line()).split(b";")[0], 16):
            parts.append(await self._read_exactly(size))
            await self._read_line()
        await self._read_line()
        return b"".join(parts)

    async def aclose(self) -> None:
        await self.stream.aclose()


class LineConn:
    """A connection speaking `VERB args\\n` -> `OK ...\\n` (the PySyncObj node wrapper)."""

    def __init__(self, stream: trio.SocketStream, address: str) -> None:
        self.stream = stream
        self.address = address
        self._buffer = bytearray()

    @classmethod
    async def open(cls, address: str) -> LineConn:
        host, port = split_address(address)
        return cls(await trio.open_tcp_stream(host, port), address)

    async def ask(self, line: str) -> str:
        await self.stream.send_all(line.encode() + b"\n")
        while (end := self._buffer.find(b"\n")) < 0:
            data = await self.stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise LoadError(f"{self.address} closed the connection")
            self._buffer += data
            if len(self._buffer) > MAX_RESPONSE_BYTES:
                raise ResponseTooLarge(self.address)
        answer = bytes(self._buffer[:end]).decode()
        del self._buffer[:end + 1]
        return answer

    async def aclose(self) -> None:
        await self.stream.aclose()


C = TypeVar("C")


@dataclass
class LoadResult:
    clients: int
    duration_s: float
    ops: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    first_error: str = ""

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.duration_s if self.duration_s else 0.0


def merge_results(parts: list[LoadResult]) -> LoadResult:
    """One result of several generators' shares of the same measured window: clients, ops and
    errors summed, latency samples pooled, the first error kept."""
    merged = LoadResult(sum(p.clients for p in parts), max((p.duration_s for p in parts), default=0.0))
    for part in parts:
        merged.ops += part.ops
        merged.errors += part.errors
        merged.latencies_ms += part.latencies_ms
        merged.first_error = merged.first_error or part.first_error
    return merged


@dataclass
class Workload(Generic[C]):
    """How one client connects (`open(client_index)`, a connection with `aclose()`) and makes one
    request (`op(conn, client, seq)`, True when the system accepted it)."""

    open: Callable[[int], Awaitable[C]]
    op: Callable[[C, int, int], Awaitable[bool]]
    # why requests were refused (e.g. response code -> count); ops add to it, results report it
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)


_LOAD_ERRORS = (LoadError, OSError, trio.BrokenResourceError, trio.ClosedResourceError, ValueError, KeyError)


async def closed_loop(workload: Workload[C], clients: int, duration_s: float, warmup_s: float = 0.5,
                      first_client: int = 0) -> LoadResult:
    """`clients` connections each sending one request after another for warmup + duration seconds;
    counts and samples the requests that complete inside the measured window (those sent during the
    warm-up too: with hundreds of clients on a slow system one request can outlast the window).
    The clients are numbered from `first_client` (a generator process running its share of a load
    keeps the numbers, so the share's clients go to the same nodes as in one process)."""
    result = LoadResult(clients, duration_s)
    start = time.perf_counter()
    measure_from = start + warmup_s
    stop_at = measure_from + duration_s

    async def client(index: int) -> None:
        conn: Any = None
        seq = 0
        while time.perf_counter() < stop_at:
            try:
                if conn is None:
                    conn = await workload.open(index)
                sent = time.perf_counter()
                accepted = await workload.op(conn, index, seq)
                done = time.perf_counter()
            except _LOAD_ERRORS as error:
                result.errors += 1
                result.first_error = result.first_error or f"{type(error).__name__}: {error}"
                conn = None
                await trio.sleep(0.01)  # a refused connection must not turn into a busy loop
                continue
            seq += 1
            if done < measure_from or done > stop_at:
                continue
            if not accepted:
                result.errors += 1
                continue
            result.ops += 1
            if len(result.latencies_ms) < MAX_SAMPLES:
                result.latencies_ms.append((done - sent) * 1000)
        if conn is not None:
            with trio.move_on_after(1):
                await conn.aclose()

    with trio.move_on_after(warmup_s + duration_s + 30):  # a hung system must not hang the suite
        async with trio.open_nursery() as nursery:
            for index in range(first_client, first_client + clients):
                nursery.start_soon(client, index)
    return result
