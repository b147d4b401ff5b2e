"""The CPU floor of a replicated durable write in Python + Trio: could any implementation on rmqc's
stack reach its CPU-per-write targets against etcd (<= 0.7x at 1 client, <= 0.5x from 16 on)?

Three minimal Trio processes on loopback (bench._floor_node), a leader and two followers, do the
least a replicated durable write must do, with none of rmqc's logic: the leader reads a request
(a 4-byte length prefix and a body, as long in all as rmqc's 1013 frame of the write load,
bench._scn_writes), sends it to both followers (one send each), appends it to a file and
fdatasyncs it, waits for one follower's ack (a majority with itself) and answers; a follower reads,
appends + fdatasyncs, acks. What arrives together is one batch on every node (group commit: one
fdatasync for everything read before it). The load is this process's Trio closed loop
(bench._load.closed_loop, `--clients` connections, one request outstanding each), and the CPU of
each server is read from /proc over the measured window and divided by the writes answered in it,
exactly as bench/bench_cpu_per_write.py does (its `in_process`, `Point` and printing). As there,
CPU the kernel spends in threads of its own (jbd2's journal commits, much of loopback TCP's softirq
work) is charged to no process, for the floor and for etcd alike.

Systems, alternating their order between rounds, medians printed:
- floor:        the nodes append + fdatasync in their event loop's thread;
- floor-saver:  (`--saver-thread`) through rmqc's saver thread (rmqc.node._saver), as `rmqc serve`;
- floor-nosync: (`--without-fdatasync`) the append without the fdatasync, not durable: what the
                flushes cost in CPU (the kernel's work for an fdatasync runs in the caller's context);
- least-saver:  (`--least-logic`) bench._least_node: floor-saver's nodes plus the least logic of a
                controller write, written flat (decode the 1013, checksummed Raft records, appends
                and acks, commit, the state machine on every node, the RocketMQ answer), loaded
                with `rmqc serve`'s own 1013 writes: what the protocol's work costs on this stack
                before any layering;
- rmqc:         (`--with-rmqc`) `rmqc serve`, loaded as bench_cpu_per_write.py loads it;
- etcd:         (`--with-etcd`, when installed) a 3-member etcd loaded over gRPC with Puts of the
                same size, as bench_cpu_per_write.py loads it; then the floor/etcd ratios of the
                servers' CPU per write. Without it the ratios are against the etcd figures quoted
                in ETCD_QUOTED_US (docs/cpu-per-write.md, "December 2026: etcd over gRPC": another run).

Run: PYTHONPATH=src:. .venv/bin/python bench/bench_cpu_floor.py [--clients 1,16,64,256] [--seconds 6]
      [--rounds 3] [--saver-thread] [--without-fdatasync] [--least-logic] [--with-rmqc] [--with-etcd]
      [--dir DIR]
The data goes to a temporary directory under --dir (default bench-out/ of the repo), removed at the end.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _etcd
from bench._floor_node import ANSWER, LENGTH_BYTES, READY
from bench._load import LoadError, RemotingConn, Workload
from bench._rmqc import RMQC_PROGRAM, WriteSequence
from bench._scn_writes import write_request_bytes
from bench.bench_cpu_per_write import (
    Point,
    System,
    add_round_options,
    etcd_grpc_points,
    in_process,
    median_points,
    print_point,
    print_ratios,
    rmqc_points,
    run_rounds,
)
from rmqc.launcher import Process, ProcessFailed, free_ports, stop_processes

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60.0  # three nodes importing trio (and rmqc's saver) at once on a busy machine
# Servers' CPU per write of etcd over gRPC, leader + 2 followers, from docs/cpu-per-write.md
# ("December 2026: etcd over gRPC, and the saver thread"): another run, on the same kind of machine.
ETCD_QUOTED_US = {1: 2178.0, 256: 475.0}
# The targets: rmqc's servers' CPU per write at most this fraction of etcd's, from this many clients on.
TARGETS = ((1, 0.7), (16, 0.5))
LEAST = "bench._least_node"


def target_at(clients: int) -> float | None:
    fractions = [fraction for first, fraction in TARGETS if clients >= first]
    return fractions[-1] if fractions else None


class FloorConn:
    """One client connection to the floor's leader: a request frame out, the answer frame back."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def call(self, request: bytes) -> bool:
        await self.stream.send_all(request)
        while len(self.buffer) < len(ANSWER):
            data = await self.stream.receive_some(65536)
            if not data:
                raise LoadError("the floor's leader closed the connection")
            self.buffer += data
        answer = bytes(self.buffer[:len(ANSWER)])
        del self.buffer[:len(ANSWER)]
        return answer == ANSWER

    async def aclose(self) -> None:
        await self.stream.aclose()


