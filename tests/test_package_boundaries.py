"""design.md: production code never imports `rmqc.testing` (the simulator, the test harnesses and
their certificates). `rmqc chaos run --brokers java` once did, through the Java launcher: the
launcher now lives in `rmqc.javapeers`, and this check keeps it that way."""

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
