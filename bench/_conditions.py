"""The machine and run conditions every figure records (nodes, clients, payload, fsync, machine)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "memory_mb": _memory_mb(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "kernel": platform.release(),
        "cpu_model": _cpu_model(),
        "rmqc_program": os.environ.get("RMQC_BENCH_PROGRAM", "the venv's rmqc"),
        "commit": _commit(),
    }


def _commit() -> str:
    """The measured tree's commit (short), "unknown" outside a git checkout; a program given by
    RMQC_BENCH_PROGRAM may come from another tree (rmqc_program says so)."""
    try:
        out = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def filesystem_of(path: Path) -> str:
    """The file system type the data directories sit on (tmpfs would make fsync free)."""
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def conditions(**fields: Any) -> dict[str, Any]:
    """A figure's conditions: the fields given plus the interpreter that ran the load."""
    return {**fields, "load_python": sys.version.split()[0]}


def _memory_mb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
