"""Files the node reads at start and again whenever they change (the ACL file, the peer secrets):
read whole but bounded (a wrong path to a huge file must not fill the memory), as UTF-8, with the
stamp that tells a later change. Every failure is a ConfigError naming the option and the file."""

from __future__ import annotations

import os

from rmqc.errors import ConfigError

Stamp = tuple[int, int, int]  # mtime_ns, size, inode: an edit in place or a rename both change it


def stamp_of(status: os.stat_result) -> Stamp:
    return status.st_mtime_ns, status.st_size, status.st_ino


def current_stamp(path: str) -> Stamp | None:
    """The file's stamp now; None when it cannot be looked at (gone, no permission)."""
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None


def read_watched_text(option: str, path: str, max_bytes: int) -> tuple[str, os.stat_result]:
    """The file's text and the status it was read with (whose stamp tells a later change)."""
    try:
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise ConfigError(f"{option}: cannot read {path}: {error}") from error
    if len(data) > max_bytes:
        raise ConfigError(f"{option}: {path} is over {max_bytes} bytes")
    try:
        return data.decode(), status
    except UnicodeDecodeError as error:
        raise ConfigError(f"{option}: {path} is not UTF-8: {error}") from error
