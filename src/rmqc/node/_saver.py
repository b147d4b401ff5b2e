"""The node's disk writes in a thread of their own, waited for a short while in the event loop.

The driver saves each Ready through this (rmqc.replica.Saver). A save is handed to the saver
thread and the event loop waits for it, GIL released, for at most SAVE_PATIENCE_S: nearly every
save (one journal record + fdatasync, about 1-3 ms) ends within it, and the driver goes on at
once, as when it saved itself. A save that takes longer (a stalled or saturated disk) is left to
the thread: the driver keeps the Raft core fed and sends heartbeats and appends meanwhile, so a
stalled disk holds the node's writes, not its leadership, and the node answers everything that
needs no write of its own. The thread reports the end through the Trio token.

Why the loop waits at all, rather than always going on at once: with the loop blocked on the
thread's answer, the thread runs its Python (the record's encoding, the fault hook) without
contending for the GIL, and hands it back without a forced switch. Contended hand-offs cost the
loop a switch interval each (5 ms), and under libfaketime (the chaos run's clock fault) far more
(bench/repro_snapshot_stall.py). The snapshot writer's storage steps go through the same thread
(`run`), one at a time with the saves, so the loop never waits on the storage's writer lock
behind a stalled write.

The hand-offs are bytes on two pipes (a job's number to the thread, its end back), the waits a
blocking `read` and a `select` with the patience as its timeout: no timed lock or condition wait.
libfaketime wraps those (`sem_clockwait`, `pthread_cond_timedwait`), and under the chaos run's
clock fault an Event-based hand-off took 100-200 ms per save with the loop blocked in it (every
node's probes timed out in tests/cluster/test_snapshot_stall_faketime.py); on pipes it costs the
same 0.1 ms with and without libfaketime.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import trio

from rmqc.raft import Entry, HardState, Snapshot

__all__ = ["SAVE_PATIENCE_S", "BackgroundSaver"]

log = logging.getLogger("rmqc.node")

_T = TypeVar("_T")

# How long the event loop waits for a save before leaving it to the thread: far above a healthy
# save (1-3 ms here, 10-30 ms on a busy disk), far below the election timeout (500 ms by default),
# so a stalled disk costs the loop at most this once per stall.
SAVE_PATIENCE_S = 0.05


class _Job:
    """One call for the saver thread; `finished` and `detached` change under `lock` only, so the
    call's end is reported exactly once: to the waiting loop, or (detached) through the token."""

    __slots__ = ("call", "detached", "error", "finished", "lock", "on_detached_end", "result")

    def __init__(self, call: Callable[[], Any]) -> None:
        self.call = call
        self.lock = threading.Lock()  # never waited on with a timeout: held for two assignments
        self.finished = False
        self.detached = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.on_detached_end: Callable[[_Job], None] | None = None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class BackgroundSaver:
    """rmqc.replica.Saver for `rmqc serve`: see the module's docstring. `start()` in the event
    loop's thread (it takes the Trio token), `close()` on the way out (waits for the last call)."""

    def __init__(self, storage: Any, *, patience_s: float | None = None) -> None:
        self._storage = storage
        # read here, not bound at import: tests on Trio's virtual clock wait for every save
        self._patience_s = SAVE_PATIENCE_S if patience_s is None else patience_s
        self._jobs: deque[_Job | None] = deque()  # taken by the thread, one per byte on _job_pipe
        self._job_pipe = os.pipe()  # (read, write): a byte per job submitted
        self._end_pipe = os.pipe()  # a byte per job ended that the loop still waits for
        self._thread = threading.Thread(target=self._work, name="rmqc-saver", daemon=True)
        self._token: trio.lowlevel.TrioToken | None = None
        self.on_save_finished: Callable[[Exception | None], None] = _unset
        self.left_to_background = 0  # saves the loop stopped waiting for
        # time.monotonic() when the thread's current call began (None: idle); read by any thread
        self.call_started_s: float | None = None
        self._closing = False  # a call that ends after close() began is reported to no one

    def start(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._thread.start()

    def close(self) -> None:
        """Wait for the call under way (a stalled disk holds the exit as long as it holds the write)."""
        self._closing = True
        if self._thread.is_alive():
            self._submit(None)
            self._thread.join()
        for fd in (*self._job_pipe, *self._end_pipe):
            os.close(fd)

    # ----- rmqc.replica.Saver -----

    def save(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None) -> bool:
        job = _Job(partial(self._storage.save, hard_state, entries, snapshot))
        job.on_detached_end = self._save_ended
        if self._submit_and_wait(job):
            job.outcome()  # raises what storage.save raised
            return True
        self.left_to_background += 1
        log.warning("saving %d entries takes more than %d ms: the save goes on in the background; the node "
                    "keeps sending heartbeats and answers what needs no write", len(entries),
                    self._patience_s * 1000)
        return False

    def _save_ended(self, job: _Job) -> None:
        error = job.error
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: not the disk's
        self.on_save_finished(error)

    # ----- other writes, one at a time with the saves -----

    async def run(self, call: Callable[[], _T]) -> _T:
        """`call()` in the saver thread, after any save before it; waited for in the loop up to the
        patience, then awaited (the loop runs meanwhile)."""
        job = _Job(call)
        ended = trio.Event()
        job.on_detached_end = lambda _job: ended.set()
        if not self._submit_and_wait(job):
            await ended.wait()
        result: _T = job.outcome()
        return result

    def _submit_and_wait(self, job: _Job) -> bool:
        """True: the call ended within the patience (its outcome is in the job). False: it goes on,
        and `job.on_detached_end` runs in the loop's thread when it ends."""
        self._submit(job)
        end = self._end_pipe[0]
        if select.select([end], [], [], self._patience_s)[0]:
            os.read(end, 1)
            return True
        with job.lock:
            if not job.finished:
                job.detached = True
                return False
        os.read(end, 1)  # it ended as the wait did: its byte is written, or about to be
        return True

    def _submit(self, job: _Job | None) -> None:
        self._jobs.append(job)
        os.write(self._job_pipe[1], b"\0")

    # ----- the thread -----

    def _work(self) -> None:
        while os.read(self._job_pipe[0], 1) and (job := self._jobs.popleft()) is not None:
            self.call_started_s = time.monotonic()
            try:
                job.result = job.call()
            except BaseException as error:  # handed to the loop's thread, raised there
                job.error = error
            self.call_started_s = None
            with job.lock:
                job.finished = True
                detached = job.detached
            if not detached:
                os.write(self._end_pipe[1], b"\0")
            elif not self._closing:
                assert self._token is not None and job.on_detached_end is not None
                self._token.run_sync_soon(job.on_detached_end, job)


def _unset(error: Exception | None) -> None:
    raise RuntimeError("BackgroundSaver.on_save_finished was not set")
