"""A copy of rmqc with its pure modules compiled by mypyc, for A/B benchmarks against the
interpreted tree (`bench_cpu_per_write.py --tree main=src --tree compiled=OUT/src`).

rmqc ships interpreted. This measures what compiling would buy: the pure packages of the write
path (Raft, the replica, the FSM, the controller's processors, the peer and remoting codecs, reads,
liveness) are compiled to C extensions beside their sources in a copy of `src/`; the Trio shell
(node/), storage, the CLI and everything else stay interpreted, as do the modules mypyc cannot
compile as written (INTERPRETED, each with why). The copy needs a C compiler and the venv's mypy
(it ships mypyc); building takes about 4 minutes on 2 cores.

Run: .venv/bin/python bench/build_compiled.py [--out bench-out/compiled]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMPILED_PACKAGES = ("raft", "replica", "fsm", "controller", "peerwire", "remoting", "reads", "liveness")
# Modules of those packages left interpreted, and why mypyc cannot take them as they are:
INTERPRETED = {
    # derives each field's check from its annotation's text; compiled dataclasses keep `type` there
    "fsm/_commands.py": "field checks read from annotations",
    # object.__new__ on a dataclass (evolve, the snapshot decoders): refused for compiled classes
    "fsm/_model.py": "object.__new__",
    "fsm/_namesrv.py": "object.__new__",
    # dataclass fields annotated `object` fail when the compiled class is built
    "controller/_config.py": "dataclass field of type object",
    "controller/_headers.py": "dataclass field of type object",
    "remoting/_json_header.py": "dataclass field of type object",
    # Generic[...] classes fail at import when compiled
    "peerwire/_links.py": "Generic class",
    "replica/_notify.py": "Generic class",
}


def compiled_modules(rmqc_dir: Path) -> list[str]:
    """The files to compile, relative to the directory that holds `rmqc/`."""
    files = []
    for package in COMPILED_PACKAGES:
        for path in sorted((rmqc_dir / package).glob("*.py")):
            relative = f"{package}/{path.name}"
            if relative not in INTERPRETED:
                files.append(f"rmqc/{relative}")
    return files


def build(out: Path) -> Path:
    """Copy src/ to `out`/src and compile there; returns the tree's src directory."""
    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    mypyc = Path(sys.executable).parent / "mypyc"
    files = compiled_modules(src / "rmqc")
    subprocess.run([str(mypyc), *files], cwd=src, check=True, env={**os.environ, "MYPYC_OPT_LEVEL": "3"},
                   stdout=subprocess.DEVNULL)
    shutil.rmtree(src / "build", ignore_errors=True)
    return src


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench-out" / "compiled")
    args = parser.parse_args()
    src = build(args.out.resolve())
    print(f"compiled {len(compiled_modules(src / 'rmqc'))} modules; interpreted: {', '.join(INTERPRETED)}")
    print(f"run it: .venv/bin/python bench/bench_cpu_per_write.py --tree main=src --tree compiled={src}")


if __name__ == "__main__":
    main()