def request_frame() -> bytes:
    """A frame as long as rmqc's 1013 request frame (its own 4-byte length included)."""
    body = b"w" * (write_request_bytes() - LENGTH_BYTES)
    return len(body).to_bytes(LENGTH_BYTES, "big") + body


def floor_workload(port: int) -> Workload[FloorConn]:
    request = request_frame()

    async def open_conn(_client: int) -> FloorConn:
        return FloorConn(await trio.open_tcp_stream("127.0.0.1", port))

    async def op(conn: FloorConn, _client: int, _seq: int) -> bool:
        return await conn.call(request)

    return Workload(open_conn, op)


def least_workload(port: int) -> Workload[RemotingConn]:
    """The write load of `rmqc serve` (1013s of fresh ids, bench._scn_writes) to bench._least_node."""
    writes = WriteSequence(str(int(time.time() * 1000)), collections.Counter())

    async def open_conn(_client: int) -> RemotingConn:
        return await RemotingConn.open(f"127.0.0.1:{port}")

    async def op(conn: RemotingConn, client: int, _seq: int) -> bool:
        return await writes.write(conn, client)

    return Workload(open_conn, op, writes.refusals)


async def floor_points(root: Path, clients: list[int], seconds: float, options: list[str],
                       module: str = "bench._floor_node") -> list[Point]:
    """The three nodes of `module` started afresh, together (`options`: its own), then each client
    count's window in turn."""
    root.mkdir(parents=True)
    leader_port, *follower_ports = free_ports(3)
    roles = {"follower-1": ("follower", [follower_ports[0]]), "follower-2": ("follower", [follower_ports[1]]),
             "leader": ("leader", [leader_port, *follower_ports])}
    procs: dict[str, Process] = {}
    try:
        for name, (role, ports) in roles.items():
            argv = [sys.executable, "-m", module, role, str(root / f"{name}.log"), *map(str, ports)]
            procs[name] = Process(name, argv + options, root / f"{name}.out", cwd=REPO)
        for proc in procs.values():
            await proc.wait_for_output(f"(?m)^{READY} ", START_TIMEOUT_S)
        workload = least_workload(leader_port) if module == LEAST else floor_workload(leader_port)
        points = []
        for count in clients:
            points.append(await in_process(workload, count, seconds, procs, "leader"))
            if gone := [proc.name for proc in procs.values() if not proc.alive]:
                raise ProcessFailed(f"{', '.join(gone)} exited: {procs[gone[0]].tail()}")
        return points
    finally:
        stop_processes(list(procs.values()))


def print_quoted_ratios(name: str, rounds: list[list[Point]]) -> None:
    print(f"{name}/etcd, CPU per write of the servers, against etcd's figures from another run "
          "(docs/cpu-per-write.md, December 2026):")
    for index, point in enumerate(median_points(rounds)):
        if (quoted := ETCD_QUOTED_US.get(point.clients)) is None:
            print(f"  clients {point.clients:4d}: {point.servers_us:5.0f} us (no etcd figure quoted)")
            continue
        each = " ".join(f"{round_[index].servers_us / quoted:.2f}x" for round_ in rounds)
        print(f"  clients {point.clients:4d}: {point.servers_us:5.0f} / {quoted:5.0f} us = "
              f"{point.servers_us / quoted:.2f}x (rounds: {each})", flush=True)


