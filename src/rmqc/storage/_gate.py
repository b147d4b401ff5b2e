"""Keeps LMDB transactions of this process out of the way while the map is resized.

LMDB's mdb_env_set_mapsize must not run while any transaction of the process is open (it remaps the
file under them) and does not check this itself. Every transaction enters the gate shared; a resize
enters it exclusive and waits, within a bound, for the open ones to finish. The shared path is on
every read, so it is a plain lock and a counter (no generator-based context manager).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ._errors import StorageBusyError


class ResizeGate:
    def __init__(self, drain_timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._active = 0
        self._resizing = False
        self._drain_timeout_s = drain_timeout_s

    def enter_shared(self) -> None:
        with self._lock:
            if self._resizing and not self._changed.wait_for(
                lambda: not self._resizing, self._drain_timeout_s
            ):
                raise StorageBusyError(f"map resize took over {self._drain_timeout_s} s")
            self._active += 1

    def exit_shared(self) -> None:
        with self._lock:
            self._active -= 1
            if self._resizing and not self._active:
                self._changed.notify_all()

    def __enter__(self) -> None:
        self.enter_shared()

    def __exit__(self, *exc_info: object) -> None:
        self.exit_shared()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._lock:
            self._resizing = True
            try:
                if not self._changed.wait_for(lambda: not self._active, self._drain_timeout_s):
                    raise StorageBusyError(
                        f"transactions stayed open over {self._drain_timeout_s} s during a map resize"
                    )
                yield
            finally:
                self._resizing = False
                self._changed.notify_all()
