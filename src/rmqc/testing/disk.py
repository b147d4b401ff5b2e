"""A data directory whose disk a test can fill and free again.

Where the test may mount (root), the directory is on a small tmpfs of its own: `fill()` writes a
filler file until the kernel answers ENOSPC, `free()` deletes it, and the node sees the real
errors of a full filesystem. Elsewhere it uses the storage layer's test-only fault hook
(rmqc.storage._faults): `fill()` makes every commit fail with ENOSPC, `free()` stops that. Either
way the test runs; `mode` says which (CI runs as root, so it gets the real filesystem).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from rmqc.storage import FAULT_FILE_ENV

__all__ = ["SmallDisk", "small_disk"]

TMPFS = "tmpfs"
FAULT_HOOK = "fault-hook"
FILLER_CHUNK_BYTES = 64 << 10
MOUNT_TIMEOUT_S = 10.0


class SmallDisk:
    def __init__(self, root: Path, mode: str) -> None:
        self.root = root  # data directories go under it
        self.mode = mode
        self._control = root.parent / f"{root.name}.faults"
        self._filler = root / "filler"

    @property
    def env(self) -> dict[str, str]:
        """What a node process on this disk needs in its environment."""
        return {FAULT_FILE_ENV: str(self._control)} if self.mode == FAULT_HOOK else {}

    def fill(self) -> None:
        """From now on, writes that need new space fail with ENOSPC."""
        if self.mode == FAULT_HOOK:
            self._control.write_text("enospc")
            return
        with open(self._filler, "ab", buffering=0) as filler:
            size = FILLER_CHUNK_BYTES
            while size:  # bounded by the filesystem's size; halved down to one byte at the end
                try:
                    filler.write(b"\0" * size)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    size //= 2

    def free(self) -> None:
        """Space is back."""
        if self.mode == FAULT_HOOK:
            self._control.write_text("")
        else:
            self._filler.unlink(missing_ok=True)

    def fail_writes(self, fault: str) -> None:
        """Make the next commits fail with `fault` (`eio`, `erofs`): always the fault hook, as no
        test can make a real disk do that on demand."""
        if self.mode != FAULT_HOOK:
            raise RuntimeError("fail_writes needs the fault hook: use small_disk(..., hook=True)")
        self._control.write_text(fault)


@contextlib.contextmanager
def small_disk(root: Path, size_mb: int = 8, *, hook: bool = False) -> Iterator[SmallDisk]:
    """A SmallDisk at `root` (created): a tmpfs of `size_mb` when it can be mounted and `hook` is
    False, else the fault hook. Unmounted on the way out."""
    root.mkdir(parents=True, exist_ok=True)
    if hook or not _mount_tmpfs(root, size_mb):
        yield SmallDisk(root, FAULT_HOOK)
        return
    try:
        yield SmallDisk(root, TMPFS)
    finally:
        subprocess.run(["umount", "--lazy", str(root)], check=False, capture_output=True, timeout=MOUNT_TIMEOUT_S)


def _mount_tmpfs(root: Path, size_mb: int) -> bool:
    if os.geteuid() != 0:
        return False
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(root)],
                              capture_output=True, timeout=MOUNT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
