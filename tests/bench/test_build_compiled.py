"""bench/build_compiled.py picks the modules it compiles from the tree as it is: every module
it leaves interpreted exists (a renamed one would silently be compiled), and every other module of
the compiled packages is in the list. Building takes minutes: the benchmark notes say when it ran."""

from __future__ import annotations

from pathlib import Path

from bench.build_compiled import COMPILED_PACKAGES, INTERPRETED, compiled_modules

RMQC = Path(__file__).resolve().parents[2] / "src" / "rmqc"


def test_every_module_left_interpreted_exists() -> None:
    missing = [module for module in INTERPRETED if not (RMQC / module).is_file()]
    assert not missing


def test_the_compiled_packages_are_compiled_but_for_the_named_modules() -> None:
    chosen = set(compiled_modules(RMQC))
    for package in COMPILED_PACKAGES:
        for path in (RMQC / package).glob("*.py"):
            relative = f"{package}/{path.name}"
            assert (f"rmqc/{relative}" in chosen) != (relative in INTERPRETED), relative
    assert not any(module.startswith(("rmqc/node/", "rmqc/storage/")) for module in chosen)
