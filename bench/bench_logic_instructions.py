"""Machine instructions per replicated write of rmqc's logic, counted by valgrind: an A/B of source
trees that this VM's drifting speed cannot blur.

bench_replicated_logic.py runs rmqc's logic (three Replicas in one process, the request decode, Raft,
the peer codec both ways, the FSM, the answers) and times it; on this VM the same code's time swings
by 20 % from one run to the next, so a cut of a few per cent needs dozens of alternating runs to
show. Here the same run goes under valgrind's cachegrind, which counts every instruction the process
executes (`I refs`): the count is the same from one run to the next, within about 0.5 %. Each point
runs twice, with `--writes` writes and with a third as many; the difference over the difference in
writes is the instructions per write, without the start-up, the imports and the election. What the
harness itself does per write (encoding the requests, decoding the answers) is in the count too, the
same for every tree.

What it does not see: cache misses. In `rmqc serve` the logic runs cold and costs 2-3x its hot figure
(docs/cpu-per-write.md), so a cut that touches less memory can be worth more than its instructions say.
The count depends on the interpreter, the libraries and the CPU (glibc picks its string functions
by CPU): compare trees in one run, not figures of different machines.

`--least` also counts bench._least_node's logic (the least a controller write needs, written flat:
docs/cpu-per-write.md) in the same harness: how far rmqc's write path is from it, in instructions.

Run: PYTHONPATH=src:. .venv/bin/python bench/bench_logic_instructions.py [--clients 1,16] [--writes 300]
      [--tree base=/tmp/old/src --tree new=src] [--least]
Needs valgrind (apt-get install valgrind; make test installs it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RMQC = "import sys; from bench.bench_replicated_logic import one_run; one_run(int(sys.argv[1]), int(sys.argv[2]), 0)"
# bench._least_node's logic in one process, its answers checked as one_run checks rmqc's
LEAST = ("import sys; from bench._least_node import run_in_process; from bench.bench_replicated_logic import check; "
         "c, w = int(sys.argv[1]), int(sys.argv[2]); check(run_in_process(c, w), len(range(0, w, c)) * c)")
I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
RUN_TIMEOUT_S = 1800  # valgrind runs Python 30-50x slower


class InstructionCountError(RuntimeError):
    """valgrind did not run, or did not report its count."""


def instructions(src: Path, clients: int, writes: int, child: str = RMQC) -> int:
    """What one run of `writes` writes at `clients` a batch executes, start-up included."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise InstructionCountError("valgrind is not installed (apt-get install valgrind)")
    # a fixed hash seed: with a random one, set and dict orders (and so the work) vary run to run
    env = {**os.environ, "PYTHONPATH": f"{src.resolve()}{os.pathsep}{REPO}", "PYTHONHASHSEED": "0"}
    result = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                             sys.executable, "-c", child, str(clients), str(writes)],
                            env=env, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    match = I_REFS.search(result.stderr)
    if result.returncode != 0 or match is None:
        raise InstructionCountError(f"the run under valgrind failed ({result.returncode}): {result.stderr[-600:]}")
    return int(match.group(1).replace(",", ""))


def per_write(src: Path, clients: int, writes: int, child: str = RMQC) -> float:
    """Instructions per write: two runs, `writes` and a third as many, their difference per write."""
    fewer = max(clients, writes // 3)
    if writes <= fewer:
        raise ValueError(f"--writes {writes} must be more than {fewer} (a third of it, at least one batch)")
    return (instructions(src, clients, writes, child) - instructions(src, clients, fewer, child)) / (writes - fewer)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,16", help="comma-separated writes in flight (a batch)")
    parser.add_argument("--writes", type=int, default=300, help="writes of the longer run of each point")
    parser.add_argument("--tree", action="append", metavar="NAME=SRC", help="an rmqc source tree (repeat)")
    parser.add_argument("--least", action="store_true",
                        help="also the least logic of a controller write (bench._least_node), in the same harness")
    args = parser.parse_args(argv)
    trees = [tree.partition("=")[::2] for tree in args.tree or [f"rmqc={REPO / 'src'}"]]
    print(f"instructions per replicated write of rmqc's logic (valgrind), {args.writes} writes a run:", flush=True)
    for clients in (int(text) for text in args.clients.split(",")):
        rows = [(name, per_write(Path(src), clients, args.writes)) for name, src in trees]
        if args.least:
            rows.append(("least logic", per_write(REPO / "src", clients, args.writes, LEAST)))
        for name, count in rows:
            print(f"  {clients:3d} clients  {name:12s} {count:12,.0f}   {count / rows[0][1]:.3f}x of {rows[0][0]}",
                  flush=True)


if __name__ == "__main__":
    main()
