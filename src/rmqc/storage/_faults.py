"""A storage fault hook that exists for tests only: it makes the next commits fail as a full disk,
a failing write or fsync, or a filesystem turned read-only would, or hangs them as a stalled disk.

Off unless the environment variable RMQC_TEST_ONLY_STORAGE_FAULTS names a control file; production
never sets it, and a node logs a warning at start when it is on. The file holds one word, read
before every commit: `enospc`, `eio` or `erofs` (that commit fails with the error LMDB reports for
it, before anything is written), `stall` (the commit, with its fsync, is held until the word is
gone, as on a disk whose fsync hangs; `rmqc chaos`'s disk-stall fault), or nothing (no fault). A
test writes the word at a moment of its choosing and empties the file to give the space back (or
to release the held commit). Tests that can mount a small filesystem use
that instead; this hook covers the machines where they cannot, and the faults no test can make
happen on demand (EIO, a filesystem the kernel turned read-only under open files).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import lmdb

from rmqc.errors import StorageError

__all__ = ["FAULT_FILE_ENV", "FAULT_STALL_WORD", "FaultHook", "fault_hook_from_env"]

log = logging.getLogger("rmqc.storage")

FAULT_FILE_ENV = "RMQC_TEST_ONLY_STORAGE_FAULTS"
FAULT_STALL_WORD = "stall"
STALL_POLL_S = 0.01  # how often a held commit reads the control file again
# A stall the test forgot to lift ends by itself after this long: a held node is never left hanging.
STALL_BOUND_S = 120.0
# What a held commit waits on between two looks (never set). Not time.sleep: under libfaketime with
# a real monotonic clock (rmqc chaos's clock fault, preloaded into the same nodes) its
# clock_nanosleep fails with EINVAL, which stopped the node; a timed condition wait does not.
_POLL_PAUSE = threading.Event()
# Each fault as LMDB raises it (py-lmdb maps ENOSPC to DiskError, other errno values to Error).
_FAULTS: dict[str, Callable[[], lmdb.Error]] = {
    "enospc": lambda: lmdb.DiskError("mdb_txn_commit: No space left on device (test fault hook)"),
    "eio": lambda: lmdb.Error("mdb_txn_commit: Input/output error (test fault hook)"),
    "erofs": lambda: lmdb.Error("mdb_txn_commit: Read-only file system (test fault hook)"),
}


class FaultHookError(StorageError):
    """The fault control file holds a word that names no fault."""


class FaultHook:
    def __init__(self, control: Path) -> None:
        self.control = control

    def before_commit(self) -> None:
        """Raise the fault the control file names, if any (inside the write transaction, so LMDB
        aborts it as it would a failed commit)."""
        try:
            word = self.control.read_text().strip()
        except FileNotFoundError:
            return
        if not word:
            return
        if word == FAULT_STALL_WORD:
            self._hold()
            return
        make = _FAULTS.get(word)
        if make is None:
            raise FaultHookError(f"{self.control}: {word!r} is not one of {sorted([*_FAULTS, FAULT_STALL_WORD])}")
        raise make()

    def _hold(self) -> None:
        """Block this commit while the control file says `stall` (at most STALL_BOUND_S)."""
        log.warning("TEST-ONLY storage fault hook: commit held (%s says %s)", self.control, FAULT_STALL_WORD)
        started = time.monotonic()
        while time.monotonic() - started < STALL_BOUND_S:
            _POLL_PAUSE.wait(STALL_POLL_S)
            try:
                if self.control.read_text().strip() != FAULT_STALL_WORD:
                    break
            except FileNotFoundError:
                break
        log.warning("TEST-ONLY storage fault hook: commit released after %.0f ms",
                    (time.monotonic() - started) * 1000)


def fault_hook_from_env() -> FaultHook | None:
    control = os.environ.get(FAULT_FILE_ENV)
    return FaultHook(Path(control)) if control else None
