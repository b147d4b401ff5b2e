"""Which processes hold a TCP port: named in the node's error when its port is in use, so the
operator (and a test's log) reads who took it rather than a guess.

Linux only, from /proc: the sockets bound to the port (/proc/net/tcp and tcp6), then the processes
with one of those sockets open (/proc/PID/fd). Anything unreadable (another user's process without
the rights to look, a process gone meanwhile, no /proc) is skipped: this only adds to a message.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["port_holders"]

PROC = Path("/proc")
MAX_HOLDERS = 4  # named in one message; a port is rarely held by more
MAX_COMMAND_CHARS = 120


def port_holders(port: int, proc: Path = PROC) -> list[str]:
    """"pid N (command line)" of each process holding a socket bound to local `port`, at most
    MAX_HOLDERS; [] when none can be found."""
    inodes = _socket_inodes(port, proc)
    if not inodes:
        return []
    holders: list[str] = []
    for pid in _pids(proc):
        if _holds_one_of(proc / pid, inodes):
            holders.append(f"pid {pid} ({_command_line(proc / pid)})")
            if len(holders) == MAX_HOLDERS:
                break
    return holders


def _socket_inodes(port: int, proc: Path) -> set[str]:
    """The inodes of the sockets whose local port is `port` (0: a socket in TIME_WAIT, no owner)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st ... uid timeout inode
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] != "0":
                inodes.add(fields[9])
    return inodes


def _pids(proc: Path) -> list[str]:
    try:
        return [entry for entry in os.listdir(proc) if entry.isdigit()]
    except OSError:
        return []


def _holds_one_of(process: Path, inodes: set[str]) -> bool:
    try:
        descriptors = os.listdir(process / "fd")
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            target = os.readlink(process / "fd" / descriptor)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def _command_line(process: Path) -> str:
    try:
        words = (process / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "command line unreadable"
    text = " ".join(word.decode(errors="replace") for word in words if word)
    return text if len(text) <= MAX_COMMAND_CHARS else text[: MAX_COMMAND_CHARS - 3] + "..."
