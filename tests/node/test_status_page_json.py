"""The status page's HTTP side and its document (rmqc.node._status_page), on an in-process node over
real TCP: what / and /status.json answer, that the page is read-only, that a failover shows, and what
building the document for 10,000 groups costs the node's event loop.

Bound: SLICE_BOUND_MS is the most CPU time the build may hold the loop at once with 10,000 groups
of 3 brokers (CPU time: the wall time of a slice on this shared 2-core machine also counts the turns
of the other processes); measured 3.4-6.6 ms per slice of 500 groups, 55-105 ms for the whole build.
The design's tightest latency target is 50 ms (a dead master replaced).
"""

from __future__ import annotations

import gc
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio
from page_helpers import fill, start_node

from bench.bench_fsm import BROKERS_PER_GROUP, CLUSTER
from rmqc._gc import SERVING_YOUNG_THRESHOLD
from rmqc.client import ControllerClient
from rmqc.fsm import ElectMaster, Trigger
from rmqc.node._exporter import start_metrics_exporter
from rmqc.node._status_page import GROUPS_PER_SLICE, StatusPage

GROUPS = 10_000
SLICE_BOUND_MS = 25.0
HTTP_TIMEOUT_S = 5.0


def get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.fixture
def serving_gc() -> Iterator[None]:
    """The collector's young threshold as `rmqc serve` sets it (rmqc._gc.tune_for_serving); at
    CPython's default of 700 the test's own heap (60,000 commands) made a full collection land in
    the build (165 ms), which a serving node does not see at that rate."""
    before = gc.get_threshold()
    gc.set_threshold(SERVING_YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def test_10000_groups_are_built_in_short_slices(tmp_path: Path, serving_gc: None) -> None:
    async with trio.open_nursery() as nursery:
        node = await start_node(nursery, tmp_path)
        await fill(node, GROUPS)
        page = StatusPage(node)
        async with ControllerClient([node.config.listen_address]) as client:
            body = await page.build(client)
            body = await page.build(client)  # the second says what the first cost
        cost = page.last_cost
        assert cost is not None
        document = orjson.loads(body)
        print(f"{GROUPS} groups: {len(body) / 1e6:.1f} MB of JSON; the build held the loop {cost.loop_ms:.1f} ms "
              f"(CPU {cost.cpu_ms:.1f} ms) in {cost.slices} slices, the longest {cost.max_slice_ms:.1f} ms "
              f"(CPU {cost.max_slice_cpu_ms:.1f} ms)")
        assert len(document["groups"]) == GROUPS
        assert cost.slices == GROUPS // GROUPS_PER_SLICE + 2  # the rows' slices, the copy, the serialisation
        assert cost.max_slice_cpu_ms < SLICE_BOUND_MS
        assert document["previousBuild"]["slices"] == cost.slices
        columns = {name: i for i, name in enumerate(document["groupColumns"])}
        row = document["groups"][0]
        assert row[columns["masterId"]] == 1 and row[columns["syncStateSet"]] == list(range(1, BROKERS_PER_GROUP + 1))
        assert all(broker[3] for broker in row[columns["brokers"]])  # alive: heard a moment ago
        nursery.cancel_scope.cancel()


async def test_the_page_is_served_read_only_and_shows_a_failover(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        node = await start_node(nursery, tmp_path)
        await fill(node, 2)
        page = StatusPage(node)
        nursery.start_soon(page.run)
        exporter = start_metrics_exporter(node.node_metrics, 0, status_page=page)
        base = f"http://127.0.0.1:{exporter.port}"
        try:
            status, headers, html = await trio.to_thread.run_sync(get, base + "/")
            assert status == 200 and b'<script src="status.js"' in html
            assert headers["Content-Security-Policy"].startswith("default-src 'self'")
            status, headers, script = await trio.to_thread.run_sync(get, base + "/status.js")
            assert status == 200 and headers["Content-Type"].startswith("text/javascript") and b"status.json" in script
            status, _, refusal = await trio.to_thread.run_sync(get, base + "/status.json", "POST")
            assert status == 405 and b"read-only" in refusal
            status, _, metrics = await trio.to_thread.run_sync(get, base + "/metrics")
            assert status == 200 and b"rmqc_raft_term" in metrics  # still the metrics port

            group = node.replica.state.group("broker-0")
            await node.propose([ElectMaster(CLUSTER, "broker-0", Trigger.ADMIN, 2, group.master_epoch,
                                            group.sync_state_set_epoch, 10, requester_id=2)])

            def failovers() -> list[dict[str, object]]:
                status, _, body = get(base + "/status.json")
                return orjson.loads(body)["failovers"] if status == 200 else []

            async def shown() -> list[dict[str, object]]:
                return await trio.to_thread.run_sync(failovers)

            with trio.fail_after(10):
                while not (listed := await shown()):
                    await trio.sleep(0.1)
            (failover,) = listed
            assert (failover["group"], failover["oldMasterId"], failover["newMasterId"], failover["trigger"],
                    failover["masterEpoch"]) == ("broker-0", 1, 2, "admin", 2)
        finally:
            exporter.close()
        nursery.cancel_scope.cancel()
