"""design.md: production code never imports `rmqc.testing` (the simulator, the test harnesses and
their certificates). `rmqc chaos run --brokers java` once did, through the Java launcher: the
launcher now lives in `rmqc.javapeers`, and this check keeps it that way. Also: no module outside
rmqc.raft or rmqc.peerwire imports their private modules."""

from __future__ import annotations

import ast
from pathlib import Path

import rmqc

SOURCE = Path(rmqc.__file__).parent


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


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
SEALED_PACKAGES = ("raft", "peerwire")
# Reaching inside on purpose, and why; the check fails once an entry is no longer needed.
INSIDE_ON_PURPOSE = {
    # the simulator's mutation harness (`--mutant`) patches the Raft core's internals to show that
    # the simulator catches each bug
    ("testing/sim.py", "rmqc.raft._core"),
    # ... and the peer codec's entry decoder (mutant codec-loses-entry-type)
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
                      "from rmqc.peerwire._codec import FrameKind\n")
    assert private_imports(module, "raft") == ["rmqc.raft._core", "rmqc.raft._log", "rmqc.raft._types"]
    assert private_imports(module, "peerwire") == ["rmqc.peerwire._codec"]
