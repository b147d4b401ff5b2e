"""The node's health (issue 33): what its liveness checks measure, and a snapshot of every check
that the metrics exporter's HTTP threads read for `/livez` and `/readyz`. rmqc.replica._health
judges the measurements against their bounds (LOOP_BOUND_S, WRITE_BOUND_S, DISK_PROBE_BOUND_S) and
renders the answers.

What "live" can honestly mean for a node whose HTTP endpoint runs in another thread than its
event loop: the HTTP thread answers even when the loop is stuck, so it must not just answer `ok`.
The loop publishes a snapshot every HEALTH_INTERVAL_S (its readiness checks and the time it was
made); the HTTP thread judges, by the snapshot's age, whether the loop still runs:

- `loop`: the event loop published within LOOP_BOUND_S. It fails while anything holds the loop:
  a driver pass that does not end, a snapshot step, a very long collector pause. A process
  stopped by SIGSTOP answers nothing at all (its HTTP thread stops too): the probe's own timeout
  sees that.
- `writes`: the saver's thread (rmqc.node._saver: every save and snapshot write) has not been in
  one call for longer than WRITE_BOUND_S. A write that hangs (a stalled disk, a hung fsync) no
  longer holds the loop, which goes on serving; this check is where it shows (tested with the
  storage fault hook's `stall`).
- `disk`: the data directory's filesystem answers: `statvfs` of the directory and a read of its
  `node.json`, in a worker thread every DISK_PROBE_INTERVAL_S, returned within DISK_PROBE_BOUND_S
  and without error (a hung NFS mount or device, a filesystem gone: EIO). It reads only: a full disk
  is the `disk_full` readiness check, not a reason to restart the process.

The HTTP threads only read two references the loop replaces whole (an immutable snapshot, an
immutable probe result): no lock, nothing of the replica is touched outside the loop's thread.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from rmqc.replica import (
    DiskProbe,
    HealthCheck,
    disk_check,
    endpoint_checks,
    loop_check,
    readiness_checks,
    writes_check,
)

__all__ = ["DISK_PROBE_INTERVAL_S", "HEALTH_INTERVAL_S", "HealthMonitor"]

HEALTH_INTERVAL_S = 0.25
DISK_PROBE_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class _Snapshot:
    published_s: float  # time.monotonic() in the loop's thread
    readiness: tuple[HealthCheck, ...]


class HealthMonitor:
    """Owned by a ControllerNode; `run` in its nursery. `checks(kind)` may be called from any thread."""

    def __init__(self, node: Any, *, publish: bool) -> None:
        self._node = node
        self._publish = publish  # an HTTP endpoint reads the snapshot (the metrics port is set)
        self._data_dir = Path(node.config.data_dir)
        self._snapshot: _Snapshot | None = None
        self._probe: DiskProbe | None = None  # the last probe, or the one in flight
        self._last_done: DiskProbe | None = None  # the last probe that returned

    async def run(self) -> None:
        # The disk probe only with the endpoints that need it: its worker thread hands the GIL to
        # and fro every second, and under an LD_PRELOAD'd clock (libfaketime, as rmqc chaos's
        # clock fault runs nodes) those hand-offs stalled the event loop 1.2-1.6 s and cost the
        # leadership (tests/cluster/test_snapshot_stall_faketime.py)
        if not self._publish:
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._probe_disk_forever)
            while True:
                self.publish()
                await trio.sleep(HEALTH_INTERVAL_S)

    def publish(self) -> None:
        """Loop thread: a snapshot for the HTTP threads."""
        status = self._node.status()
        readiness = () if status is None else readiness_checks(status)
        self._snapshot = _Snapshot(time.monotonic(), readiness)

    async def _probe_disk_forever(self) -> None:
        while True:
            self._probe = DiskProbe(time.monotonic())
            await trio.to_thread.run_sync(self._probe_once, self._probe, abandon_on_cancel=True)
            await trio.sleep(DISK_PROBE_INTERVAL_S)

    def _probe_once(self, probe: DiskProbe) -> None:
        """Worker thread: probe, and publish the result from here (a stuck loop must not make a
        disk that answered look hung)."""
        try:
            _probe_filesystem(self._data_dir)
            error = None
        except OSError as failure:
            error = f"{type(failure).__name__}: {failure}"
        done = DiskProbe(probe.started_s, time.monotonic(), error)
        self._probe = self._last_done = done

    # ----- the checks -----

    def liveness_here(self) -> tuple[HealthCheck, ...]:
        """Loop thread (the status answer): the loop runs, since it answers."""
        now = time.monotonic()
        return HealthCheck("loop", True, "the event loop answers this request"), self._disk(now), self._writes(now)

    def checks(self, kind: str) -> tuple[HealthCheck, ...]:
        """Any thread: the checks of `kind` ("livez" or "readyz") as of now, from the snapshot."""
        now = time.monotonic()
        snapshot = self._snapshot
        liveness = (loop_check(None if snapshot is None else snapshot.published_s, now), self._disk(now),
                    self._writes(now))
        return endpoint_checks(kind, liveness, None if snapshot is None else snapshot.readiness)

    def _writes(self, now: float) -> HealthCheck:
        saver = self._node.saver
        return writes_check(None if saver is None else saver.call_started_s, now, str(self._data_dir))

    def _disk(self, now: float) -> HealthCheck:
        return disk_check(str(self._data_dir), self._probe, self._last_done, now, probed=self._publish)


def _probe_filesystem(data_dir: Path) -> None:
    """Worker thread: the filesystem of the data directory answers a statvfs and a read."""
    os.statvfs(data_dir)
    identity = data_dir / "node.json"
    if identity.exists():
        descriptor = os.open(identity, os.O_RDONLY)
        try:
            os.read(descriptor, 4096)
        finally:
            os.close(descriptor)
