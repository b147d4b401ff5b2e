"""verify() in a forked child, so that no damaged file can kill the caller.

LMDB trusts the file it maps: a zeroed or scrambled B-tree page fails one of its assertions
(`Assertion 'IS_LEAF(mp)' failed`, SIGABRT) and a read past the end of a shortened file is a
SIGBUS. Neither can be caught in Python. A child process reads every page a node will read (the
hard state, membership, snapshot and the whole log: verify()), and its death by a signal is
reported as damage of the data file; a parent that then opens the same file reads only pages the
child read without harm.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import tempfile
import traceback
from pathlib import Path

import lmdb

from rmqc.errors import RmqcError, StorageError

from ._errors import StorageDamagedError
from ._inspect import VerifyReport

# What the child's stderr (LMDB's assertion message) may add to the error.
_STDERR_TAIL_BYTES = 400
_CHILD_FAILED = 70  # EX_SOFTWARE: the check itself failed (its traceback is on the child's stderr)


def verify_isolated(path: str | os.PathLike[str]) -> VerifyReport:
    """The VerifyReport of the data directory at `path`, read in a child process; the child's
    RmqcError is raised here, and its death by a signal raises StorageDamagedError."""
    result_read, result_write = os.pipe()
    with tempfile.TemporaryFile() as stderr:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            os.close(result_read)
            _child(Path(path), result_write, stderr.fileno())
        os.close(result_write)
        with os.fdopen(result_read, "rb") as results:
            payload = results.read()
        _, status = os.waitpid(pid, 0)
        stderr.seek(0)
        said = stderr.read()[-_STDERR_TAIL_BYTES:].decode(errors="replace").strip()
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            raise StorageDamagedError(Path(path) / "data.mdb", f"reading it killed the reading process ({name}"
                                      + (f": {said})" if said else ")"))
        if not payload:
            raise StorageError(f"checking {path} failed in its reading process: {said}")
    outcome = pickle.loads(payload)
    if isinstance(outcome, BaseException):
        raise outcome
    assert isinstance(outcome, VerifyReport)
    return outcome


def _child(path: Path, result_fd: int, stderr_fd: int) -> None:
    """Never returns: whatever happens, the child ends here (it must not run the caller's code)."""
    try:
        faulthandler.disable()  # the parent's (pytest's) would print its dump of our abort on its own stderr
        os.dup2(stderr_fd, 2)
        with os.fdopen(result_fd, "wb") as results:
            results.write(pickle.dumps(_verify(path)))
    except BaseException:  # reported by the parent as the child's failure
        traceback.print_exc()
        os._exit(_CHILD_FAILED)
    os._exit(0)


def _verify(path: Path) -> VerifyReport | RmqcError:
    from ._lmdb_storage import DATA_FILE_NAME, LmdbStorage

    try:
        with LmdbStorage(path, readonly=True) as storage:
            return storage.verify()
    except RmqcError as error:
        return error
    except lmdb.Error as error:  # LMDB's own checks of its pages (MDB_CORRUPTED, MDB_PAGE_NOTFOUND)
        return StorageDamagedError(path / DATA_FILE_NAME, f"LMDB finds it damaged: {error}")
