"""rmqc's benchmark suite: `python -m bench run --quick|--full` measures every target of design.md
against the anchors (etcd 3.4, PySyncObj, rmqc in its single-queue shape) in one run, and writes
results.json plus report.md with PNG charts into bench-out/<timestamp>/.

The older single-purpose scripts beside this package (bench_raft_core.py, bench_storage.py, ...)
measure one layer in-process; this package measures whole clusters of processes on loopback.
"""
