"""A data directory whose disk a test can fill, free, turn read-only and repair.

Where the test may mount (root), the directory is on a small filesystem of its own and the node
meets the kernel's real errors:
- `tmpfs`: `fill()` writes a filler file until the kernel answers ENOSPC, `free()` deletes it;
- `ext4` on a loop device, mounted `errors=remount-ro`: the same, and `fail_writes("erofs")` makes
  the kernel turn it read-only under the running node (ext4's `trigger_fs_error`, what a disk error
  does), `repair()` checks it (e2fsck) and mounts it again.
Elsewhere, or for a fault no filesystem makes on demand (EIO), it uses the storage layer's
test-only fault hook (rmqc.storage._faults). Either way the test runs; `mode` says which (CI runs
as root, so it gets the real filesystems).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from rmqc.storage import FAULT_FILE_ENV

__all__ = ["EXT4", "FAULT_HOOK", "TMPFS", "SmallDisk", "small_disk"]

TMPFS = "tmpfs"
EXT4 = "ext4"
FAULT_HOOK = "fault-hook"
FILLER_CHUNK_BYTES = 64 << 10
COMMAND_TIMEOUT_S = 30.0  # mount, mkfs, e2fsck of a few MiB


class SmallDisk:
    def __init__(self, root: Path, mode: str) -> None:
        self.root = root  # data directories go under it
        self.mode = mode
        self._control = root.parent / f"{root.name}.faults"
        self._image = root.parent / f"{root.name}.img"
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
        """Make the next writes fail with `fault`: `erofs` (the kernel turns an ext4 disk
        read-only) or, through the fault hook, `eio` and `erofs`."""
        if self.mode == EXT4 and fault == "erofs":
            device = _run("findmnt", "--noheadings", "--output", "SOURCE", str(self.root)).strip()
            Path(f"/sys/fs/ext4/{Path(device).name}/trigger_fs_error").write_text("rmqc test: disk error")
        elif self.mode == FAULT_HOOK:
            self._control.write_text(fault)
        else:
            raise RuntimeError(f"{fault} needs the fault hook (small_disk(..., hook=True)) or, for erofs, ext4")

    def repair(self) -> None:
        """The disk is fixed: writes succeed again (an ext4 disk is checked and mounted again)."""
        if self.mode == EXT4:
            _run("umount", str(self.root))
            subprocess.run(["e2fsck", "-f", "-y", str(self._image)], capture_output=True, timeout=COMMAND_TIMEOUT_S)
            _run("mount", "-o", "loop,errors=remount-ro", str(self._image), str(self.root))
        self.free()


@contextlib.contextmanager
def small_disk(root: Path, size_mb: int = 8, *, fs: str = TMPFS, hook: bool = False) -> Iterator[SmallDisk]:
    """A SmallDisk at `root` (created): a filesystem `fs` (TMPFS or EXT4) of `size_mb` when it can be
    mounted and `hook` is False, else the fault hook. Unmounted on the way out."""
    root.mkdir(parents=True, exist_ok=True)
    disk = SmallDisk(root, fs)
    if hook or not _mount(disk, size_mb):
        yield SmallDisk(root, FAULT_HOOK)
        return
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(root)], check=False, capture_output=True, timeout=COMMAND_TIMEOUT_S)
        disk._image.unlink(missing_ok=True)


def _mount(disk: SmallDisk, size_mb: int) -> bool:
    if os.geteuid() != 0:
        return False
    try:
        if disk.mode == TMPFS:
            _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(disk.root))
        else:
            with open(disk._image, "wb") as image:
                image.truncate(size_mb << 20)
            _run("mkfs.ext4", "-q", "-F", str(disk._image))
            _run("mount", "-o", "loop,errors=remount-ro", str(disk._image), str(disk.root))
    except (OSError, subprocess.SubprocessError):
        disk._image.unlink(missing_ok=True)
        return False
    return True


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=COMMAND_TIMEOUT_S).stdout
