"""The simulator's membership operator (`_simmembers`, profile "members"): new nodes join with
empty disks and catch up (by snapshot once the log is compacted), voters are removed and replaced,
the leadership moves, under the default faults; and the membership checks that watch it."""

from __future__ import annotations

from dataclasses import replace

from rmqc.testing._simcheck import SafetyChecker
from rmqc.testing.sim import PROFILES, mutant, nodes_for_seed, run_seed


def members_run(seed: int) -> object:
    return run_seed(seed, replace(PROFILES["members"], nodes=nodes_for_seed(seed, None)))


def test_the_members_profile_changes_the_membership_under_faults_without_violations() -> None:
    counts: dict[str, int] = {}
    # 8 seeds: since the simulated brokers also send NameServer traffic, seeds 0-5 transfer the
    # leadership twice between them, 0-7 three times (each seed's history changed with the load)
    for seed in range(8):
        result = members_run(seed)
        assert result.ok, (seed, result.violations, result.trace)  # type: ignore[attr-defined]
        for what, n in result.counts.items():  # type: ignore[attr-defined]
            counts[what] = counts.get(what, 0) + n
    for done in ("members_add_done", "members_promote_done", "members_remove_done", "members_transfer_done",
                 "nodes_retired", "snapshots_installed"):
        assert counts.get(done, 0) >= 3, (done, counts)


def test_members_runs_replay_the_same_run() -> None:
    first, second = members_run(3), members_run(3)
    assert first.trace == second.trace and first.counts == second.counts  # type: ignore[attr-defined]


def test_two_pending_changes_are_caught_as_such() -> None:
    with mutant("two-pending-changes"):
        failures = [members_run(seed) for seed in range(12)]
    violations = [v for result in failures for v in result.violations]  # type: ignore[attr-defined]
    assert any("pending at once" in v for v in violations), violations


def test_the_membership_check_compares_every_node_at_each_index() -> None:
    checker = SafetyChecker()
    checker.on_membership("n0", 7, (("n0", "n1"), ()))
    checker.on_membership("n1", 7, (("n0", "n1"), ()))
    assert checker.ok
    checker.on_membership("n2", 7, (("n0", "n1", "n2"), ()))
    assert not checker.ok and "membership: n2 applied" in checker.violations[0]
