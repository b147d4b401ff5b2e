"""`rmqc migrate from-java` at scale: how long reading, importing and verifying N broker groups of
three replicas takes. The source is a one-node rmqc cluster (it answers 1005, 1006, 1004 and 1012
as the Java controller does; its own failovers off, so the groups stay as written), filled with N
groups (ids 1-3, 1 elected, SyncStateSet {1}); the target a fresh three-node rmqc cluster. The
migration runs in this process (rmqc.migrate, the code the CLI calls), timed by phase, and must
verify with no difference.

Run: .venv/bin/python bench/bench_migrate.py [--groups N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rmqc.client import ControllerClient
from rmqc.migrate import diff_views, import_rows, java_leader, read_views, row_of_view
from rmqc.testing.cluster import Cluster

CLUSTER = "DefaultCluster"
FILL_CONCURRENCY = 64  # groups written at once while filling the source


async def fill(client: ControllerClient, names: list[str]) -> None:
    async def one(name: str) -> None:
        for broker_id in (1, 2, 3):
            answer = await client.apply_broker_id(CLUSTER, name, broker_id, f"10.0.0.{broker_id}:10911;1")
            assert answer.code == 0, answer.remark
        assert (await client.elect_master(CLUSTER, name, 1)).code == 0

    limit = trio.Semaphore(FILL_CONCURRENCY)

    async def bounded(name: str) -> None:
        async with limit:
            await one(name)

    async with trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(bounded, name)


async def measure(root: Path, groups: int) -> dict[str, object]:
    source = Cluster.create(root / "source", 1, settings=("elect_master_max_retry_count=0",))
    target = Cluster.create(root / "target", 3)
    await source.start()
    await target.start()
    try:
        names = {f"broker-{i:05d}": CLUSTER for i in range(groups)}
        async with ControllerClient(source.addresses, timeout_ms=30_000, max_retries=10) as java, \
                ControllerClient(target.addresses, timeout_ms=30_000, max_retries=10) as rmqc:
            await source.wait_leader(java)
            await target.wait_leader(rmqc)
            await fill(java, sorted(names))
            started = time.perf_counter()
            source_name = f"java controller {await java_leader(java)}"
            views = await read_views(java, names)
            rows = tuple(row_of_view(CLUSTER, view) for _, view in sorted(views.items()) if view is not None)
            read = time.perf_counter()
            await import_rows(rmqc, source_name, rows)
            imported = time.perf_counter()
            differences = diff_views(await read_views(java, names), await read_views(rmqc, names))
            verified = time.perf_counter()
            assert len(rows) == groups and differences == [], differences[:5]
            body_bytes = len(orjson.dumps({"source": source_name, "groups": rows}))
    finally:
        await source.stop()
        await target.stop()
    return {"groups": groups, "import_body_bytes": body_bytes, "read_s": round(read - started, 2),
            "import_s": round(imported - read, 3), "verify_s": round(verified - imported, 2),
            "total_s": round(verified - started, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rmqc-bench-migrate-") as root:
        print(orjson.dumps(trio.run(measure, Path(root), args.groups)).decode())


if __name__ == "__main__":
    main()
