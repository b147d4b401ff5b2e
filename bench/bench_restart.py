"""Restart of a node on a 1,000,000-entry history (issue 8: "serving again in <= 1 s").

The data directory is built once, the way the `full-restart` scenario builds it
(bench/_scn_cluster.py `build_history`: 1013 for each broker of --groups groups, then 1003 address
changes, with LmdbStorage and fsm commands; a snapshot at the last entry and the log compacted to
the last 1,000 entries), and kept in --dir for later runs. Then, each printed as a median of --runs:

1. import: wall time of a fresh interpreter doing what `rmqc serve` imports before it starts the
   node (`rmqc.cli.main`, `rmqc.cli.serve`, `rmqc.node`), beside a bare interpreter, and which heavy packages that
   import pulls in (none of typer, rich, cattrs, prometheus_client, pyspark, pandas should be there).
2. storage: `LmdbStorage` open + initial_state() + snapshot() (data read and checksummed).
3. restore: `ControllerState.restore` of the snapshot (10,000 groups): the first one in a fresh
   process (as on a restart), and repeated in this process.
4. process: a real `rmqc serve` process on the directory, from spawn until its port accepts a
   connection, until it answers a 60001 status request, and until it accepts a write (1013; this
   one includes the node's own election); the same on an empty data directory (runs interleaved),
   so the difference is what the history costs.

Run: .venv/bin/python bench/bench_restart.py [--dir DIR] [--runs N] [--entries N] [--groups N]
      [--only import,storage,restore,process]
The directory should be on the disk being measured (default: bench-out/restart under the repo).
A/B against another source tree (e.g. `git archive <commit> src | tar -x -C /tmp/base`): run with
PYTHONPATH=/tmp/base/src; the subprocesses (and the `rmqc` script) inherit it.
Each process run adds an entry or two to the directory's log; that does not change the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rmqc
from rmqc import fsm
from rmqc.launcher import RMQC as RMQC_BIN, Process, free_ports, serve_argv
from rmqc.remoting import RMQC_NODE_STATUS, FrameDecoder, RequestCode, ResponseCode, encode, make_request
from rmqc.storage import LmdbStorage

REPO = Path(__file__).resolve().parent.parent
HEAVY_PACKAGES = ("typer", "click", "rich", "cattrs", "attrs", "prometheus_client", "pyspark", "pandas", "pyarrow")
SERVE_IMPORTS = "import rmqc.cli.main, rmqc.cli.serve, rmqc.node"
START_BOUND_S = 60.0  # a start slower than this is a failure, not a figure
POLL_PAUSE_S = 0.002
STOP_BOUND_S = 10.0
RESTORE_MIN_RUNS = 21  # restore is cheap to repeat, and the machine is shared: more runs, steadier median


def ensure_history(directory: Path, entries: int, groups: int) -> dict:
    """The cached data directory, built unless a previous run left one of the same shape."""
    marker = directory / "bench_restart.json"
    if marker.exists():
        built = json.loads(marker.read_text())
        if built.get("entries") == entries and built.get("groups") == groups:
            return built
    # Imported only to build: the harness modules follow the working tree, while an A/B run against an
    # older tree (PYTHONPATH, see above) measures on the directory built before.
    from bench._scn_cluster import build_history

    print(f"building {entries:,} entries over {groups:,} groups in {directory} (once) ...", flush=True)
    built = build_history(directory, entries, groups, snapshot=True)
    marker.write_text(json.dumps(built))
    return built


def median_of(runs: int, measure: Callable[[], float]) -> tuple[float, list[float]]:
    samples = [measure() for _ in range(runs)]
    return statistics.median(samples), samples


def fmt_ms(samples: list[float]) -> str:
    return " ".join(f"{s * 1000:.0f}" for s in samples)


# ----- 1. imports --------------------------------------------------------------------------------


def interpreter_s(statement: str) -> tuple[float, float]:
    """(wall, CPU) seconds of a fresh interpreter running `statement`; CPU time (user + system)
    moves far less than wall time with the load of the other processes on the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    wall_s = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall_s, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(statement: str) -> list[str]:
    probe = f"{statement}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout.split()
    return [name for name in HEAVY_PACKAGES if name in loaded]


