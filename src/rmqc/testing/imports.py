"""What a module imports, read from its source (the package-boundary tests' one reader)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

__all__ = ["forbidden_imports", "imported_modules"]


def imported_modules(path: Path) -> list[str]:
    """Every module `path` imports by its absolute name, in order: `import a.b` gives a.b, `from
    a.b import c` gives a.b (relative imports stay inside their package and are left out)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


def forbidden_imports(path: Path, forbidden: Iterable[str]) -> list[str]:
    """The modules of `forbidden` (or inside them) that `path` imports."""
    bad = tuple(forbidden)
    return [name for name in imported_modules(path) if any(name == b or name.startswith(b + ".") for b in bad)]
