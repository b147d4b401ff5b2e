"""`make test` installs what the suite needs beyond .venv itself (scripts/install-test-deps.sh, the
`deps` target), only when it is missing; `.ci/run` is nothing more than the README's `make test`.

The script runs for real here, with apt-get replaced by a recorder on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install-test-deps.sh"


def _fake_bin(tmp_path: Path, *present: str) -> Path:
    """A PATH directory: an apt-get that records its arguments, and the named commands."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorder = bin_dir / "apt-get"
    recorder.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "apt.log"}\n')
    for name in ("id", "bash"):
        (bin_dir / name).symlink_to(shutil.which(name) or f"/usr/bin/{name}")
    for name in present:
        (bin_dir / name).write_text("#!/bin/sh\n")
    for command in bin_dir.iterdir():
        command.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, bin_dir: Path, root: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = {**os.environ, "PATH": str(bin_dir), "DEPS_ROOT": str(root)}
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    log = tmp_path / "apt.log"
    return result, log.read_text().splitlines() if log.exists() else []


def test_what_is_missing_is_installed(tmp_path: Path) -> None:
    if os.getuid() != 0:
        bin_dir = _fake_bin(tmp_path, "sudo")
        (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    else:
        bin_dir = _fake_bin(tmp_path)
    result, apt = _run(tmp_path, bin_dir, tmp_path / "empty-root")
    assert result.returncode == 0, result.stderr
    assert apt == ["update -qq", "install -y -qq openjdk-17-jdk-headless maven faketime e2fsprogs "
                   "chromium prometheus valgrind"]


def test_nothing_is_installed_when_everything_is_there(tmp_path: Path) -> None:
    root = tmp_path / "root"
    library = root / "usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
    library.parent.mkdir(parents=True)
    library.touch()
    chromium = root / "usr/bin/chromium"
    chromium.parent.mkdir(parents=True)
    chromium.touch(mode=0o755)
    result, apt = _run(tmp_path, _fake_bin(tmp_path, "javac", "mvn", "mkfs.ext4", "promtool", "valgrind"), root)
    assert (result.returncode, apt) == (0, [])


def test_make_test_runs_deps_and_ci_runs_only_make_test() -> None:
    rules = subprocess.run(["make", "-C", str(ROOT), "-p", "-n", "--no-builtin-rules", "deps"],
                           capture_output=True, text=True, timeout=60).stdout
    test_rule = next(line for line in rules.splitlines() if line.startswith("test:"))
    assert "deps" in test_rule.split(":", 1)[1].split()
    assert "scripts/install-test-deps.sh" in rules.split("\ndeps:", 1)[1].split("\n\n", 1)[0]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == "exec make test"
    assert not any("apt-get" in line for line in ci)


def test_what_the_documented_commands_write_is_ignored_by_git() -> None:
    """`rmqc chaos run --out chaos-out` (docs/chaos.md) and the README walkthrough's outputs."""
    for path in ("chaos-out/report.md", "rmqc-dev/n0/data.mdb", "rmqc-sim/x", "analysis/report.md", "n0.parquet",
                 "rmqc-data/data.mdb"):
        result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path], timeout=60)
        assert result.returncode == 0, path