def top_self_imports(statement: str, count: int = 12) -> list[tuple[str, float]]:
    """Packages with the most own import time (-X importtime, summed per top-level package)."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], check=True,
                         capture_output=True, text=True).stderr
    totals: dict[str, float] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own_us, _cumulative, name = line[len("import time:"):].split("|")
        name = name.strip()
        package = ".".join(name.split(".")[:2]) if name.startswith("rmqc.") else name.split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(own_us) / 1000
    return sorted(totals.items(), key=lambda item: -item[1])[:count]


def bench_imports(runs: int) -> None:
    for label, statement in (("bare interpreter", "pass"), (f"serve path `{SERVE_IMPORTS}`", SERVE_IMPORTS)):
        samples = [interpreter_s(statement) for _ in range(runs)]
        wall = [wall_s for wall_s, _cpu_s in samples]
        cpu = [cpu_s for _wall_s, cpu_s in samples]
        print(f"import: {label}: wall median {statistics.median(wall) * 1000:.0f} ms ({fmt_ms(wall)}), "
              f"CPU median {statistics.median(cpu) * 1000:.0f} ms ({fmt_ms(cpu)})")
    print(f"import: heavy packages on the serve path: {', '.join(heavy_imports(SERVE_IMPORTS)) or 'none'}")
    top = ", ".join(f"{name} {ms:.1f}" for name, ms in top_self_imports(SERVE_IMPORTS))
    print(f"import: own time per package (ms, one -X importtime run): {top}")


# ----- 2. storage and 3. restore -----------------------------------------------------------------


def storage_read_s(directory: Path) -> float:
    started = time.perf_counter()
    with LmdbStorage(directory) as storage:
        storage.initial_state()
        storage.snapshot()
    return time.perf_counter() - started


def bench_storage(directory: Path, runs: int) -> None:
    median, samples = median_of(runs, lambda: storage_read_s(directory))
    print(f"storage: LmdbStorage open + initial_state + snapshot: median {median * 1000:.1f} ms ({fmt_ms(samples)})")


def restore_s(data: bytes) -> tuple[float, float]:
    """(wall, CPU) seconds of one ControllerState.restore."""
    state = fsm.ControllerState()
    started, started_cpu = time.perf_counter(), time.process_time()
    state.restore(data)
    return time.perf_counter() - started, time.process_time() - started_cpu


FIRST_RESTORE = """
import sys, time
from rmqc import fsm
from rmqc.storage import LmdbStorage
with LmdbStorage(sys.argv[1], readonly=True) as storage:
    data = storage.snapshot().data
state = fsm.ControllerState()
started, started_cpu = time.perf_counter(), time.process_time()
state.restore(data)
print(time.perf_counter() - started, time.process_time() - started_cpu)
"""


def first_restore_s(directory: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of the first restore in a fresh process, as on a restart: its memory is
    new to the process (page faults), unlike a restore repeated in one process."""
    out = subprocess.run([sys.executable, "-c", FIRST_RESTORE, str(directory)], check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[0]), float(out[1])


def bench_restore(directory: Path, runs: int) -> None:
    first = [first_restore_s(directory) for _ in range(runs)]
    print(f"restore: first ControllerState.restore in a fresh process, {runs} processes: wall median "
          f"{statistics.median(w for w, _c in first) * 1000:.1f} ms, CPU median "
          f"{statistics.median(c for _w, c in first) * 1000:.1f} ms")
    with LmdbStorage(directory, readonly=True) as storage:
        data = storage.snapshot().data
    samples = [restore_s(data) for _ in range(max(runs, RESTORE_MIN_RUNS))]
    wall = [wall_s for wall_s, _cpu_s in samples]
    cpu = [cpu_s for _wall_s, cpu_s in samples]
    groups = fsm.ControllerState()
    groups.restore(data)
    snapshot_cpu = []
    for _ in range(max(runs, RESTORE_MIN_RUNS)):
        started_cpu = time.process_time()
        groups.snapshot()
        snapshot_cpu.append(time.process_time() - started_cpu)
    print(f"snapshot: ControllerState.snapshot of the same state (a node takes one every N entries), "
          f"{len(snapshot_cpu)} runs: CPU median {statistics.median(snapshot_cpu) * 1000:.1f} ms, "
          f"min {min(snapshot_cpu) * 1000:.1f} ms")
    print(f"restore: ControllerState.restore of {len(groups):,} groups ({len(data) / 1e6:.1f} MB), "
          "repeated in one process, "
          f"{len(samples)} runs: "
          f"wall median {statistics.median(wall) * 1000:.1f} ms, CPU median {statistics.median(cpu) * 1000:.1f} ms, "
          f"CPU min {min(cpu) * 1000:.1f} ms")


