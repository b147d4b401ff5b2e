"""The life of one synthetic broker group, scripted event by event (the slow, detailed half of synth).

A `GroupScript` plays a broker group through registrations, elections with realistic failovers,
sync-state-set changes, address changes, replica replacements, refused commands and (rarely) a
whole-group clean, applying each command to its own copy of the state exactly as the controller
would (spec 4.2), and records one export row per command in columns. Times are relative to the
group's start; `_synth` places groups in time and in controller logs.

Planting a violation breaks the rules once, on purpose, and remembers the row that shows it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from ._invariants import (
    BROKER_ID_REUSED,
    MASTER_EPOCH_NOT_INCREASING,
    MASTER_OUTSIDE_SYNC_STATE_SET,
    SYNC_STATE_SET_EPOCH_JUMP,
    TWO_MASTERS_IN_EPOCH,
)

# The kinds `plant` accepts. Planting two masters in one epoch necessarily repeats that epoch, so it
# also shows MASTER_EPOCH_NOT_INCREASING at the same row (both are expected).
PLANTABLE_KINDS: tuple[str, ...] = (
    MASTER_EPOCH_NOT_INCREASING,
    TWO_MASTERS_IN_EPOCH,
    MASTER_OUTSIDE_SYNC_STATE_SET,
    SYNC_STATE_SET_EPOCH_JUMP,
    BROKER_ID_REUSED,
)

# Columns a script records; group-dependent text (names, addresses) is completed by _synth.
SCRIPT_COLUMNS: tuple[str, ...] = (
    "rel_ts_ms", "command", "broker_id", "addr_host", "addr_port", "code_port", "code_rel_ms", "trigger",
    "elected", "new_master_id", "prev_master_id", "master_epoch", "sync_state_set_epoch",
    "sync_state_set", "prev_sync_state_set", "clean_ids", "unclean_enabled", "liveness_lost_rel_ms",
    "result", "description",
)  # fmt: skip

BASE_PORT = 10911
# Median time from the leader seeing a master go inactive to committing the new master: deadline
# expiry plus one Raft round; the lognormal tail gives the occasional slow one (retries, big batch).
FAILOVER_MEDIAN_MS = 120.0
FAILOVER_SIGMA = 0.9
REJOIN_MEDIAN_MS = 8_000.0  # replicas catch up with a new master and are added back (1001)
FOLLOW_UP_GAP_MS = 2_000  # quick follow-up events (registrations, re-elections)


@dataclass
class Replica:
    host: int
    port: int
    code_rel_ms: int
    code_port: int = BASE_PORT  # the port when the id was applied: the check code keeps it


@dataclass
class GroupState:
    replicas: dict[int, Replica] = field(default_factory=dict)
    next_id: int = 1
    next_host: int = 0
    master: int | None = None
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()


@dataclass(frozen=True)
class PlantedRow:
    """A planted violation: its kind and the script row that shows it."""

    kind: str
    row: int


class GroupScript:
    """Plays one group; `rows` holds the recorded columns, `planted` the violations put in."""

    def __init__(self, rng: random.Random, *, mean_gap_ms: float, unclean: bool, replicas: int) -> None:
        self.rng = rng
        self.mean_gap_ms = mean_gap_ms
        self.unclean = unclean
        self.replica_count = replicas
        self.state = GroupState()
        self.now_ms = 0
        self.columns: dict[str, list[object]] = {name: [] for name in SCRIPT_COLUMNS}
        self.planted: list[PlantedRow] = []

    # ---- recording ---------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.columns["rel_ts_ms"])

    def _record(self, command: str, description: str, *, prev_set: frozenset[int] | None,
                result: str = "ok", **values: object) -> int:
        s = self.state
        row: dict[str, object] = dict.fromkeys(SCRIPT_COLUMNS)
        row.update(
            rel_ts_ms=self.now_ms, command=command, result=result, description=description,
            master_epoch=s.master_epoch, sync_state_set_epoch=s.sync_state_set_epoch,
            sync_state_set=sorted(s.sync_state_set),
            prev_sync_state_set=None if prev_set is None else sorted(prev_set),
        )
        row.update(values)
        for name in SCRIPT_COLUMNS:
            self.columns[name].append(row[name])
        return self.row_count - 1

    def _advance(self, mean_ms: float) -> None:
        self.now_ms += 1 + int(self.rng.expovariate(1.0 / mean_ms))

    # ---- commands, applied as the controller applies them (spec 4.2) -------------------------

    def apply_id(self, broker_id: int, *, code_rel_ms: int | None = None) -> int:
        s = self.state
        # A group that does not exist yet has no state before the command (the export's null).
        prev = s.sync_state_set if (s.master_epoch or s.replicas) else None
        existing = s.replicas.get(broker_id)
        if existing is None:
            host = s.next_host
            s.next_host += 1
            existing = Replica(host, BASE_PORT, self.now_ms if code_rel_ms is None else code_rel_ms)
            s.replicas[broker_id] = existing
            s.next_id = max(s.next_id + 1, broker_id + 1)
        elif code_rel_ms is not None:
            existing.code_rel_ms, existing.code_port = code_rel_ms, existing.port
        return self._record(
            "apply_broker_id", f"apply broker id {broker_id}", prev_set=prev, broker_id=broker_id,
            addr_host=existing.host, addr_port=existing.port, code_rel_ms=existing.code_rel_ms,
            code_port=existing.code_port,
            prev_master_id=s.master,
        )

    def elect(self, candidate: int | None, trigger: str, *, lost_ms: int | None = None,
              epoch_step: int = 1) -> int:
        s = self.state
        prev_master, prev_set = s.master, s.sync_state_set
        s.master_epoch += epoch_step
        s.master = candidate
        if candidate is not None:
            s.sync_state_set = frozenset((candidate,))
            s.sync_state_set_epoch += 1
        replica = s.replicas.get(candidate) if candidate is not None else None
        what = f"master {candidate}" if candidate is not None else "no master (cleared)"
        return self._record(
            "elect_master", f"elect {what} at masterEpoch {s.master_epoch} ({trigger} trigger)",
            prev_set=prev_set, trigger=trigger, elected=candidate is not None,
            new_master_id=candidate, prev_master_id=prev_master, unclean_enabled=self.unclean,
            liveness_lost_rel_ms=lost_ms, broker_id=None if trigger == "controller" else candidate,
            addr_host=replica.host if replica else None, addr_port=replica.port if replica else None,
        )

    def alter(self, new_set: frozenset[int], *, epoch_step: int = 1) -> int:
        s = self.state
        prev_set = s.sync_state_set
        s.sync_state_set = new_set
        s.sync_state_set_epoch += epoch_step
        return self._record(
            "alter_sync_state_set", f"alter syncStateSet to {sorted(new_set)}", prev_set=prev_set,
            broker_id=s.master, prev_master_id=s.master,
        )

    def refused_alter(self) -> int:
        s = self.state
        return self._record(
            "alter_sync_state_set", "alter syncStateSet with a stale masterEpoch (refused)",
            prev_set=s.sync_state_set, result="stale_master_epoch", broker_id=s.master,
            prev_master_id=s.master,
        )

    def update_address(self, broker_id: int) -> int:
        replica = self.state.replicas[broker_id]
        replica.port += 1
        return self._record(
            "update_broker_address", f"broker {broker_id} moved to port {replica.port}",
            prev_set=self.state.sync_state_set, broker_id=broker_id, addr_host=replica.host,
            addr_port=replica.port, prev_master_id=self.state.master,
        )

    def clean(self, ids: list[int] | None) -> int:
        s = self.state
        prev_master, prev_set = s.master, s.sync_state_set
        if ids is None:
            self.state = GroupState()
            row = self._record("clean_broker_data", "clean the whole broker group", prev_set=prev_set,
                               prev_master_id=prev_master)
            for name in ("master_epoch", "sync_state_set_epoch", "sync_state_set"):
                self.columns[name][row] = None  # the group is gone: no state after it
            return row
        for broker_id in ids:
            s.replicas.pop(broker_id)
        s.sync_state_set = s.sync_state_set - set(ids)
        return self._record("clean_broker_data", f"clean broker ids {ids}", prev_set=prev_set,
                            clean_ids=list(ids), prev_master_id=prev_master)

    # ---- scenes: a few commands that belong together -----------------------------------------

    def register_all(self) -> None:
        for _ in range(self.replica_count):
            self.apply_id(self.state.next_id)
            self._advance(FOLLOW_UP_GAP_MS)
        first = self.rng.choice(sorted(self.state.replicas))
        self.elect(first, "broker")
        self._advance(REJOIN_MEDIAN_MS)
        self.alter(frozenset(self.state.replicas))

    def failover(self) -> None:
        s = self.state
        old = s.master
        assert old is not None
        lost_ms = self.now_ms
        self.now_ms += 1 + int(self.rng.lognormvariate(math.log(FAILOVER_MEDIAN_MS), FAILOVER_SIGMA))
        candidates = sorted(s.sync_state_set - {old})
        if candidates:
            self.elect(self.rng.choice(candidates), "controller", lost_ms=lost_ms)
        else:
            self.elect(None, "controller", lost_ms=lost_ms)
            self._advance(FOLLOW_UP_GAP_MS * 5)
            outsiders = sorted(set(s.replicas) - s.sync_state_set)
            if self.unclean and outsiders:
                self.elect(self.rng.choice(outsiders), "broker")  # legitimately unclean
            else:
                self.elect(old, "broker")  # the old master came back and asked
        self._advance(REJOIN_MEDIAN_MS)
        self.alter(frozenset(s.replicas))

    def shrink(self) -> bool:
        s = self.state
        removable = sorted(s.sync_state_set - {s.master})
        if s.master is None or not removable:
            return False
        self.alter(s.sync_state_set - {self.rng.choice(removable)})
        return True

    def expand(self) -> bool:
        s = self.state
        addable = sorted(set(s.replicas) - s.sync_state_set)
        if s.master is None or not addable:
            return False
        self.alter(s.sync_state_set | {self.rng.choice(addable)})
        return True

    def admin_elect(self) -> bool:
        s = self.state
        others = sorted(s.sync_state_set - {s.master})
        if s.master is None or not others:
            return False
        self.elect(self.rng.choice(others), "admin")
        return True

    def replace_replica(self) -> bool:
        """Clean a replica that is out of the set, then a new broker takes a fresh id."""
        s = self.state
        spare = sorted(set(s.replicas) - s.sync_state_set - {s.master})
        if not spare:
            return False
        self.clean([self.rng.choice(spare)])
        self._advance(FOLLOW_UP_GAP_MS * 10)
        self.apply_id(s.next_id)
        return True

    def reregister(self) -> None:
        self.apply_id(self.rng.choice(sorted(self.state.replicas)))

    def recreate(self) -> None:
        self.clean(None)
        self._advance(FOLLOW_UP_GAP_MS * 30)
        self.register_all()

    # ---- planting ----------------------------------------------------------------------------

    def _plant(self, kind: str, row: int) -> None:
        self.planted.append(PlantedRow(kind, row))

    def _ensure_spare_in_set(self) -> None:
        """Make the set hold someone besides the master (for planting two masters in one epoch)."""
        if not self.state.sync_state_set - {self.state.master}:
            self.expand()
            self._advance(FOLLOW_UP_GAP_MS)

    def _ensure_outsider(self) -> None:
        """Make some replica sit outside the set (for planting an out-of-set election or reuse)."""
        if not set(self.state.replicas) - self.state.sync_state_set - {self.state.master}:
            self.shrink()
            self._advance(FOLLOW_UP_GAP_MS)

    def plant(self, kind: str, flavour: int = 0) -> None:
        s = self.state
        if kind == MASTER_EPOCH_NOT_INCREASING:
            self._plant(kind, self.elect(s.master, "admin", epoch_step=0))
        elif kind == TWO_MASTERS_IN_EPOCH:
            self._ensure_spare_in_set()
            other = self.rng.choice(sorted(s.sync_state_set - {s.master}))
            row = self.elect(other, "admin", epoch_step=0)
            self._plant(TWO_MASTERS_IN_EPOCH, row)
            self._plant(MASTER_EPOCH_NOT_INCREASING, row)
        elif kind == MASTER_OUTSIDE_SYNC_STATE_SET:
            self._ensure_outsider()
            outsider = self.rng.choice(sorted(set(s.replicas) - s.sync_state_set))
            lost_ms = self.now_ms - 1 - int(self.rng.expovariate(1.0 / FAILOVER_MEDIAN_MS))
            self._plant(kind, self.elect(outsider, "controller", lost_ms=lost_ms))
        elif kind == SYNC_STATE_SET_EPOCH_JUMP:
            self._ensure_spare_in_set()
            assert s.master is not None  # _ensure_spare_in_set leaves a master
            self._plant(kind, self.alter(frozenset((s.master,)), epoch_step=2))
        elif kind == BROKER_ID_REUSED:
            self._plant_reuse(flavour)

    def _plant_reuse(self, flavour: int) -> None:
        s = self.state
        if flavour % 2 == 0:  # an id applied again after being cleaned
            self._ensure_outsider()
            victim = self.rng.choice(sorted(set(s.replicas) - s.sync_state_set - {s.master}))
            self.clean([victim])
            self._advance(FOLLOW_UP_GAP_MS)
            self._plant(BROKER_ID_REUSED, self.apply_id(victim))
        else:  # an id applied again with a different register check code
            taken = self.rng.choice(sorted(s.replicas))
            self._plant(BROKER_ID_REUSED, self.apply_id(taken, code_rel_ms=self.now_ms))

    # ---- the whole life ----------------------------------------------------------------------

    def play(self, target_rows: int, *, plants: list[tuple[str, int]], flapping: bool,
             recreate: bool) -> None:
        """Register, then act until about `target_rows` rows; plants go in at the middle."""
        self.register_all()
        plant_at = max(self.row_count + 1, target_rows // 2)
        recreate_at = max(self.row_count + 1, (target_rows * 3) // 4) if recreate else None
        weights = _FLAPPING_WEIGHTS if flapping else _CALM_WEIGHTS
        scenes = list(weights)
        cumulative = list(weights.values())
        while self.row_count < target_rows:
            self._advance(self.mean_gap_ms)
            if plants and self.row_count >= plant_at:
                for kind, flavour in plants:
                    self.plant(kind, flavour)
                    self._advance(FOLLOW_UP_GAP_MS)
                plants = []
                continue
            if recreate_at is not None and self.row_count >= recreate_at:
                recreate_at = None
                self.recreate()
                continue
            scene = self.rng.choices(scenes, cum_weights=cumulative)[0]
            _SCENES[scene](self)


def _failover_if_master(script: GroupScript) -> bool:
    if script.state.master is None:
        return False
    script.failover()
    return True


def _address(script: GroupScript) -> bool:
    script.update_address(script.rng.choice(sorted(script.state.replicas)))
    return True


def _reregister(script: GroupScript) -> bool:
    script.reregister()
    return True


def _refused(script: GroupScript) -> bool:
    script.refused_alter()
    return True


_SCENES = {
    "failover": _failover_if_master,
    "shrink": GroupScript.shrink,
    "expand": GroupScript.expand,
    "address": _address,
    "reregister": _reregister,
    "refused": _refused,
    "replace": GroupScript.replace_replica,
    "admin_elect": GroupScript.admin_elect,
}


def _cumulative(weights: dict[str, float]) -> dict[str, float]:
    total, out = 0.0, {}
    for name, weight in weights.items():
        total += weight
        out[name] = total
    return out


_CALM_WEIGHTS = _cumulative(
    {"failover": 2, "shrink": 3, "expand": 3, "address": 2, "reregister": 2, "refused": 1,
     "replace": 0.5, "admin_elect": 0.3}
)
_FLAPPING_WEIGHTS = _cumulative(
    {"failover": 12, "shrink": 2, "expand": 2, "address": 1, "reregister": 1, "refused": 1,
     "replace": 0.2, "admin_elect": 1}
)
