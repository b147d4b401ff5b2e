"""A storage fault hook that exists for tests only: it makes the next commits fail as a full disk,
a failing write or fsync, or a filesystem turned read-only would.

Off unless the environment variable RMQC_TEST_ONLY_STORAGE_FAULTS names a control file; production
never sets it, and a node logs a warning at start when it is on. The file holds one word, read
before every commit: `enospc`, `eio` or `erofs` (that commit fails with the error LMDB reports for
it, before anything is written), or nothing (no fault). A test writes the word at a moment of its
choosing and empties the file to give the space back. Tests that can mount a small filesystem use
that instead; this hook covers the machines where they cannot, and the faults no test can make
happen on demand (EIO, a filesystem the kernel turned read-only under open files).
"""

from __future__ import annotations

import os
from pathlib import Path

import lmdb

from ._errors import StorageError

__all__ = ["FAULT_FILE_ENV", "FaultHook", "fault_hook_from_env"]

FAULT_FILE_ENV = "RMQC_TEST_ONLY_STORAGE_FAULTS"
# Each fault as LMDB raises it (py-lmdb maps ENOSPC to DiskError, other errno values to Error).
_FAULTS = {
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
        make = _FAULTS.get(word)
        if make is None:
            raise FaultHookError(f"{self.control}: {word!r} is not one of {sorted(_FAULTS)}")
        raise make()


def fault_hook_from_env() -> FaultHook | None:
    control = os.environ.get(FAULT_FILE_ENV)
    return FaultHook(Path(control)) if control else None
