"""Files the node reads at start and again whenever they change (the ACL file, the peer secrets):
read whole but bounded (a wrong path to a huge file must not fill the memory), as UTF-8. Every
failure is a ConfigError naming the option and the file."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from rmqc.errors import ConfigError

log = logging.getLogger("rmqc.node.watched_file")

_T = TypeVar("_T")
Stamp = tuple[int, int, int]  # mtime_ns, size, inode: an edit in place or a rename both change it


class WatchedFile(Generic[_T]):
    """The parsed content of the file `option` names: read at start (a ConfigError then stops the
    node), and again when its Stamp changed, looked at at most every `look_every_s`. A changed
    file that cannot be read or parsed (a half-saved edit, a typo, a file gone) keeps the content
    read before, and is tried again at the next look: an operator's mistake must not take away
    what works."""

    def __init__(self, option: str, path: str, max_bytes: int, parse: Callable[[str], _T],
                 summary: Callable[[_T], str], *, look_every_s: float = 0.0, private: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._option = option
        self._path = path
        self._max_bytes = max_bytes
        self._parse = parse  # raises ValueError or ConfigError
        self._summary = summary  # what was read, for the log line of a reload
        self._look_every_s = look_every_s
        self._clock = clock
        self._private = private  # a secret: warn when other users may read it
        self._next_look_s = 0.0
        self._stamp: Stamp | None = None
        self._content = self._read()

    def content(self) -> _T:
        now = self._clock()
        if now >= self._next_look_s:
            self._next_look_s = now + self._look_every_s
            if _current_stamp(self._path) != self._stamp:
                try:
                    self._content = self._read()
                    log.info("%s %s reloaded: %s", self._option, self._path, self._summary(self._content))
                except ConfigError as error:
                    log.error("%s; keeping what was read before", error)
        return self._content

    def _read(self) -> _T:
        option, path = self._option, self._path  # in every message
        try:
            with open(path, "rb") as handle:
                status = os.fstat(handle.fileno())
                data = handle.read(self._max_bytes + 1)
        except OSError as error:
            raise ConfigError(f"{option}: cannot read {path}: {error}") from error
        if len(data) > self._max_bytes:
            raise ConfigError(f"{option}: {path} is over {self._max_bytes} bytes")
        try:
            content = self._parse(data.decode())
        except UnicodeDecodeError as error:
            raise ConfigError(f"{option}: {path} is not UTF-8: {error}") from error
        except (ValueError, ConfigError) as error:
            raise ConfigError(f"{option}: {path}: {error}") from error
        if self._private and status.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("%s %s is readable by other users (chmod 600 it)", option, path)
        self._stamp = _stamp_of(status)
        return content


def _stamp_of(status: os.stat_result) -> Stamp:
    return status.st_mtime_ns, status.st_size, status.st_ino


def _current_stamp(path: str) -> Stamp | None:
    """The file's stamp now; None when it cannot be looked at (gone, no permission: the read says why)."""
    try:
        return _stamp_of(os.stat(path))
    except OSError:
        return None