# ----- 4. a real `rmqc serve` process -------------------------------------------------------------


def call(address: tuple[str, int], code: int, ext: dict[str, object] | None, timeout_s: float) -> int | None:
    """One request on a fresh connection: the response code, or None if the node is not there yet."""
    try:
        with socket.create_connection(address, timeout=timeout_s) as sock:
            sock.sendall(encode(make_request(code, 1, ext)))
            decoder = FrameDecoder()
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                for response in decoder.feed(chunk):
                    return response.code
    except OSError:
        return None


def wait_for(condition: Callable[[], bool], started: float, proc: Process) -> float:
    while not condition():
        if proc.returncode is not None:
            raise RuntimeError(f"rmqc serve exited with {proc.returncode} before serving")
        if time.perf_counter() - started > START_BOUND_S:
            raise RuntimeError(f"rmqc serve not serving after {START_BOUND_S} s")
        time.sleep(POLL_PAUSE_S)
    return time.perf_counter() - started


def connects(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=0.5).close()
        return True
    except OSError:
        return False


def first_id_of_a_new_group(broker_name: str) -> dict[str, object]:
    """1013 ext fields creating a new broker group: one log entry, accepted by any leader."""
    return {"clusterName": "DefaultCluster", "brokerName": broker_name, "appliedBrokerId": 1,
            "registerCheckCode": "10.255.0.1:10911;1"}


def serve_once(directory: Path, log_path: Path, run: int) -> tuple[float, float, float]:
    """Seconds from spawn until (connect, 60001 answered, 1013 accepted)."""
    (port,) = free_ports(1)
    address = ("127.0.0.1", port)
    argv = serve_argv("n0", f"n0-127.0.0.1:{port}", directory, program=[RMQC_BIN])
    started = time.perf_counter()
    proc = Process(f"restart-{run}", argv, log_path)
    try:
        listening = wait_for(lambda: connects(address), started, proc)
        status = wait_for(lambda: call(address, RMQC_NODE_STATUS, None, 1.0) == ResponseCode.SUCCESS, started, proc)
        ext = first_id_of_a_new_group(f"restart-{os.getpid()}-{run}")
        write = wait_for(lambda: call(address, RequestCode.CONTROLLER_APPLY_BROKER_ID, ext, 1.0)
                         == ResponseCode.SUCCESS, started, proc)
    finally:
        proc.stop(grace_s=STOP_BOUND_S)  # SIGTERM, SIGKILL after the grace, reaped
    return listening, status, write


def bench_process(directory: Path, runs: int) -> None:
    """The history's data directory against an empty one, runs interleaved so both see the same load."""
    log_path = directory.parent / "bench_restart-serve.log"
    empty = directory.parent / "empty"
    samples: dict[str, list[tuple[float, float, float]]] = {"1M-entry history": [], "empty data dir": []}
    for run in range(runs):
        shutil.rmtree(empty, ignore_errors=True)
        samples["empty data dir"].append(serve_once(empty, log_path, run))
        samples["1M-entry history"].append(serve_once(directory, log_path, run))
    shutil.rmtree(empty, ignore_errors=True)
    for name, runs_of_dir in samples.items():
        for label, column in (("port accepts", 0), ("60001 answered", 1), ("1013 accepted", 2)):
            values = [sample[column] for sample in runs_of_dir]
            print(f"process ({name}): `rmqc serve` spawn -> {label}: median {statistics.median(values) * 1000:.0f} ms "
                  f"({fmt_ms(values)})")


STEPS: dict[str, Callable[[Path, int], None]] = {
    "import": lambda _directory, runs: bench_imports(runs),
    "storage": bench_storage,
    "restore": bench_restore,
    "process": bench_process,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=REPO / "bench-out" / "restart" / "history")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--only", default=",".join(STEPS))
    args = parser.parse_args()
    built = ensure_history(args.dir, args.entries, args.groups)
    print(f"rmqc from {Path(rmqc.__file__).parent}")
    print(f"history: {built['entries']:,} entries, {built['groups']:,} groups, snapshot + log compacted to the last "
          f"1,000 entries, file {built['file_mb']} MB (built in {built['build_s']} s); load {os.getloadavg()[0]:.2f}")
    for step in args.only.split(","):
        STEPS[step](args.dir, args.runs)


if __name__ == "__main__":
    main()
