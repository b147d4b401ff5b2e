"""The floor of a durable 1-client write on this machine (issue 21): what the disk and loopback
cost before any controller code runs.

Measured, each `--repeat` times after `--warmup` untimed repetitions, medians and p99:
- lmdb:     one LMDB write transaction (one put of --payload-bytes under the next 8-byte key, as a
            log appends) committed with sync, map_size large, as rmqc's storage opens it;
- append:   os.write of the payload to a file opened O_APPEND, then fdatasync (the file grows);
- pwrite:   os.pwrite of the payload into a pre-zeroed, fsync'd file, then fdatasync (it does not grow);
each alone and with 3 processes doing it at once (the 3 nodes of a cluster share one disk; started
together by a barrier, samples pooled); and
- rtt:      a loopback TCP round trip of the payload between two processes (TCP_NODELAY, blocking
            sockets: no event loop on either side), and the same with a Trio loop on both sides (as
            rmqc's nodes and clients are: what one hop costs this runtime, not the kernel alone).

The derived floor of a write = one flush (the slower of the leader's and one follower's, done in
parallel) + 4 one-way hops (client->leader, leader->follower, follower->leader, leader->client),
for the LMDB commit, the append log and the pre-zeroed log, with raw hops and with Trio hops. It is
composed from the samples (seeded): each
composite draws two flushes from the 3-at-once samples (the third node flushes too) and two round
trips (= 4 one-way hops), so its p50 and p99 carry the measured tails.

Run: .venv/bin/python bench/bench_floor.py [--repeat 2000] [--dir DIR]
The files go to a temporary directory under --dir (default bench-out/ of the repo: /tmp may be
tmpfs elsewhere, where a flush costs nothing), removed at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

import lmdb
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stats import percentile

REPO = Path(__file__).resolve().parent.parent
# As rmqc's LmdbStorage opens its environment by default (8 GiB map: a large sparse mapping).
LMDB_MAP_SIZE = 8 << 30
NODES = 3
HOPS_PER_WRITE = 4
COMPOSITES = 100_000
BARRIER_TIMEOUT_S = 60.0
ECHO_TIMEOUT_S = 10.0

Flush = Callable[[Path, int, int, bytes], list[float]]


def timed(repeat: int, warmup: int, step: Callable[[int], None]) -> list[float]:
    """Milliseconds of each of `repeat` calls of step(i), after `warmup` untimed ones."""
    for i in range(warmup):
        step(i)
    samples = []
    for i in range(warmup, warmup + repeat):
        started = time.perf_counter()
        step(i)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def lmdb_commits(directory: Path, repeat: int, warmup: int, payload: bytes) -> list[float]:
    env = lmdb.open(str(directory), map_size=LMDB_MAP_SIZE, sync=True)
    try:
        def commit(i: int) -> None:
            with env.begin(write=True) as txn:
                txn.put(struct.pack(">Q", i), payload)

        return timed(repeat, warmup, commit)
    finally:
        env.close()


def appends(directory: Path, repeat: int, warmup: int, payload: bytes) -> list[float]:
    fd = os.open(directory / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        def append(_i: int) -> None:
            os.write(fd, payload)
            os.fdatasync(fd)

        return timed(repeat, warmup, append)
    finally:
        os.close(fd)


def prezeroed_pwrites(directory: Path, repeat: int, warmup: int, payload: bytes) -> list[float]:
    """Into zeros written and flushed beforehand: real blocks, no size or extent change to flush."""
    path = directory / "prezeroed"
    size = (repeat + warmup) * len(payload)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        zeros = bytes(1 << 20)
        for offset in range(0, size, len(zeros)):
            os.pwrite(fd, zeros[:size - offset], offset)
        os.fsync(fd)

        def pwrite(i: int) -> None:
            os.pwrite(fd, payload, i * len(payload))
            os.fdatasync(fd)

        return timed(repeat, warmup, pwrite)
    finally:
        os.close(fd)


FLUSHES: dict[str, tuple[str, Flush]] = {
    "lmdb": ("LMDB write txn commit (sync)", lmdb_commits),
    "append": ("append + fdatasync", appends),
    "pwrite": ("pre-zeroed pwrite + fdatasync", prezeroed_pwrites),
}


def _flush_worker(kind: str, directory: Path, repeat: int, warmup: int, payload: bytes, barrier: Barrier,
                  results: multiprocessing.Queue[list[float]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    barrier.wait(BARRIER_TIMEOUT_S)
    results.put(FLUSHES[kind][1](directory, repeat, warmup, payload))


def flushes_at_once(kind: str, root: Path, processes: int, repeat: int, warmup: int, payload: bytes) -> list[float]:
    """`processes` processes doing `kind` at the same time, each in its own directory; pooled samples."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    results: multiprocessing.Queue[list[float]] = context.Queue()
    workers = [context.Process(target=_flush_worker, args=(kind, root / f"{kind}-{processes}-{i}", repeat, warmup,
                                                          payload, barrier, results)) for i in range(processes)]
    for worker in workers:
        worker.start()
    try:
        pooled = []
        for _ in workers:
            pooled += results.get(timeout=BARRIER_TIMEOUT_S + repeat)  # bounded: ~1 s per 1,000 flushes at worst
        return pooled
    finally:
        for worker in workers:
            worker.join(BARRIER_TIMEOUT_S)
            if worker.is_alive():
                worker.kill()


