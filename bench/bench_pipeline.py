"""Throughput of `rmqc analyze` (the Spark history pipeline) in local mode.

Generates a seeded synthetic export (default 10,000,000 rows over 100,000 broker groups in 4
controller clusters, one violation of each kind planted), writes it as Parquet, then runs the whole
pipeline with local[1] and local[2] and prints rows/s for each. It also checks that exactly the
planted violations were reported, so a fast but wrong run does not count.

    .venv/bin/python bench/bench_pipeline.py                      # the full run (tens of minutes)
    .venv/bin/python bench/bench_pipeline.py --rows 1000000 --groups 10000   # a quick one
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--templates", type=int, default=2_000, help="distinct scripted groups")
    parser.add_argument("--clusters", type=int, default=4, help="controller clusters")
    parser.add_argument("--cores", default="1,2", help="local[N] runs, comma separated")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--workdir", type=Path, default=Path("bench-out/pipeline"))
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def _generate(args: argparse.Namespace, path: Path):
    from rmqc.pipeline import synth

    config = synth.SynthConfig(
        groups=args.groups, rows_per_group=max(8, args.rows // args.groups),
        controller_clusters=args.clusters, seed=args.seed, templates=args.templates,
        span_ms=30 * synth.DAY_MS,
        plant={kind: 1 for kind in synth.PLANTABLE_KINDS},
    )  # fmt: skip
    started = time.perf_counter()
    history = synth.write_history(config, path)
    elapsed = time.perf_counter() - started
    size_mb = path.stat().st_size / 1e6
    print(f"generated {history.rows:,} rows over {args.groups:,} groups in {elapsed:.1f} s "
          f"({history.rows / elapsed:,.0f} rows/s), {size_mb:,.0f} MB Parquet", flush=True)
    return history


def _run(args: argparse.Namespace, cores: int, data: Path, planted) -> None:
    from rmqc.pipeline import make_spark_session, run_pipeline

    out = args.workdir / f"out-local{cores}"
    shutil.rmtree(out, ignore_errors=True)
    spark = make_spark_session(f"local[{cores}]", driver_memory=args.driver_memory,
                               shuffle_partitions=max(4, 2 * cores))
    try:
        started = time.perf_counter()
        summary = run_pipeline(spark, [data], out)
        elapsed = time.perf_counter() - started
    finally:
        spark.stop()
    found = {
        (r["kind"], r["controller_cluster"], r["broker_name"], r["index"], r["seq"])
        for r in pq.read_table(out / "violations").to_pylist()
    }
    expected = {(p.kind, p.controller_cluster, p.broker_name, p.index, p.seq) for p in planted}
    verdict = "exactly the planted violations" if found == expected else f"MISMATCH {found ^ expected}"
    print(f"local[{cores}]: {summary.rows:,} rows in {elapsed:.1f} s = {summary.rows / elapsed:,.0f} rows/s; "
          f"{summary.groups:,} groups, {summary.elections:,} elections, {summary.failovers.count:,} "
          f"failovers (p50 {summary.failovers.p50_ms} ms, p99 {summary.failovers.p99_ms} ms); {verdict}",
          flush=True)  # fmt: skip


def main() -> None:
    args = _parse()
    args.workdir.mkdir(parents=True, exist_ok=True)
    data = args.workdir / "history.parquet"
    history = _generate(args, data)
    for cores in (int(c) for c in args.cores.split(",")):
        _run(args, cores, data, history.planted)


if __name__ == "__main__":
    main()
