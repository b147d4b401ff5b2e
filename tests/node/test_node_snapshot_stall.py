"""A node keeps answering while it writes a snapshot (docs/chaos.md: on a loaded disk the write
took seconds, and the driver waited for it: no Ready handled, no request answered, leadership lost).

The write is a task of its own, one short transaction per step, each step in the saver's thread
(rmqc.node._saver) one at a time with the driver's saves. The slow disk is a compaction of many
slow batches (each a 5 ms transaction) going on until the probes are done: requests that need the
driver (writes, 1005 reads) must be answered between two batches.

And the steps must not run in threads that contend with the busy event loop for the GIL (trio's
worker threads, before): under libfaketime (the chaos run's clock fault) those hand-offs stalled
every node for 1-2 s at a time until the snapshot was written (docs/chaos.md,
bench/repro_snapshot_stall.py). The saver's loop waits for each step with the GIL released."""

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


def slow_endless_sweep(storage: LmdbStorage) -> tuple[threading.Event, threading.Event]:
    """(entered, release): the compaction's sweep sets `entered`, then, until `release`, every
    batch is a 5 ms transaction that reports one entry deleted (a long sweep on a slow disk)."""
    entered, release = threading.Event(), threading.Event()
    real = storage.sweep_batch
    started = time.monotonic()

    def slow(limit: int) -> int:
        entered.set()
        if release.is_set() or time.monotonic() - started > HOLD_LIMIT_S:
            return real(limit)
        time.sleep(0.005)
        return 1

    storage.sweep_batch = slow  # type: ignore[method-assign]
    return entered, release


async def test_the_node_answers_writes_and_reads_while_a_snapshot_is_written(tmp_path: Path) -> None:
    config = single_config(tmp_path, snapshot_every_entries=SNAPSHOT_EVERY)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        assert node.storage is not None
        entered, release = slow_endless_sweep(node.storage)
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
                assert not release.is_set()  # every probe ran while the snapshot's compaction went on
                assert slowest_s < ANSWER_WITHIN_S, f"a probe waited {slowest_s:.2f} s for the snapshot"
        finally:
            release.set()
        await wait_until(lambda: node.storage.snapshot_meta().index > 0, what="the held snapshot written")
        await wait_until(lambda: node.storage.first_index() > 1, what="the log compacted behind it")
        nursery.cancel_scope.cancel()


async def test_the_snapshot_is_written_in_the_savers_thread(tmp_path: Path) -> None:
    """Regression: create_snapshot, the compaction's boundary and every sweep batch run in the
    saver's one thread, where the driver's saves run (before: in trio worker threads, whose GIL
    hand-offs stalled the loop; then in the loop's thread, where a stalled disk held the loop)."""
    config = single_config(tmp_path, snapshot_every_entries=SNAPSHOT_EVERY)
    async with trio.open_nursery() as nursery:
        node = await start(nursery, config)
        storage = node.storage
        assert storage is not None
        threads: dict[str, set[str]] = {"save": set(), "create_snapshot": set(), "compact": set(),
                                        "sweep_batch": set()}
        for name in threads:
            real = getattr(storage, name)

            def recorded(*args: object, _real: object = real, _name: str = name, **kwargs: object) -> object:
                threads[_name].add(threading.current_thread().name)
                return _real(*args, **kwargs)  # type: ignore[operator]

            setattr(storage, name, recorded)
        async with ControllerClient([config.listen_address]) as client:
            number = 0
            with trio.fail_after(10):
                while not threads["sweep_batch"] or node.replica.driver.snapshot_in_flight:
                    await register(client, f"broker-{number}", f"10.0.0.{number}:30911")
                    number += 1
        assert storage.snapshot_meta().index > 0 and storage.first_index() > 1
        assert threads == {"save": {"rmqc-saver"}, "create_snapshot": {"rmqc-saver"}, "compact": {"rmqc-saver"},
                           "sweep_batch": {"rmqc-saver"}}
        nursery.cancel_scope.cancel()