def print_verdict(name: str, rounds: list[list[Point]], etcd_rounds: list[list[Point]] | None) -> None:
    """Per client count with a target: `name`'s servers' CPU per write against the target, and what is
    left under it (for a floor, what any logic on top of it may spend)."""
    etcd = {p.clients: p.servers_us for p in median_points(etcd_rounds)} if etcd_rounds else ETCD_QUOTED_US
    source = "this run's etcd" if etcd_rounds else "etcd's quoted figures"
    print(f"{name} against the targets ({source}):")
    for point in median_points(rounds):
        fraction, anchor = target_at(point.clients), etcd.get(point.clients)
        if fraction is None or anchor is None:
            continue
        ratio = point.servers_us / anchor
        verdict = "below the target" if ratio <= fraction else "ABOVE the target"
        print(f"  clients {point.clients:4d}: {ratio:.2f}x of etcd, target <= {fraction}x "
              f"({fraction * anchor - point.servers_us:+.0f} us per write left under it): {verdict}",
              flush=True)


async def bench(args: argparse.Namespace) -> None:
    clients = [int(count) for count in args.clients.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="cpu-floor-", dir=args.dir))
    print(f"CPU floor of a replicated durable write: {len(request_frame())} B requests, clients {clients}, "
          f"{args.seconds:g} s windows, {args.rounds} rounds, data in {root} (load average "
          f"{' '.join(f'{load:.2f}' for load in os.getloadavg())}, {os.cpu_count()} CPUs)", flush=True)
    variants = {"floor": [], "floor-saver": ["--saver-thread"] if args.saver_thread else None,
                "floor-nosync": ["--no-fdatasync"] if args.without_fdatasync else None}
    systems: dict[str, System] = {
        name: partial(floor_points, clients=clients, seconds=args.seconds, options=options)
        for name, options in variants.items() if options is not None}
    if args.least_logic:
        systems["least-saver"] = partial(floor_points, clients=clients, seconds=args.seconds,
                                         options=["--saver-thread"], module=LEAST)
    if args.with_rmqc:
        systems["rmqc"] = partial(rmqc_points, program=RMQC_PROGRAM, clients=clients, seconds=args.seconds)
    floors = [name for name in systems if name != "floor-nosync"]
    if args.with_etcd:
        if _etcd.etcd_binary() is None:
            print("etcd is not installed (apt-get install etcd-server): ratios against the quoted figures")
        else:
            systems["etcd"] = partial(etcd_grpc_points, clients=clients, seconds=args.seconds)
    try:
        results = await run_rounds(systems, args.rounds, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"medians of {args.rounds} rounds (load average now {os.getloadavg()[0]:.2f}):")
    for name, rounds in results.items():
        for point in median_points(rounds):
            print_point(name, point)
    for name in floors:
        if "etcd" in results:
            print_ratios(name, results[name], "etcd", results["etcd"])
        else:
            print_quoted_ratios(name, results[name])
        print_verdict(name, results[name], results.get("etcd"))
    for name, what in (("floor-saver", "the saver thread's cost"), ("floor-nosync", "without the fdatasyncs")):
        if name in results:
            variant, loop = median_points(results[name]), median_points(results["floor"])
            print(f"{what}, servers' CPU per write against floor: "
                  + ", ".join(f"{v.clients} clients {v.servers_us - p.servers_us:+.0f} us "
                              f"({v.servers_us / p.servers_us - 1:+.0%})" for v, p in zip(variant, loop, strict=True)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_options(parser, "1,16,64,256", 6.0)
    parser.add_argument("--saver-thread", action="store_true",
                        help="also the nodes saving through rmqc's saver thread, in the same rounds")
    parser.add_argument("--without-fdatasync", action="store_true",
                        help="also the nodes appending without fdatasync (not durable): the flushes' share of the CPU")
    parser.add_argument("--least-logic", action="store_true",
                        help="also the nodes with the least logic of a controller write (bench._least_node), "
                             "saving through rmqc's saver thread, loaded with rmqc's 1013 writes")
    parser.add_argument("--with-rmqc", action="store_true", help="also `rmqc serve` in the same rounds")
    parser.add_argument("--with-etcd", action="store_true",
                        help="etcd over gRPC in the same rounds (skipped when not installed)")
    parser.add_argument("--dir", type=Path, default=REPO / "bench-out", help="parent of the temporary data directory")
    trio.run(bench, parser.parse_args(argv))


if __name__ == "__main__":
    main()
