"""Processes the harness starts: the launcher of rmqc.launcher under the names the suite
uses. Each one is remembered by PID, its output in a log file, stopped by PID (SIGTERM, then
SIGKILL) when its scenario ends, and all of them again when the run ends (stop_all)."""

from __future__ import annotations

from rmqc.launcher import (
    STOP_GRACE_S as STOP_GRACE_S,
    Process,
    ProcessFailed as ProcessFailed,
    free_ports as free_ports,
    stop_all as stop_all,
)

__all__ = ["STOP_GRACE_S", "Proc", "ProcessFailed", "free_ports", "stop_all"]


class Proc(Process):
    """`Proc(name, argv, log_path, env=..., cwd=...)`: stdout and stderr both in `log_path`."""

    def kill9(self) -> None:
        """SIGKILL (a crash), then reap it."""
        self.kill()
