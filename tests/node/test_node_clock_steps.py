"""Wall clocks stepped and drifting under real `rmqc serve` processes (Debian's libfaketime).

Every node runs under libfaketime with its monotonic clock untouched (FAKETIME_DONT_FAKE_MONOTONIC,
which is what an NTP step does) and its wall clock read from a file the test rewrites: all clocks
stepped back an hour, or forward an hour, at the moment a broker master hangs; or each clock
drifting at its own rate from the start. In every case the hung master is replaced within its
heartbeat timeout plus the scan interval, and the live master of another group is not replaced.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.testing.cluster import CLUSTER, HEARTBEAT_TIMEOUT_MS, Cluster, FakeBroker, wait_until

pytestmark = pytest.mark.slow
SCAN_INTERVAL_MS = 2000
HOUR_S = 3600
# Wall-clock rates of the three nodes in the drift case: whichever node leads, a controller whose
# deadlines read the wall clock either misses the hung master's deadline for 12 s (0.25x) or sees
# 4 s between the live master's heartbeats, more than its 3 s timeout (8x).
DRIFT_RATES = (0.25, 8.0, 0.25)
DRIFT_STEP_S = 0.1  # how often the drifting clocks' offsets are rewritten


def libfaketime() -> str:
    """The multi-threaded libfaketime of Debian's `faketime` package (`make deps`, run by `make test`, installs it)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
                   + glob.glob("/usr/lib/faketime/libfaketimeMT.so.1"))
    assert found, "libfaketime not found: install Debian's faketime package (apt-get install faketime)"
    return found[0]


def set_offset(path: Path, offset_s: float) -> None:
    """The node's wall clock is real time plus `offset_s` from its next reading on (atomically:
    libfaketime reads the file at every call)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{offset_s:+.3f}\n")
    os.replace(tmp, path)


def faked_cluster(tmp_path: Path) -> tuple[Cluster, list[Path]]:
    cluster = Cluster.create(tmp_path, 3, settings=(f"scan_inactive_master_interval_ms={SCAN_INTERVAL_MS}",))
    clocks = []
    for node in cluster.nodes:
        clock = tmp_path / f"{node.node_id}.faketime"
        set_offset(clock, 0)
        node.env = {"LD_PRELOAD": libfaketime(), "FAKETIME_TIMESTAMP_FILE": str(clock), "FAKETIME_NO_CACHE": "1",
                    "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        clocks.append(clock)
    return cluster, clocks


async def start_group(nursery: trio.Nursery, cluster: Cluster, name: str) -> tuple[FakeBroker, FakeBroker]:
    """Two replicas heartbeating every 0.5 s (timeout 3 s), the first master, both in sync."""
    first, second = FakeBroker(name, cluster.addresses), FakeBroker(name, cluster.addresses)
    for broker in (first, second):
        await nursery.start(broker.run)
        await broker.register()
    assert first.client is not None
    elected = await first.client.elect_master(CLUSTER, name, first.broker_id)
    assert elected.code == 0, elected.remark
    epoch = int(elected.ext("masterEpoch"))

    async def both_in_sync() -> bool:
        assert first.client is not None
        answer = await first.client.alter_sync_state_set(name, first.broker_id, epoch,
                                                         [first.broker_id, second.broker_id], 1)
        return answer.code == 0

    await wait_until(both_in_sync, 10, f"{name}: sync state set {{1, 2}}")
    return first, second


async def master_of(client: ControllerClient, name: str) -> tuple[str | None, str | None]:
    answer = await client.get_replica_info(name)
    assert answer.code == 0, answer.remark
    return answer.ext("masterBrokerId"), answer.ext("masterEpoch")


async def drift(clocks: list[Path], rates: tuple[float, ...]) -> None:
    """Each clock runs at its own rate: its offset grows by (rate - 1) s per second."""
    started = trio.current_time()
    while True:
        elapsed = trio.current_time() - started
        for clock, rate in zip(clocks, rates, strict=True):
            set_offset(clock, (rate - 1) * elapsed)
        await trio.sleep(DRIFT_STEP_S)  # the drift moves in steps this long: the scenario, not a wait


@pytest.mark.parametrize("case", ["stepped back 1 h", "stepped forward 1 h", "drifting"])
async def test_a_hung_master_is_replaced_in_time_and_a_live_one_kept_whatever_the_wall_clocks_do(
        tmp_path: Path, case: str) -> None:
    cluster, clocks = faked_cluster(tmp_path)
    await cluster.start()
    try:
        async with trio.open_nursery() as nursery, ControllerClient(cluster.addresses, max_retries=10) as admin:
            if case == "drifting":
                nursery.start_soon(drift, clocks, DRIFT_RATES)
            await cluster.wait_leader(admin)
            hung, survivor = await start_group(nursery, cluster, "broker-a")
            await start_group(nursery, cluster, "broker-b")
            b_before = await master_of(admin, "broker-b")

            hung.hang()
            hung_at = trio.current_time()
            step_s = {"stepped back 1 h": -HOUR_S, "stepped forward 1 h": HOUR_S}.get(case)
            if step_s is not None:
                for clock in clocks:
                    set_offset(clock, step_s)

            bound_s = (HEARTBEAT_TIMEOUT_MS + SCAN_INTERVAL_MS) / 1000

            async def replaced() -> bool:
                return (await master_of(admin, "broker-a"))[0] == str(survivor.broker_id)

            await wait_until(replaced, bound_s, f"broker-a's hung master replaced within {bound_s} s ({case})")
            # at least a heartbeat timeout has passed since the step: a live master would have gone
            assert trio.current_time() - hung_at >= HEARTBEAT_TIMEOUT_MS / 1000 - 0.5
            assert await master_of(admin, "broker-b") == b_before
            nursery.cancel_scope.cancel()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await cluster.stop()
