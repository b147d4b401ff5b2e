"""Processes the harness starts: each one remembered by PID, its output in a log file, stopped by
PID (SIGTERM, then SIGKILL) when its scenario ends, and all of them again when the run ends."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import trio

from rmqc.testing.cluster import free_ports as free_ports

# How long a process gets between SIGTERM and SIGKILL when a scenario stops it.
STOP_GRACE_S = 3.0
# Every process this run started and has not reaped; stop_all() ends them by PID.
_started: dict[int, "Proc"] = {}
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ProcessFailed(RuntimeError):
    """A process the harness needs exited or never printed what it should have."""


class Proc:
    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        # a restarted node appends to its old log: only what this process writes counts
        self._log_offset = self._log.tell()
        self.popen = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                      env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True)
        self.pid = self.popen.pid
        self.started_at = time.perf_counter()
        _started[self.pid] = self

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(self._log_offset)
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    async def wait_for_output(self, pattern: str, timeout_s: float) -> re.Match[str]:
        """Wait (bounded) until the log matches `pattern`; raise ProcessFailed if the process dies."""
        regex = re.compile(pattern)
        with trio.move_on_after(timeout_s):
            while True:
                match = regex.search(self.log_text())
                if match:
                    return match
                if not self.alive:
                    raise ProcessFailed(f"{self.name} exited with {self.popen.returncode}: {self.tail()}")
                await trio.sleep(0.01)
        raise ProcessFailed(f"{self.name}: no {pattern!r} within {timeout_s} s: {self.tail()}")

    def tail(self, lines: int = 8) -> str:
        return " | ".join(self.log_text().splitlines()[-lines:])

    def signal(self, signum: int) -> None:
        if self.alive:
            os.kill(self.pid, signum)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        self.popen.wait(timeout=STOP_GRACE_S)
        self._forget()

    def stop(self) -> None:
        """SIGCONT (in case it was SIGSTOPped), SIGTERM, then SIGKILL after the grace period."""
        if self.alive:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.popen.wait(timeout=STOP_GRACE_S)
        self._forget()

    def _forget(self) -> None:
        _started.pop(self.pid, None)
        if not self._log.closed:
            self._log.close()

    def rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def cpu_s(self) -> float | None:
        """User + system CPU seconds used so far."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def stop_all() -> None:
    for proc in list(_started.values()):
        try:
            proc.stop()
        except (OSError, subprocess.SubprocessError):
            pass