def _echo(listener: socket.socket, size: int) -> None:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with conn:
        while message := _receive(conn, size):
            conn.sendall(message)


def _receive(conn: socket.socket, size: int) -> bytes:
    """`size` bytes, or b"" when the peer has closed."""
    data = b""
    while len(data) < size:
        if not (chunk := conn.recv(size - len(data))):
            return b""
        data += chunk
    return data


def round_trips(repeat: int, warmup: int, payload: bytes) -> list[float]:
    listener = socket.create_server(("127.0.0.1", 0))
    address = listener.getsockname()
    # forked: the child inherits the listening socket (this script has no event loop or threads)
    echo = multiprocessing.get_context("fork").Process(target=_echo, args=(listener, len(payload)))
    echo.start()
    listener.close()
    try:
        with socket.create_connection(address, timeout=ECHO_TIMEOUT_S) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def round_trip(_i: int) -> None:
                conn.sendall(payload)
                if not _receive(conn, len(payload)):
                    raise ConnectionError("the echo process closed the connection")

            return timed(repeat, warmup, round_trip)
    finally:
        echo.join(ECHO_TIMEOUT_S)
        if echo.is_alive():
            echo.kill()


def _trio_echo(port_out: Connection, size: int) -> None:
    async def serve() -> None:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port_out.send(listener.socket.getsockname()[1])
        stream = await listener.accept()
        async with stream:
            while message := await _trio_receive(stream, size):
                await stream.send_all(message)

    trio.run(serve)


async def _trio_receive(stream: trio.SocketStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        if not (chunk := await stream.receive_some(size - len(data))):
            return b""
        data += chunk
    return data


def trio_round_trips(repeat: int, warmup: int, payload: bytes) -> list[float]:
    context = multiprocessing.get_context("spawn")
    port_in, port_out = context.Pipe(duplex=False)
    echo = context.Process(target=_trio_echo, args=(port_out, len(payload)))
    echo.start()

    async def measure() -> list[float]:
        if not port_in.poll(ECHO_TIMEOUT_S):
            raise TimeoutError(f"the Trio echo process did not listen within {ECHO_TIMEOUT_S:g} s")
        stream = await trio.open_tcp_stream("127.0.0.1", port_in.recv())  # TCP_NODELAY by default
        async with stream:
            samples = []
            for i in range(warmup + repeat):
                started = time.perf_counter()
                await stream.send_all(payload)
                if not await _trio_receive(stream, len(payload)):
                    raise ConnectionError("the Trio echo process closed the connection")
                if i >= warmup:
                    samples.append((time.perf_counter() - started) * 1000)
            return samples

    try:
        return trio.run(measure)
    finally:
        echo.join(ECHO_TIMEOUT_S)
        if echo.is_alive():
            echo.kill()


def summary(samples: list[float]) -> str:
    return (f"p50 {percentile(samples, 0.50):6.3f}  p90 {percentile(samples, 0.90):6.3f}  "
            f"p99 {percentile(samples, 0.99):6.3f}  max {max(samples):7.3f} ms  (n {len(samples)})")


def composed_floor(flushes: list[float], rtts: list[float], seed: int = 1) -> list[float]:
    """Samples of max(two flushes in parallel) + 4 one-way hops (= 2 round trips)."""
    rng = random.Random(seed)
    return [max(rng.choice(flushes), rng.choice(flushes)) + rng.choice(rtts) + rng.choice(rtts)
            for _ in range(COMPOSITES)]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="timed repetitions of each measurement")
    parser.add_argument("--warmup", type=int, default=100, help="untimed repetitions first")
    parser.add_argument("--payload-bytes", type=int, default=256, help="about one 1013 entry")
    parser.add_argument("--dir", type=Path, default=REPO / "bench-out", help="parent of the temporary data directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    payload = os.urandom(args.payload_bytes)
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="floor-", dir=args.dir))
    print(f"floor of a durable write: {args.repeat} repetitions, {args.payload_bytes} B, data in {root} "
          f"(load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)")
    try:
        at_once: dict[str, list[float]] = {}
        for kind, (title, _) in FLUSHES.items():
            alone = flushes_at_once(kind, root, 1, args.repeat, args.warmup, payload)
            at_once[kind] = flushes_at_once(kind, root, NODES, args.repeat, args.warmup, payload)
            print(f"{title:<32} alone      {summary(alone)}")
            print(f"{title:<32} {NODES} at once  {summary(at_once[kind])}")
        rtts = {"raw": round_trips(args.repeat, args.warmup, payload),
                "Trio": trio_round_trips(args.repeat, args.warmup, payload)}
        for hops, samples in rtts.items():
            print(f"{f'loopback TCP round trip, {hops}':<32} 2 procs    {summary(samples)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"floor = the slower of 2 parallel flushes (of the {NODES}-at-once samples) + {HOPS_PER_WRITE} one-way hops")
    for kind, (title, _) in FLUSHES.items():
        for hops, samples in rtts.items():
            print(f"floor, {title:<30} {hops:<4} hops  {summary(composed_floor(at_once[kind], samples))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
