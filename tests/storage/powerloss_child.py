"""Child process of test_power_loss's model test: file operations whose durability the power-loss
shim must model. Usage: python powerloss_child.py DATA_DIR. Prints "ready" once done, then waits
to be killed (the parent cuts the power after the kill)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from rmqc.storage._lmdb_storage import fsync_path

THREADS = 4
THREAD_WRITES = 50


def write_file(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def appender(path: Path, number: int) -> None:
    """Each line fdatasynced as it is written, then one line that never is."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for line in range(THREAD_WRITES):
            os.write(fd, f"thread {number} line {line}\n".encode())
            os.fdatasync(fd)
        os.write(fd, b"unsynced tail\n")
    finally:
        os.close(fd)


def main(data_dir: Path) -> None:
    # synced, then more written without a sync: only the synced part is durable
    with (data_dir / "synced").open("wb") as sink:
        sink.write(b"durable part|")
        sink.flush()
        os.fsync(sink.fileno())
        sink.write(b"lost part")
    # positional and vectored writes, and a truncation, on a file that existed before the run
    fd = os.open(data_dir / "existing", os.O_RDWR)
    os.pwrite(fd, b"PWRITE", 0)
    os.lseek(fd, 10, os.SEEK_SET)
    os.writev(fd, [b"WRITEV", b"-two"])
    os.fdatasync(fd)
    os.ftruncate(fd, 4)  # never synced: the file keeps its synced length
    os.close(fd)
    # an O_DSYNC write is durable without any fsync; the plain write before it is not
    fd = os.open(data_dir / "dsync", os.O_WRONLY | os.O_DSYNC)
    os.pwrite(fd, b"meta", 0)
    os.close(fd)
    fd = os.open(data_dir / "dsync", os.O_WRONLY)
    os.pwrite(fd, b"MORE", 4)
    os.close(fd)
    # a new file synced, in a directory synced: it stays
    write_file(data_dir / "created-and-listed", b"listed", sync=True)
    # a subdirectory and its file, each level synced
    (data_dir / "sub").mkdir()
    write_file(data_dir / "sub" / "inner", b"inner", sync=True)
    fsync_path(data_dir / "sub")
    fsync_path(data_dir)
    # the usual atomic replace, the directory synced: the new contents stay
    write_file(data_dir / "replaced.tmp", b"new contents", sync=True)
    os.replace(data_dir / "replaced.tmp", data_dir / "replaced")
    fsync_path(data_dir)
    # threads appending with fdatasync at once
    threads = [threading.Thread(target=appender, args=(data_dir / f"thread-{n}", n)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fsync_path(data_dir)
    # from here on no directory is synced again:
    # a new file synced but its directory not: it vanishes
    write_file(data_dir / "created-unlisted", b"data synced, name not", sync=True)
    # a rename not followed by a directory fsync is undone (the old contents come back)
    write_file(data_dir / "renamed.tmp", b"new contents", sync=True)
    os.replace(data_dir / "renamed.tmp", data_dir / "renamed")
    # an unlink not followed by a directory fsync is undone
    os.unlink(data_dir / "unlinked")
    # a file written but never synced, in a directory synced later... never: gone
    write_file(data_dir / "never-synced", b"nothing", sync=False)
    # a file created and listed by a directory fsync, its data never synced: empty
    write_file(data_dir / "sub" / "listed-empty", b"data never synced", sync=False)
    fsync_path(data_dir / "sub")
    print("ready", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
