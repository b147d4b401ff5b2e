"""etcd's native write path for the anchor: closed-loop KV Puts over gRPC (`/etcdserverpb.KV/Put`),
run as a load-generator process: `python -m bench._etcd_grpc SHARE_JSON`.

etcd's HTTP/JSON gateway (bench._etcd.put) makes etcd decode JSON and base64 and then call its own
gRPC server over loopback for every put: CPU a real etcd client (clientv3 speaks gRPC) never makes
it spend, so a comparison of CPU per write through the gateway flatters rmqc. Here each client
sends the Put itself.

No generated code: a PutRequest is two length-delimited protobuf fields (1 `key`, 2 `value`; the
others keep their defaults and are not sent), encoded by `encode_put_request`; the response is not
decoded (`put_answered` looks at its first byte), a call that ends with status OK is a write etcd
made durable on a quorum.

Why a process of its own: the harness is Trio, and grpcio's clients are its own threads (the sync
API) or asyncio (grpc.aio). Under trio-asyncio inside the harness every call would cross two
schedulers, in the process whose CPU per write is reported. A separate process runs grpcio as it is
meant to be run and costs only its calls; its CPU (every thread of it: grpc's C core polls in
threads of its own) is read from /proc over exactly the measured window, as bench._generators does
for the Trio generator processes. It speaks bench._loadworker's protocol (a `ready` line, the go
signal, the result as JSON), so bench._generators.run_generators starts and measures it
(`worker=WORKER`).

Which grpcio client, by what it cost per write (a 3-member etcd on the 2-core machine, busy with
other work too (load average 4-8), interleaved 3 s points, generator CPU per put): at 1 client a
blocking call in a thread 580-730 us, grpc.aio 800-1,080 us (its poller thread hands every
completion to the asyncio loop through a socket: more wake-ups per call), callbacks on `future()`
750-780 us; at 16-64 clients all three 390-480 us; at 256 clients grpc.aio 340-360 us, a thread
per client 540-550 us (the GIL handed between 256 threads). So: a thread per client blocking in
its call up to THREADED_UP_TO clients, grpc.aio on one asyncio loop beyond.

Like every closed loop of the suite (bench._load): one connection per client (each channel gets a
subchannel of its own, so its own TCP connection, rather than grpc's process-wide shared one), one
request outstanding per client, latency from the call to its answer, the puts answered inside the
measured window counted and sampled.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ._load import MAX_SAMPLES, LoadResult, merge_results
from ._loadworker import Share, WorkloadSpec, wait_for_go, write_result

WORKER = "bench._etcd_grpc"
FACTORY = "bench._etcd_grpc:PutLoad"
PUT_METHOD = "/etcdserverpb.KV/Put"
# a put etcd has not answered in this long counts as an error (the closed loop's own bound is 30 s)
CALL_TIMEOUT_S = 10.0
# up to this many clients, a thread each making blocking calls; beyond, grpc.aio (see above)
THREADED_UP_TO = 16
# one TCP connection per channel (grpc shares subchannels process-wide by default); no proxy
# lookup, no retries: every call is one request on the wire
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1), ("grpc.enable_http_proxy", 0),
                   ("grpc.enable_retries", 0))


class PutRequest(NamedTuple):
    key: bytes
    value: bytes


def varint(number: int) -> bytes:
    """`number` (>= 0) as a protobuf base-128 varint, least significant group first."""
    if number < 0:
        raise ValueError(f"varint of {number}")
    out = bytearray()
    while number > 0x7F:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def encode_put_request(request: PutRequest) -> bytes:
    """etcdserverpb.PutRequest on the wire: field 1 (`key`) and field 2 (`value`), both of wire
    type 2 (length-delimited): tags 0x0a and 0x12. Empty fields are left out, as protobuf does."""
    parts = []
    if request.key:
        parts += [b"\x0a", varint(len(request.key)), request.key]
    if request.value:
        parts += [b"\x12", varint(len(request.value)), request.value]
    return b"".join(parts)


def put_answered(data: bytes) -> bool:
    """The status is the answer; of the PutResponse only its first byte is looked at: field 1, the
    header (cluster, member, revision, raft term), which etcd always sets. (It must not return None:
    grpc takes a None from a deserializer for a failed one, status INTERNAL.)"""
    return data[:1] == b"\x0a"


@dataclass(frozen=True)
class PutLoad:
    """Puts of `value_size` bytes to the member at `address` (host:port), each client under keys
    of its own (bench/CLIENT/SEQ, as the gateway workload writes)."""

    address: str
    value_size: int

    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(FACTORY, {"address": self.address, "value_size": self.value_size})

    @classmethod
    def from_spec(cls, spec: WorkloadSpec) -> PutLoad:
        if spec.factory != FACTORY:
            raise ValueError(f"{WORKER} runs {FACTORY}, not {spec.factory!r}")
        return cls(**spec.kwargs)


class Window:
    """The measured window of one load and what a client does with each answer."""

    def __init__(self, warmup_s: float, duration_s: float) -> None:
        self.measure_from = time.perf_counter() + warmup_s
        self.stop_at = self.measure_from + duration_s

    def record(self, result: LoadResult, sent: float, done: float, answered: bool) -> None:
        if not self.measure_from <= done <= self.stop_at:
            return
        if not answered:
            result.errors += 1
            result.first_error = result.first_error or "a PutResponse without its header"
            return
        result.ops += 1
        if len(result.latencies_ms) < MAX_SAMPLES:
            result.latencies_ms.append((done - sent) * 1000)


def failed(result: LoadResult, error: Any) -> None:
    """A call ended with a status other than OK (grpc.RpcError, grpc.aio.AioRpcError)."""
    result.errors += 1
    result.first_error = result.first_error or f"{error.code().name}: {error.details()}"


def put_callable(channel: Any) -> Any:
    return channel.unary_unary(PUT_METHOD, request_serializer=encode_put_request, response_deserializer=put_answered)


async def closed_loop(load: PutLoad, clients: int, duration_s: float, warmup_s: float = 0.5,
                      first_client: int = 0) -> LoadResult:
    """bench._load.closed_loop's rules on asyncio and grpc.aio: `clients` channels each making one
    Put after another for warmup + duration seconds."""
    import grpc  # only the generator process needs grpcio

    result = LoadResult(clients, duration_s)
    value = b"v" * load.value_size
    window = Window(warmup_s, duration_s)
    channels = [grpc.aio.insecure_channel(load.address, options=CHANNEL_OPTIONS) for _ in range(clients)]

    async def client(index: int, channel: Any) -> None:
        put = put_callable(channel)
        prefix = f"bench/{index}/".encode()
        seq = 0
        while time.perf_counter() < window.stop_at:
            request = PutRequest(prefix + str(seq).encode(), value)
            sent = time.perf_counter()
            try:
                answered = await put(request, timeout=CALL_TIMEOUT_S)
            except grpc.aio.AioRpcError as error:
                failed(result, error)
                await asyncio.sleep(0.01)  # a refused connection must not turn into a busy loop
                continue
            window.record(result, sent, time.perf_counter(), answered)
            seq += 1

    try:
        async with asyncio.timeout(warmup_s + duration_s + 30):  # a hung etcd must not hang the suite
            await asyncio.gather(*(client(first_client + i, channel) for i, channel in enumerate(channels)))
    except TimeoutError:
        result.first_error = result.first_error or "the load outlasted its bound by 30 s"
    finally:
        await asyncio.gather(*(channel.close() for channel in channels))
    return result


def threaded_closed_loop(load: PutLoad, clients: int, duration_s: float, warmup_s: float = 0.5,
                         first_client: int = 0) -> LoadResult:
    """The same load from a thread per client, each blocking in grpc's sync unary call (its C core
    polls in the calling thread); each thread keeps its own tally, merged at the end."""
    import grpc

    value = b"v" * load.value_size
    window = Window(warmup_s, duration_s)
    parts = [LoadResult(1, duration_s) for _ in range(clients)]

    def client(index: int, result: LoadResult) -> None:
        with grpc.insecure_channel(load.address, options=CHANNEL_OPTIONS) as channel:
            put = put_callable(channel)
            prefix = f"bench/{index}/".encode()
            seq = 0
            while time.perf_counter() < window.stop_at:
                request = PutRequest(prefix + str(seq).encode(), value)
                sent = time.perf_counter()
                try:
                    answered = put(request, timeout=CALL_TIMEOUT_S)
                except grpc.RpcError as error:
                    failed(result, error)
                    time.sleep(0.01)
                    continue
                window.record(result, sent, time.perf_counter(), answered)
                seq += 1

    threads = [threading.Thread(target=client, args=(first_client + i, part), daemon=True)
               for i, part in enumerate(parts)]
    for thread in threads:
        thread.start()
    for thread in threads:  # a hung etcd must not hang the suite (the threads are daemons)
        thread.join(max(0.0, window.stop_at + CALL_TIMEOUT_S + 30 - time.perf_counter()))
    merged = merge_results(parts)
    if any(thread.is_alive() for thread in threads):
        merged.first_error = merged.first_error or "the load outlasted its bound by 30 s"
    return merged


def main(argv: list[str]) -> int:
    share = Share.from_json(argv[0])
    load = PutLoad.from_spec(share.spec)
    import grpc  # noqa: F401  (imported before `ready`: the import is not part of the window)

    wait_for_go()
    if share.clients <= THREADED_UP_TO:
        result = threaded_closed_loop(load, share.clients, share.duration_s, share.warmup_s, share.first_client)
    else:
        result = asyncio.run(closed_loop(load, share.clients, share.duration_s, share.warmup_s, share.first_client))
    write_result(Path(share.result_path), result, {})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
