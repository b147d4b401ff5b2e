"""design.md's boundary for the peer protocol: rmqc.peerwire is pure (no trio, no sockets, no clocks,
no threads, no randomness of its own), so the simulator can run the codec, the outbox and the
authentication exchange, the frame dispatch and the links' decisions that `rmqc serve` runs; node/
only moves their bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import rmqc.peerwire
from rmqc.testing.imports import forbidden_imports

# os and select: file descriptors are the shell's; secrets and random: nonces are drawn by the shell
FORBIDDEN_MODULES = {"trio", "socket", "ssl", "select", "selectors", "os", "threading", "time", "asyncio",
                     "secrets", "random", "rmqc.node", "rmqc.testing"}




def test_importing_peerwire_loads_no_trio_and_no_shell() -> None:
    code = "import sys, rmqc.peerwire; print(' '.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    assert not {"trio", "rmqc.node", "rmqc.testing"} & loaded


def test_no_module_of_peerwire_imports_io_clocks_or_randomness() -> None:
    modules = sorted(Path(rmqc.peerwire.__file__).parent.glob("*.py"))
    assert {path.name for path in modules} >= {"__init__.py", "_codec.py", "_outbox.py", "_auth.py", "_dispatch.py",
                                               "_links.py"}
    found = {path.name: forbidden_imports(path, FORBIDDEN_MODULES) for path in modules}
    assert found == {path.name: [] for path in modules}


def test_the_check_sees_each_kind_of_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import trio\nimport time, struct\nfrom socket import socket\nfrom os.path import join\n"
                      "from rmqc.node._peers import PeerLinks\nfrom ._codec import FrameKind\n")
    assert forbidden_imports(module, FORBIDDEN_MODULES) == ["trio", "time", "socket", "os.path", "rmqc.node._peers"]
