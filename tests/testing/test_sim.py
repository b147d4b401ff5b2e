"""The simulator end to end, with the replica that ships: determinism, the CLI, a CI batch of
seeds, the profiles with the real code, and broken variants of the Raft core that the checkers must
catch (the controller-level checks and the named mutants: test_sim_controller.py).

Each broken-variant test runs seeds in order until the first violation and fails if none shows up
within its bound; the seed that caught it is printed, and replays with
`python -m rmqc.testing.sim --seed S` after applying the same patch."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import rmqc.raft._core as raft_core
import rmqc.testing as testing_package
from rmqc.raft._core import RaftCore
from rmqc.testing._simnemesis import NemesisKnobs
from rmqc.testing.sim import PROFILES, SimKnobs, main, run_seed, run_seeds

# Crashes of every kind, many in the middle of an fsync, among pauses and isolations: a vote or an
# ack that left before its fsync is forgotten by the crash.
CRASHES = replace(
    SimKnobs(),
    nemesis=NemesisKnobs(weights={"crash": 2, "crash_leader": 2, "crash_mid_fsync": 2, "pause": 1, "heal": 1,
                                  "isolate_leader": 1}),
)


def first_violation(knobs: SimKnobs, seeds: range) -> tuple[int, str] | None:
    """The first seed (3 and 5 nodes alternating) with a violation."""
    for seed in seeds:
        result = run_seed(seed, replace(knobs, nodes=3 if seed % 2 == 0 else 5))
        if not result.ok:
            return seed, result.violations[0]
    return None


def assert_caught(knobs: SimKnobs, seed_bound: int) -> None:
    found = first_violation(knobs, range(seed_bound))
    assert found is not None, f"no violation in seeds 0..{seed_bound - 1}"
    print(f"caught at seed {found[0]}: {found[1][:200]}")


# -- determinism and the command line ----------------------------------------------------------


def test_same_seed_replays_the_same_run() -> None:
    first, second = run_seed(11), run_seed(11)
    assert first.history == second.history
    assert first.trace == second.trace and first.counts == second.counts
    assert first.ops > 20 and len(first.history.reads) > 10
    assert run_seed(12).history != first.history


def history_digest_in_subprocess(hash_seed: str) -> str:
    code = (
        "import hashlib, json; from rmqc.testing.sim import run_seed; r = run_seed(13); "
        "print(hashlib.sha256(json.dumps([r.trace, r.counts, repr(r.history)]).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_runs_do_not_depend_on_hash_randomisation() -> None:
    # Different PYTHONHASHSEEDs change set and str-hash order; the run must not notice.
    assert history_digest_in_subprocess("1") == history_digest_in_subprocess("2")


def test_cli_runs_seeds_and_ends_with_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "2", "--start", "5", "--nodes", "3"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    summary = json.loads(last)
    assert list(summary) == ["seeds", "violations", "ops", "controller", "sim_seconds", "wall_seconds"]
    assert summary["seeds"] == 2 and summary["violations"] == 0 and summary["ops"] > 0
    assert list(summary["controller"]) == ["elections", "notifications", "broker_requests"]
    assert all(count > 0 for count in summary["controller"].values()), summary["controller"]
    knobs = SimKnobs()
    assert summary["sim_seconds"] == pytest.approx(2 * (knobs.active_us + knobs.quiet_us) / 1e6)


def test_cli_prints_failing_seed_with_trace(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(RaftCore, "_candidate_log_up_to_date", lambda self, term, index: True)
    found = first_violation(SimKnobs(), range(40))
    assert found is not None
    assert main(["--seeds", "1", "--start", str(found[0])]) == 1
    out = capsys.readouterr().out
    assert f"seed {found[0]} (" in out and "FAILED" in out and "becomes leader" in out
    assert json.loads(out.strip().splitlines()[-1])["violations"] == 1


SIM_CORE_MODULES = ("_simadmin", "_simbrokers", "_simcheck", "_simclock", "_simcontroller_check", "_simhistory",
                    "_simnemesis", "_simnet", "_simreplica", "_simstatus", "_simstorage", "_simworld", "sim")
SIM_CORE_PATHS = [Path(testing_package.__file__).parent / f"{module}.py" for module in SIM_CORE_MODULES]
FORBIDDEN_IMPORTS = {"trio", "socket", "time", "threading", "asyncio"}


@pytest.mark.parametrize("path", SIM_CORE_PATHS, ids=lambda path: path.stem)
def test_sim_core_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN_IMPORTS


def test_the_replica_and_the_checkers_load_without_trio() -> None:
    # The replica the simulator runs is sans-IO. (The simulator itself reaches trio only through
    # the packages whose pure parts it reuses: rmqc.brokersim's model and rmqc.client's 904 fields.)
    code = ("import sys, rmqc.replica, rmqc.testing._simcheck, rmqc.testing._simcontroller_check; "
            "print('trio' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# -- the real code: the CI batch and the profiles ------------------------------------------------


@pytest.mark.parametrize("nodes", [3, 5])
def test_ci_seeds_have_no_violations(nodes: int) -> None:
    summary = run_seeds(range(1000, 1075), nodes=nodes)
    failing = [(r.seed, r.violations[0]) for r in summary.failing or []]
    assert summary.seeds == 75 and not failing, failing
    assert summary.ops > 75 * 50


@pytest.mark.parametrize("profile", ["reject-partition", "lease-drift"])
def test_profiles_pass_with_the_real_code(profile: str) -> None:
    summary = run_seeds(range(12), knobs=PROFILES[profile])
    assert not summary.failing, [(r.seed, r.violations[0]) for r in summary.failing or []]
    assert summary.counts is not None and summary.counts.get("controller_elections", 0) > 12


def test_crashes_profile_passes_with_the_real_code() -> None:
    assert first_violation(CRASHES, range(8)) is None


# -- broken variants of the Raft core: the checkers have teeth -----------------------------------


def test_catches_vote_granted_without_up_to_date_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RaftCore, "_candidate_log_up_to_date", lambda self, term, index: True)
    assert_caught(SimKnobs(), seed_bound=40)


def test_catches_acks_and_votes_sent_before_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every message leaves before the Ready is durable: a crash mid-fsync then forgets a vote or an
    # append that a leader already counted.
    monkeypatch.setattr(raft_core, "AFTER_PERSIST", frozenset())
    assert_caught(CRASHES, seed_bound=40)


def test_catches_read_index_before_own_term_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RaftCore, "_read_index_ready", lambda self: True)
    assert_caught(PROFILES["reject-partition"], seed_bound=40)
