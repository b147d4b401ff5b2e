"""The node lock: a file in the data directory, held with flock by the running server, holding its PID.

flock is released by the kernel when the holder dies (even by SIGKILL), so a stale file never blocks
a restart; the PID inside only serves to name the holder in messages. Offline tools (`rmqc log
compact`) take the same lock, so a server cannot start under them either.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ._errors import NodeLockedError

LOCK_FILE_NAME = "node.lock"


class NodeLock:
    """A held node lock; release() (or leaving the `with` block) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> NodeLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def make_dirs_durably(directory: Path) -> None:
    """`mkdir -p` whose new directories survive a power cut: each one made is synced into its
    parent (a new data directory's name is otherwise only in the page cache, and a cut loses the
    whole directory, its log and its vote with it, however well its files were synced)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        parent = os.open(new.parent, os.O_RDONLY)
        try:
            os.fsync(parent)
        finally:
            os.close(parent)


def _lock_path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / LOCK_FILE_NAME


def _read_pid(fd: int) -> int | None:
    raw = os.pread(fd, 32, 0).strip()
    return int(raw) if raw.isdigit() else None


def acquire_node_lock(data_dir: str | os.PathLike[str]) -> NodeLock:
    """Take the node lock of `data_dir` for this process or raise NodeLockedError naming the holder."""
    path = _lock_path(data_dir)
    make_dirs_durably(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(fd)
        os.close(fd)
        raise NodeLockedError(str(data_dir), pid) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return NodeLock(path, fd)


def live_lock_holder(data_dir: str | os.PathLike[str]) -> int | None:
    """PID of the live process holding the node lock (-1 if held but the PID is unreadable), or None."""
    path = _lock_path(data_dir)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(fd)
        return -1 if pid is None else pid
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def is_locked_by_live_node(data_dir: str | os.PathLike[str]) -> bool:
    return live_lock_holder(data_dir) is not None
