"""Crash safety with real processes: SIGKILL a child that appends with fsync, at seeded random
moments, and check after every restart that every index it reported durable is there, intact, and
that the log is a valid prefix (checksums, continuity, terms never going back)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rmqc.storage import LmdbStorage

CHILD = Path(__file__).with_name("crash_child.py")
KILLS = 25
# Durable reports to wait for before a kill; spread so kills land early and late in a run.
MAX_REPORTS_BEFORE_KILL = 40
SEED = 20261122


def run_child_until_killed(data_dir: Path, term: int, rng: random.Random,
                           env: dict[str, str] | None = None) -> dict[int, int]:
    """Start the child, read a random number of durable reports, SIGKILL it; index -> term reported."""
    reports_wanted = rng.randint(1, MAX_REPORTS_BEFORE_KILL)
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir), str(term), str(rng.randrange(1 << 30))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    reported: dict[int, int] = {}
    try:
        assert child.stdout is not None
        for _ in range(reports_wanted):
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"child exited early: {child.wait()} {child.stderr.read() if child.stderr else ''}")
            _, last, line_term = line.split()
            reported[int(last)] = int(line_term)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    return reported


def check_after_crash(data_dir: Path, durable_terms: dict[int, int], where: str) -> None:
    from crash_child import payload  # type: ignore[import-not-found]

    with LmdbStorage(data_dir, sync=False) as storage:
        report = storage.verify()
        assert report.ok, f"{where}: {report}"
        highest_durable = max(durable_terms)
        assert storage.last_index() >= highest_durable, where
        assert storage.snapshot_meta().index >= storage.first_index() - 1, where
        for entry in storage.iter_entries():
            assert entry.data == payload(entry.index, entry.term), f"{where}: entry {entry.index}"
            if entry.index in durable_terms:
                assert entry.term == durable_terms[entry.index], f"{where}: term of {entry.index}"


@pytest.mark.slow
def test_sigkill_never_loses_a_durable_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(CHILD.parent))
    rng = random.Random(SEED)
    data_dir = tmp_path / "node"
    durable_terms: dict[int, int] = {}
    for kill in range(KILLS):
        reported = run_child_until_killed(data_dir, term=kill + 1, rng=rng)
        for last, term in reported.items():
            durable_terms[last] = term
        check_after_crash(data_dir, durable_terms, f"seed {SEED}, after kill {kill}")
    with LmdbStorage(data_dir, sync=False) as storage:
        # The log grew across the kills and compactions happened, so kills could land in them.
        assert storage.last_index() > 1000 and storage.first_index() > 1, storage
