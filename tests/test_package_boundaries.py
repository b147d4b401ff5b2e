"""design.md: production code never imports `rmqc.testing` (the simulator, the test harnesses and
their certificates). `rmqc chaos run --brokers java` once did, through the Java launcher: the
launcher now lives in `rmqc.javapeers`, and this check keeps it that way. Also: no module outside
rmqc.raft, rmqc.peerwire, rmqc.config or rmqc.metrics imports their private modules; the pure
packages (rmqc.config, where the simulator gets `rmqc serve`'s NodeConfig; rmqc.metrics, a node's
series and status page document; rmqc.remoting, the codec and a server connection's decisions;
rmqc.peerwire, the peer protocol and the peer links' decisions; rmqc.replica, the sans-IO core, with
the notifier's decisions) and the pure modules of rmqc.client (a joining node's decisions) load
neither the Trio shell (rmqc.node) nor trio; and no module outside rmqc.raft reaches past RawNode
into the Raft core (`raw.raft`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import rmqc
from rmqc.testing.imports import imported_modules

SOURCE = Path(rmqc.__file__).parent




def test_no_production_module_imports_the_testing_package() -> None:
    offenders = [
        f"{path.relative_to(SOURCE)} imports {name}"
        for path in sorted(SOURCE.rglob("*.py")) if "testing" not in path.relative_to(SOURCE).parts
        for name in imported_modules(path) if name == "rmqc.testing" or name.startswith("rmqc.testing.")
    ]
    assert offenders == []


def test_the_check_sees_an_import_of_the_testing_package(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from rmqc.testing.interop import bring_up\nimport rmqc.testing.sim\n")
    assert imported_modules(module) == ["rmqc.testing.interop", "rmqc.testing.sim"]


# Packages whose `_modules` are private: other packages import what their __init__ exports, so the
# inside can be rearranged without touching them (design.md: private modules behind re-exports).
SEALED_PACKAGES = ("raft", "peerwire", "config", "metrics")
# Reaching inside on purpose, and why; the check fails once an entry is no longer needed.
INSIDE_ON_PURPOSE = {
    # the simulator's mutation harness (`--mutant`) patches the Raft core's internals to show that
    # the simulator catches each bug
    ("testing/sim.py", "rmqc.raft._core"),
    # ... and the peer codec's entry decoders and entry-type table (mutant codec-loses-entry-type)
    ("testing/sim.py", "rmqc.peerwire._codec"),
}


def private_imports(path: Path, package: str) -> list[str]:
    """The private modules of rmqc.<package> that `path` imports, in either import form."""
    prefix = f"rmqc.{package}._"
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return sorted({".".join(name.split(".")[:3]) for name in names if name.startswith(prefix)})


def test_no_module_outside_a_sealed_package_imports_its_private_modules() -> None:
    found = {
        (str(path.relative_to(SOURCE)), name)
        for package in SEALED_PACKAGES
        for path in sorted(SOURCE.rglob("*.py")) if path.relative_to(SOURCE).parts[0] != package
        for name in private_imports(path, package)
    }
    assert sorted(found - INSIDE_ON_PURPOSE) == []
    assert sorted(INSIDE_ON_PURPOSE - found) == [], "no longer needed: remove from INSIDE_ON_PURPOSE"


def test_the_check_sees_private_imports_in_every_form(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from rmqc.raft._types import Entry\nimport rmqc.raft._core as core\n"
                      "from rmqc.raft import _log, Message\nfrom rmqc.raft import RawNode\n"
                      "from rmqc.peerwire._codec import FrameKind\nfrom rmqc.config._node_config import OPTIONS\n")
    assert private_imports(module, "raft") == ["rmqc.raft._core", "rmqc.raft._log", "rmqc.raft._types"]
    assert private_imports(module, "peerwire") == ["rmqc.peerwire._codec"]
    assert private_imports(module, "config") == ["rmqc.config._node_config"]


# Pure packages: `rmqc serve` (rmqc.node) and the simulator build the same
# NodeConfig from rmqc.config and can keep a node's series and its status page's document with
# rmqc.metrics, and the peer links' decisions with rmqc.peerwire, without the Trio shell;
# rmqc.remoting decides for the port's connections (their first bytes, bounds and idle deadline)
# what rmqc.node._server only carries out; rmqc.replica is the sans-IO node itself (its parts, the
# Raft facts only its driver writes, the notifier's decisions). Each with the modules it must at
# least have (the check sees them).
PURE_PACKAGES = {
    "config": {"__init__.py", "_node_config.py"},
    "metrics": {"__init__.py", "_node_metrics.py", "_status_page.py"},
    "peerwire": {"__init__.py", "_auth.py", "_codec.py", "_dispatch.py", "_links.py", "_outbox.py"},
    "remoting": {"__init__.py", "_connection.py", "_frames.py", "_opening.py"},
    "replica": {"__init__.py", "_replica.py", "_driver.py", "_facts.py", "_notify.py"},
}
SHELL_MODULES = ("rmqc.node", "trio")


def shell_imports(path: Path, package: str) -> list[str]:
    """The modules of rmqc.node or trio that `path`, a module of `package`, imports in any form
    (`import`, `from ... import`, relative imports resolved against `package`)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            base = ".".join(parts + ([node.module] if node.module else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return sorted({name for name in names
                   if any(name == shell or name.startswith(shell + ".") for shell in SHELL_MODULES)})


@pytest.mark.parametrize("package", sorted(PURE_PACKAGES))
def test_a_pure_package_imports_neither_the_node_shell_nor_trio(package: str) -> None:
    modules = sorted((SOURCE / package).rglob("*.py"))
    assert {path.name for path in modules} >= PURE_PACKAGES[package]
    assert ({path.name: shell_imports(path, f"rmqc.{package}") for path in modules}
            == {path.name: [] for path in modules})


@pytest.mark.parametrize("package", sorted(PURE_PACKAGES))
def test_importing_a_pure_package_loads_neither_the_node_shell_nor_trio(package: str) -> None:
    code = f"import sys, rmqc.{package}; print(' '.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    assert sorted(name for name in loaded if any(name == shell or name.startswith(shell + ".")
                                                 for shell in SHELL_MODULES)) == []


