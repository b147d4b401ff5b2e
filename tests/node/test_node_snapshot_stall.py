"""A node keeps answering while it writes a snapshot (docs/chaos.md: on a loaded disk the write
took seconds, and the driver waited for it: no Ready handled, no request answered, leadership lost).

The slow disk is a create_snapshot held in its worker thread until the probes are done: requests
that need the driver (writes, 1005 reads) must be answered meanwhile."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import trio
from node_helpers import wait_until
from test_node_single import register, single_config, start

from rmqc.client import ControllerClient
from rmqc.storage import LmdbStorage

SNAPSHOT_EVERY = 40
HOLD_LIMIT_S = 15.0  # the held write gives up after this, should the test die before releasing it
ANSWER_WITHIN_S = 0.5  # a probe answered later than this means the snapshot silenced the node
PROBES = 10


def hold_create_snapshot(storage: LmdbStorage) -> tuple[threading.Event, threading.Event]:
    """(entered, release): create_snapshot sets `entered`, then waits for `release` before writing."""
    entered, release = threading.Event(), threading.Event()
    real = storage.create_snapshot

    def held(*args: object) -> object:
        entered.set()
        release.wait(HOLD_LIMIT_S)
        return real(*args)

    storage.create_snapshot = held  # type: ignore[method-assign]
    return entered, release


async def test_the_node_answers_writes_and_reads_while_a_snapshot_is_written(tmp_path: Path) -> None:
    config = single_config(tmp_path, snapshot_every_entries=SNAPSHOT_EVERY)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        assert node.storage is not None
        entered, release = hold_create_snapshot(node.storage)
        try:
            async with ControllerClient([config.listen_address]) as client:
                number = 0
                with trio.fail_after(10):
                    while not entered.is_set():  # 3 entries per broker: the snapshot comes soon
                        await register(client, f"broker-{number}", f"10.0.0.{number}:30911")
                        number += 1
                slowest_s = 0.0
                for probe in range(PROBES):
                    started = time.perf_counter()
                    with trio.move_on_after(2 * ANSWER_WITHIN_S):
                        await register(client, f"probe-{probe}", f"10.1.0.{probe}:30911")
                        await client.get_metadata()
                    slowest_s = max(slowest_s, time.perf_counter() - started)
                assert not release.is_set()  # every probe ran while the snapshot write was held
                assert slowest_s < ANSWER_WITHIN_S, f"a probe waited {slowest_s:.2f} s for the snapshot"
        finally:
            release.set()
        await wait_until(lambda: node.storage.snapshot_meta().index > 0, what="the held snapshot written")
        await wait_until(lambda: node.storage.first_index() > 1, what="the log compacted behind it")
        nursery.cancel_scope.cancel()
