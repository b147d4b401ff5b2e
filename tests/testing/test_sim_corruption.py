"""The corruption profile: disks that come back from a crash damaged (detected: the node repairs
from the cluster) or short of their last saves (undetected), with the real code and with the repair
broken in the two ways the checkers must see: a node that votes with what it lost, and a repair that
never ends. And the disks profile: running nodes' disks that fill up or fail a write."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmqc.raft._core import RaftCore
from rmqc.testing import _simworld
from rmqc.testing.sim import PROFILES, mutant, nodes_for_seed, run_seed, run_seeds

CORRUPTION = PROFILES["corruption"]


def test_the_corruption_profile_damages_disks_and_every_repair_ends_without_violations() -> None:
    summary = run_seeds(range(16), knobs=CORRUPTION)
    assert not summary.failing, [(r.seed, r.violations[0]) for r in summary.failing or []]
    counts = summary.counts or {}
    damaged = counts.get("disk_damaged_emptied", 0) + counts.get("disk_damaged_prefix_kept", 0)
    assert damaged >= 4 and counts.get("disk_damaged_emptied", 0) and counts.get("disk_damaged_prefix_kept", 0)
    assert counts.get("disk_lost_tail", 0) >= 1
    # (a node damaged again while repairing ends one repair; whether each ends is the liveness check's)
    assert counts.get("repairs_ended", 0) >= damaged // 2
    assert counts.get("controller_elections", 0) > 16


def test_disks_fill_and_fail_under_seeds_and_nothing_acknowledged_is_lost() -> None:
    """Profile "disks": a full disk raises the replica's alarm (writes refused, reads served) and it
    clears once space is freed; a snapshot written as the disk fills reports DISK_FULL; a failed write
    stops the node, which restarts from what is durable. Every checker runs meanwhile (no
    acknowledged write lost, nothing applied before it is durable, beyond entries a majority holds
    while the alarm is up). One save in twenty goes on in the background, some for longer than an
    election timeout (a stalled disk). Seeds 40 and 126 or 231: a snapshot refused for space (the
    shared Runner reshaped the histories again: 1, 126 and 231 before it, 135 and 141 before the
    background saves)."""
    summary = run_seeds([*range(6), 40, 126, 231], knobs=PROFILES["disks"])
    assert not summary.failing, [(r.seed, r.violations[0]) for r in summary.failing or []]
    counts = summary.counts or {}
    assert counts.get("alarm_disk_full_raised", 0) >= 3
    assert counts.get("alarm_disk_full_cleared", 0) >= 2
    assert counts.get("snapshots_disk_full", 0) >= 2
    assert counts.get("stopped_by_failed_write", 0) >= 3
    assert counts.get("saves_longer_than_an_election_timeout", 0) > 0


def test_corruption_runs_replay_the_same_run() -> None:
    first, second = run_seed(3, CORRUPTION), run_seed(3, CORRUPTION)
    assert first.trace == second.trace and first.counts == second.counts
    assert any("disk is damaged" in line or "silently lost" in line for line in first.trace) or \
        first.counts.get("disk_damaged_emptied", 0) + first.counts.get("disk_damaged_prefix_kept", 0) > 0


def test_other_profiles_draw_no_disk_faults() -> None:
    assert not PROFILES["default"].disk_faults
    counts = run_seed(5).counts
    assert not [what for what in counts if what.startswith(("disk_", "repairs_"))]


def first_failure(seeds: range) -> tuple[int, str] | None:
    for seed in seeds:
        result = run_seed(seed, replace(CORRUPTION, nodes=nodes_for_seed(seed, None)))
        if not result.ok:
            return seed, result.violations[0]
    return None


def test_a_node_voting_with_what_it_lost_is_caught() -> None:
    with mutant("repair-without-fence"):
        found = first_failure(range(20))
    assert found is not None
    assert "while repairing its damaged storage" in found[1] or "liveness" in found[1], found
    print(f"repair-without-fence caught at seed {found[0]}: {found[1]}")


def test_a_node_voting_with_what_it_lost_loses_committed_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same mutant with the vote, campaign and liveness checks blind (the simulator forgets
    which nodes are repairing once the fault is recorded): a leader elected with the damaged node's
    vote lacks an entry committed with its lost ack (seed 58 when this was written)."""
    damage_storage = _simworld.World.damage_storage

    def blind(world: _simworld.World, node: object, rng: object) -> None:
        damage_storage(world, node, rng)  # type: ignore[arg-type]
        world.damaged.pop(node.id, None)  # type: ignore[attr-defined]

    monkeypatch.setattr(_simworld.World, "damage_storage", blind)
    with mutant("repair-without-fence"):
        found = first_failure(range(80))
    assert found is not None
    assert found[1].startswith(("leader completeness", "durability", "state-machine safety")), found
    print(f"caught at seed {found[0]}: {found[1]}")


def test_a_repair_that_never_ends_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader never answers REPAIR: the damaged node stays fenced for good."""
    monkeypatch.setattr(RaftCore, "_leader_on_repair", lambda self, m: None)
    found = first_failure(range(40))
    assert found is not None and found[1].startswith("liveness:"), found
    print(f"caught at seed {found[0]}: {found[1]}")