# Pure modules of a package that is not (rmqc.client is the Trio client): decisions that left the
# shell, unit-tested without sockets. The joining node's (JoinAttempts, from rmqc.node._join).
PURE_MODULES = ("client/_join.py",)


@pytest.mark.parametrize("module", PURE_MODULES)
def test_a_pure_module_imports_neither_the_node_shell_nor_trio(module: str) -> None:
    package = ".".join(("rmqc", *Path(module).parent.parts))
    assert shell_imports(SOURCE / module, package) == []


def test_the_check_sees_an_import_of_the_shell_or_trio_in_every_form(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import trio\nfrom trio.lowlevel import current_task\nimport rmqc.node._peers as peers\n"
                      "from rmqc import node\nfrom ..node._tls import dial_tls\nfrom ._other import x\n"
                      "import triolet, rmqc.nodes\nfrom rmqc.peerwire import PEER_MAGIC\n")
    assert shell_imports(module, "rmqc.config") == [
        "rmqc.node", "rmqc.node._peers", "rmqc.node._tls", "rmqc.node._tls.dial_tls", "trio", "trio.lowlevel",
        "trio.lowlevel.current_task",
    ]


# RawNode is the application's whole view of the Raft core: the replica, the node and the
# simulator read the core through its accessors (quiet_ticks(), ticks, lease, progress_of(), ...),
# never through its `raft` attribute, so the core can change inside without touching them.
CORE_REACHED_ON_PURPOSE = {
    # the simulator's mutant acks-before-background-save replaces RawNode.take_early (`self.raft`)
    "testing/sim.py",
}


def core_reaches(path: Path) -> list[str]:
    """Each `<expr>.raft` attribute in `path` (`raw.raft`, `self.raw.raft.log`, `core.raft`), as
    `line: source`; the package `rmqc.raft` (`rmqc.raft.RawNode`, imports) is no reach."""
    source = path.read_text()
    reaches = sorted(
        (node.lineno, node.col_offset, f"{node.lineno}: {ast.get_source_segment(source, node)}")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr == "raft"
        and not (isinstance(node.value, ast.Name) and node.value.id == "rmqc")
    )
    return [reach for _, _, reach in reaches]


def test_no_module_outside_the_raft_package_reaches_past_rawnode_into_the_core() -> None:
    modules = [path for path in sorted(SOURCE.rglob("*.py")) if path.relative_to(SOURCE).parts[0] != "raft"]
    assert {"replica", "node", "testing"} <= {path.relative_to(SOURCE).parts[0] for path in modules}
    found = {str(path.relative_to(SOURCE)): reaches for path in modules if (reaches := core_reaches(path))}
    assert {name: reaches for name, reaches in found.items() if name not in CORE_REACHED_ON_PURPOSE} == {}
    assert sorted(CORE_REACHED_ON_PURPOSE - found.keys()) == [], "no longer needed: remove from CORE_REACHED_ON_PURPOSE"


def test_the_check_sees_a_reach_into_the_core_in_every_form(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('import rmqc.raft\nfrom rmqc.raft import RawNode\n'
                      'def f(raw: rmqc.raft.RawNode, node, core) -> None:\n'
                      '    raw.raft.quiet_ticks()\n    node.raw.raft.log.committed\n    core.raft\n'
                      '    (node.raw or raw).raft.ticks\n    raw.ticks, raw.lease, raw.progress_of("n2")\n'
                      '    """raw.raft in a docstring is no reach"""\n')
    assert core_reaches(module) == ["4: raw.raft", "5: node.raw.raft", "6: core.raft", "7: (node.raw or raw).raft"]
