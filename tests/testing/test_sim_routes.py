"""The simulator's NameServer checks (`_simroute_check`), each shown failing on a hand-made violating
history; the load a run carries (103 registrations, 105 answers at every level); the mutant."""

from __future__ import annotations

from dataclasses import replace

from rmqc.fsm import (
    ApplyBrokerId,
    ApplyResult,
    ApplyStatus,
    BrokerGroup,
    ElectMaster,
    RegisterBrokerRoute,
    Replica,
    Trigger,
    UnregisterBrokerRoute,
)
from rmqc.testing._simcontroller_check import ControllerChecker
from rmqc.testing._simhistory import ControllerHistory, RouteRecord
from rmqc.testing.sim import MUTANTS, PROFILES, mutant, nodes_for_seed, run_seed

OK = ApplyStatus.OK
MUTANT_SEEDS = 30  # as tests/testing/test_sim_controller.py: caught within this many seeds


def group(master: int) -> BrokerGroup:
    return BrokerGroup("sim", "g0", 4, {i: Replica(f"a{i}", f"c{i}") for i in (1, 2, 3)}, master, master,
                       frozenset({1, 2}), 1)


def register(address: str, broker_id: int = 0) -> RegisterBrokerRoute:
    return RegisterBrokerRoute("sim", "g0", broker_id, address, address, 1, 1, 1, (("g0-t0", 4, 4, 6, 0),), 0)


def committed(registrant: str = "a1") -> ControllerChecker:
    """g0 with master 1 (a1) at index 1 (t=0); `registrant` registers g0-t0 at index 2 (t=50); master
    2 (a2) elected at index 3 (t=100)."""
    checker = ControllerChecker()
    first, second = group(1), group(2)
    checker.on_apply(1, [ApplyResult(ApplyBrokerId("sim", "g0", 1, "a1", "c1", 0), OK, None, first)], 0)
    checker.on_apply(2, [ApplyResult(register(registrant), OK, first, first)], 50)
    elect = ElectMaster("sim", "g0", Trigger.CONTROLLER, 2, 1, 1, 0)
    checker.on_apply(3, [ApplyResult(elect, OK, first, second)], 100)
    return checker


def route(applied: int, master: str | None, *, level: str = "stale", node: str = "n1", invoke_us: int = 300,
          queued: bool = True, body: bytes | None = None) -> RouteRecord:
    queues = ("g0",) if queued else ()
    return RouteRecord(node, 1, level, "g0-t0", invoke_us, invoke_us + 10, applied, (("g0", master),), queues,
                       body if body is not None else f"{master}/{queued}".encode())


def finish(checker: ControllerChecker, *routes: RouteRecord) -> list[str]:
    history = ControllerHistory()
    for record in routes:
        history.add(record)
    checker.finish(history, [])
    return checker.violations


def test_fencing_a_route_lists_only_the_master_committed_at_its_index() -> None:
    assert finish(committed(), route(2, "a1"), route(3, "a2")) == []
    assert finish(committed(), route(3, None)) == []  # the master not registered yet
    violations = finish(committed(), route(3, "a1"))
    assert violations and violations[0].startswith("route-fencing: the route of g0-t0 on n1 at applied index 3 "
                                                   "lists a1"), violations


def test_fencing_leaves_broker_names_without_a_group_to_java_rules() -> None:
    checker = committed()
    other = RouteRecord("n1", 1, "stale", "g9-t0", 0, 10, 3, (("g9", "b1"),), ("g9",), b"x")
    assert finish(checker, other) == []


def test_stale_a_linearizable_route_is_served_after_every_master_change_applied_before_it_was_sent() -> None:
    assert finish(committed(), route(2, "a1", level="linearizable", invoke_us=90)) == []  # concurrent with index 3
    assert finish(committed(), route(2, "a1", level="stale", invoke_us=200)) == []  # stale may lag
    for level in ("linearizable", "lease"):
        violations = finish(committed(), route(2, "a1", level=level, invoke_us=200))
        assert violations and violations[0].startswith(f"route-stale: {level} route of g0-t0 on n1"), violations


def test_divergent_answers_at_one_applied_index_differ_nowhere() -> None:
    assert finish(committed(), route(3, "a2", node="n1"), route(3, "a2", node="n2")) == []
    violations = finish(committed(), route(3, "a2", node="n1"), route(3, "a2", node="n2", body=b"other"))
    assert violations and violations[0].startswith("route-divergent: at applied index 3 the route of g0-t0"), violations


def test_lost_a_topic_the_committed_master_registered_stays_routed_until_unregistered() -> None:
    violations = finish(committed(), route(3, "a2", queued=False))
    assert violations and violations[0].startswith("route-lost: g0's committed master registered g0-t0 at index 2"), \
        violations
    assert finish(committed(), route(1, None, queued=False)) == []  # before the registration
    checker = committed()
    gone = UnregisterBrokerRoute("sim", "g0", 0, "a1", "inactive", 0)
    checker.on_apply(4, [ApplyResult(gone, OK, group(2), group(2))], 150)
    assert finish(checker, route(4, "a2", queued=False)) == []


def test_a_registration_of_a_broker_that_is_not_the_committed_master_requires_nothing() -> None:
    assert finish(committed(registrant="a2"), route(3, "a2", queued=False)) == []


def test_the_load_registers_and_reads_routes_at_every_level() -> None:
    levels: dict[str, int] = {}
    routed = masters = 0
    for seed in range(3):
        result = run_seed(seed, replace(PROFILES["default"], nodes=nodes_for_seed(seed, None)))
        assert result.ok, (seed, result.violations)
        assert result.counts["controller_routes_checked"] == len(result.history.routes)
        for record in result.history.routes:
            levels[record.level] = levels.get(record.level, 0) + 1
            routed += bool(record.queues)
            masters += any(address is not None for _, address in record.masters)
    assert sorted(levels) == ["lease", "linearizable", "stale"] and min(levels.values()) > 20, levels
    assert routed > 50 and masters > 50, (routed, masters)


def test_the_unfenced_route_mutant_is_caught_within_mutant_seeds() -> None:
    name = "route-master-unfenced"
    profile = PROFILES[MUTANTS[name].profile]
    with mutant(name):
        for seed in range(MUTANT_SEEDS):
            result = run_seed(seed, replace(profile, nodes=nodes_for_seed(seed, None)))
            if not result.ok:
                assert result.violations[0].startswith("route-fencing: "), result.violations
                print(f"{name}: caught at seed {seed}")
                return
    raise AssertionError(f"{name} not caught in {MUTANT_SEEDS} seeds")
