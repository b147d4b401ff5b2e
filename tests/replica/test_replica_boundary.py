"""design.md's boundary: the replica is pure (no trio, no sockets, no clocks, no threads), so the
simulator runs the code `rmqc serve` runs, deterministically."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rmqc.replica

FORBIDDEN_MODULES = {"trio", "socket", "threading", "time", "asyncio", "rmqc.node", "rmqc.testing"}


def test_importing_the_replica_loads_no_trio_and_no_shell() -> None:
    code = "import sys, rmqc.replica; print(' '.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    assert not {"trio", "rmqc.node", "rmqc.testing"} & loaded


def test_no_module_of_the_replica_imports_io_or_clocks() -> None:
    for path in Path(rmqc.replica.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_MODULES), \
                    f"{path.name} imports {name}"
