"""A load point run by several generator processes (bench._loadworker), and the CPU every process
used in its measured window: so a figure can say whether the nodes or the load generator were the
limit. One Python generator process can saturate its core before the nodes saturate theirs (on a
machine with cores to spare); on a machine the nodes and generators fill, the recorded CPU says so."""

from __future__ import annotations

import collections
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trio

from rmqc.launcher import Process, ProcessFailed, cpu_s, stop_processes

from ._load import LoadResult, merge_results
from ._loadworker import GO_SIGNAL, READY_LINE, Share, WorkloadSpec, read_result

REPO = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# beyond the window: closed_loop's own bound for a hung system, then the write of the samples
EXIT_GRACE_S = 45.0


@dataclass
class SpreadRun:
    result: LoadResult
    refusals: collections.Counter[str]
    window_s: float
    # CPU seconds used in the measured window: per node, per generator process, and the harness
    node_cpu_s: dict[str, float]
    generator_cpu_s: list[float]
    harness_cpu_s: float
    # every CPU of the machine busy (not idle or waiting on I/O), whoever ran; of it, interrupt
    # work charged to no process (irq + softirq: much of loopback TCP) and steal (the hypervisor's);
    # the rest beyond the processes above is other work on the shared machine
    machine_cpu_s: float
    interrupt_cpu_s: float
    steal_cpu_s: float


def shares(spec: WorkloadSpec, clients: int, generators: int, warmup_s: float, duration_s: float,
           work: Path) -> list[Share]:
    """`clients` split into `generators` consecutive runs of client numbers, as even as they go."""
    if not 1 <= generators <= clients:
        raise ValueError(f"{generators} generator processes for {clients} clients")
    base, extra = divmod(clients, generators)
    out, first = [], 0
    for index in range(generators):
        count = base + (index < extra)
        out.append(Share(spec, first, count, warmup_s, duration_s, str(work / f"generator-{index}.json")))
        first += count
    return out


async def run_generators(spec: WorkloadSpec, clients: int, generators: int, warmup_s: float, duration_s: float,
                         work: Path, nodes: Mapping[str, Process], worker: str = "bench._loadworker") -> SpreadRun:
    """The load point in `generators` processes started together; the CPU of `nodes` and of the
    generators over the measured window (from the go signal + warm-up, for `duration_s`). `worker`
    is the generator's module: bench._loadworker (Trio), or one speaking its protocol
    (bench._etcd_grpc)."""
    work.mkdir(parents=True, exist_ok=True)
    parts = shares(spec, clients, generators, warmup_s, duration_s, work)
    procs = [Process(f"generator-{i}", [sys.executable, "-m", worker, share.to_json()],
                     work / f"generator-{i}.log", err_path=work / f"generator-{i}.err", cwd=REPO)
             for i, share in enumerate(parts)]
    try:
        for proc in procs:
            await proc.wait_for_output(f"(?m)^{READY_LINE}$", READY_TIMEOUT_S)
        for proc in procs:
            proc.signal(GO_SIGNAL)
        went = time.perf_counter()
        await _sleep_until(went + warmup_s)
        before, opened = _cpu(nodes, procs), time.perf_counter()
        await _sleep_until(went + warmup_s + duration_s)
        after, closed = _cpu(nodes, procs), time.perf_counter()
        for proc in procs:
            if (code := await proc.wait_exit(warmup_s + duration_s + EXIT_GRACE_S)) != 0:
                raise ProcessFailed(f"{proc.name} exited with {code}: {proc.tail()}")
    finally:
        stop_processes(procs)  # those still running after a failure; the others are reaped already
    results = [read_result(Path(share.result_path)) for share in parts]
    used = {name: after[name] - before[name] for name in before if name in after}
    return SpreadRun(merge_results([r for r, _ in results]),
                     sum((collections.Counter(refused) for _, refused in results), collections.Counter()),
                     closed - opened, {name: used[f"node {name}"] for name in nodes if f"node {name}" in used},
                     [used[f"generator {i}"] for i in range(len(procs)) if f"generator {i}" in used],
                     used.get("harness", 0.0), used["machine"], used["interrupts"], used["steal"])


async def _sleep_until(moment: float) -> None:
    await trio.sleep(max(0.0, moment - time.perf_counter()))


def _cpu(nodes: Mapping[str, Process], procs: list[Process]) -> dict[str, float]:
    """CPU seconds so far of every node, generator and this harness process (gone ones left out)."""
    pids = {**{f"node {name}": proc.pid for name, proc in nodes.items()},
            **{f"generator {i}": proc.pid for i, proc in enumerate(procs)}, "harness": os.getpid()}
    used = {name: used for name, pid in pids.items() if (used := cpu_s(pid)) is not None}
    return {**used, **machine_cpu_s()}


def machine_cpu_s() -> dict[str, float]:
    """CPU seconds all CPUs have spent since boot (/proc/stat) busy (every column but idle and
    iowait; steal, time the hypervisor gave to others, counts: this machine could not use it), in
    interrupts (irq + softirq) and stolen."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in stat.readline().split()[1:9])
    return {"machine": (user + nice + system + irq + softirq + steal) / CLOCK_TICKS,
            "interrupts": (irq + softirq) / CLOCK_TICKS, "steal": steal / CLOCK_TICKS}
