"""A disk that stalls for 1.5 s (three election timeouts of rmqc serve's defaults) on real `rmqc
serve` processes, with the storage fault hook's `stall` (every commit and its fsync held): the
leader keeps its leadership and its term, and every node goes on answering what needs no write of
its own while writes go on. On the leader the writes wait for its save (their entries are applied
after it), and are all acknowledged once the disk answers; on a follower they do not even wait.

Before the saver thread (rmqc.node._saver) the save ran in the event loop's thread: a stalled
disk held the whole node, a stalled leader sent no heartbeat, and its followers elected another
leader after the election timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
from test_node_disk_faults import acknowledged, apply_id, status_of
from test_node_health import nodes_on_small_disks

from rmqc.client import ControllerClient
from rmqc.remoting import RemotingCommand
from rmqc.testing.disk import SmallDisk

pytestmark = pytest.mark.slow

STALL_S = 1.5
PROBE_EVERY_S = 0.02
# The stalled node's longest answer to a status request during the stall. The election timeout
# (500 ms) is what a silent node costs; a healthy node answers in about a millisecond, and the
# loop waits at most the saver's patience (50 ms) for a save before it goes on.
SLOWEST_ANSWER_S = 0.25


@pytest.mark.parametrize("victim", ["leader", "follower"])
async def test_a_disk_stalled_for_a_second_holds_writes_not_the_node(tmp_path: Path, victim: str) -> None:
    with nodes_on_small_disks(tmp_path, 3, hook=True) as (cluster, disks):
        await cluster.start()
        try:
            async with ControllerClient(cluster.addresses, timeout_ms=20_000, max_retries=3) as client:
                leader_address = await cluster.wait_leader(client)
                for name in ("before-1", "before-2"):
                    assert acknowledged({name: await apply_id(client, name)}) == {name}
                before = await status_of(client, leader_address)
                stalled = next(node for node in cluster.nodes
                               if (node.address == leader_address) == (victim == "leader"))
                slowest, answers, acked_during = await _stall_under_load(client, disks[cluster.nodes.index(stalled)],
                                                                        stalled.address)
                after = await status_of(client, leader_address)
                assert (after["leader"], after["term"]) == (before["leader"], before["term"]), (before, after)
                assert slowest < SLOWEST_ANSWER_S, f"{stalled.node_id} answered a status request in {slowest:.3f} s"
                assert acknowledged(answers) == set(answers), answers  # every write of the stall, once it ended
                if victim == "follower":  # the other two commit without the stalled follower's save
                    assert acked_during, "no write acknowledged while a follower's disk stalled"
        except BaseException:
            print(cluster.logs())
            raise
        finally:
            await cluster.stop()


async def _stall_under_load(client: ControllerClient, disk: SmallDisk, address: str,
                            ) -> tuple[float, dict[str, RemotingCommand | None], set[str]]:
    """Writes one after another and status requests to the stalled node every PROBE_EVERY_S, while
    its disk stalls for STALL_S: (its slowest status answer, every write's answer, the writes
    acknowledged before the stall ended)."""
    answers: dict[str, RemotingCommand | None] = {}
    acked_during: set[str] = set()
    slowest = 0.0
    stall_over = trio.Event()

    async def writer() -> None:
        count = 0
        while not stall_over.is_set():
            count += 1
            name = f"during-{count}"
            answers[name] = await apply_id(client, name)
            if not stall_over.is_set() and acknowledged({name: answers[name]}):
                acked_during.add(name)

    async def prober() -> None:
        nonlocal slowest
        while not stall_over.is_set():
            started = time.perf_counter()
            await status_of(client, address)
            slowest = max(slowest, time.perf_counter() - started)
            await trio.sleep(PROBE_EVERY_S)

    async with trio.open_nursery() as nursery:
        disk.fail_writes("stall")
        nursery.start_soon(writer)
        nursery.start_soon(prober)
        await trio.sleep(STALL_S)
        stall_over.set()
        disk.free()
    return slowest, answers, acked_during
