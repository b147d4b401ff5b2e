"""The simulator's parts on their own: event order, the network model, the safety checker."""

from __future__ import annotations

import random

import pytest

from rmqc.raft import MemoryStorage
from rmqc.raft._types import ConfState, Entry, EntryType, HardState
from rmqc.testing._simcheck import SafetyChecker
from rmqc.testing._simclock import EventQueue
from rmqc.testing._simnet import LINK_IN_FLIGHT_MAX, LinkFaults, SimNetwork
from rmqc.testing._simstorage import CrashableStorage, PowerCut


def test_events_run_in_time_then_insertion_order() -> None:
    queue = EventQueue()
    seen: list[str] = []
    queue.at(20, seen.append, "late")
    queue.at(10, seen.append, "first")
    queue.at(10, seen.append, "second")
    while queue.run_next(15):
        pass
    assert seen == ["first", "second"] and queue.now_us == 10
    while queue.run_next(100):
        pass
    assert seen == ["first", "second", "late"] and queue.now_us == 20


def test_network_is_deterministic_per_seed() -> None:
    def delays(seed: int) -> list[list[int]]:
        net = SimNetwork(random.Random(seed), LinkFaults(drop_p=0.2, duplicate_p=0.2))
        return [net.delays_us("n0", "n1") for _ in range(200)]

    assert delays(7) == delays(7)
    assert delays(7) != delays(8)


def test_network_drops_duplicates_and_reorders() -> None:
    net = SimNetwork(random.Random(1), LinkFaults(drop_p=0.1, duplicate_p=0.1, delay_min_us=1, delay_max_us=1000))
    outcomes = [net.delays_us("n0", "n1") for _ in range(1000)]
    assert any(len(o) == 0 for o in outcomes)
    assert any(len(o) == 2 for o in outcomes)
    firsts = [o[0] for o in outcomes if o]
    assert firsts != sorted(firsts)  # later messages can overtake earlier ones


def test_partitions_cut_links_and_heal_restores_them() -> None:
    net = SimNetwork(random.Random(1), LinkFaults(drop_p=0.0, duplicate_p=0.0, spike_p=0.0))
    net.partition([["n0"], ["n1", "n2"]])
    assert net.delays_us("n0", "n1") == [] and net.delays_us("n2", "n0") == []
    assert len(net.delays_us("n1", "n2")) == 1
    net.heal()
    net.cut_one_way("n0", "n1")
    assert net.delays_us("n0", "n1") == []
    assert len(net.delays_us("n1", "n0")) == 1
    # A message already travelling is lost if its link is cut before it arrives.
    net.heal()
    assert len(net.delays_us("n2", "n1")) == 1
    net.isolate("n1", ["n0", "n1", "n2"])
    assert not net.arrived("n2", "n1")


def test_link_in_flight_bound_drops() -> None:
    net = SimNetwork(random.Random(1), LinkFaults(drop_p=0.0, duplicate_p=0.0))
    for _ in range(LINK_IN_FLIGHT_MAX):
        assert net.delays_us("n0", "n1")
    assert net.delays_us("n0", "n1") == []
    net.arrived("n0", "n1")
    assert net.delays_us("n0", "n1")


def test_checker_two_leaders_in_one_term() -> None:
    checker = SafetyChecker()
    checker.observe_leader("n0", 3)
    checker.observe_leader("n0", 3)
    assert checker.ok
    checker.observe_leader("n1", 3)
    assert not checker.ok and "both lead term 3" in checker.violations[0]


def entry(index: int, term: int, data: bytes = b"x") -> Entry:
    return Entry(index, term, EntryType.NORMAL, data)


def test_checker_log_matching_content_and_predecessor() -> None:
    checker = SafetyChecker()
    a, b = MemoryStorage(), MemoryStorage()
    for storage, node in ((a, "n0"), (b, "n1")):
        storage.save(HardState(1), [entry(1, 1)])
        checker.after_save(node, storage, [entry(1, 1)])
    assert checker.ok
    b.save(None, [entry(2, 2, b"other")])
    checker.after_save("n1", b, [entry(2, 2, b"other")])
    a.save(None, [entry(2, 2, b"mine")])
    checker.after_save("n0", a, [entry(2, 2, b"mine")])
    assert not checker.ok and "different entry at index 2" in checker.violations[0]


def test_checker_committed_entry_overwritten() -> None:
    checker = SafetyChecker()
    storage = MemoryStorage()
    storage.save(HardState(1), [entry(1, 1), entry(2, 1)])
    checker.on_apply("n0", entry(1, 1), ())
    checker.before_save("n1", storage, [entry(2, 2)])  # index 2 is not committed: fine
    assert checker.ok
    checker.before_save("n1", storage, [entry(1, 2)])
    assert not checker.ok and "overwrites committed entry 1" in checker.violations[0]


def test_checker_state_machine_safety() -> None:
    checker = SafetyChecker()
    checker.on_apply("n0", entry(1, 1, b"a"), (("x", "1"),))
    checker.on_apply("n1", entry(1, 1, b"a"), (("x", "1"),))
    assert checker.ok
    checker.on_apply("n2", entry(1, 2, b"b"), (("x", "2"),))
    assert not checker.ok
    checker = SafetyChecker()
    checker.on_apply("n0", entry(1, 1, b"a"), (("x", "1"),))
    checker.on_snapshot_installed("n1", 1, 1, (("x", "9"),))
    assert not checker.ok


def test_checker_leader_completeness() -> None:
    checker = SafetyChecker()
    checker.on_apply("n0", entry(1, 1), ())
    checker.on_apply("n0", entry(2, 1), ())
    checker.observe_leader("n1", 2)
    short = MemoryStorage()
    short.save(HardState(2), [entry(1, 1), entry(2, 2)])
    checker.check_leader_log("n1", 2, short)
    assert not checker.ok and "leader completeness" in checker.violations[0]


def test_checker_durable_majority() -> None:
    checker = SafetyChecker()
    checker.on_apply("n0", entry(1, 1), ())
    checker.on_apply("n0", entry(2, 1), ())
    full, short, empty = MemoryStorage(), MemoryStorage(), MemoryStorage()
    full.save(HardState(1), [entry(1, 1), entry(2, 1)])
    short.save(HardState(1), [entry(1, 1)])
    checker.check_durable_majority({"n0": full, "n1": short, "n2": empty})
    assert not checker.ok and "entry 2 (term 1) is durable only on ['n0']" in checker.violations[0]
    checker = SafetyChecker()
    checker.on_apply("n0", entry(1, 1), ())
    compacted = MemoryStorage()
    compacted.save(HardState(1), [entry(1, 1)])
    compacted.create_snapshot(1, ConfState(("n0",)), b"")
    checker.check_durable_majority({"n0": compacted, "n1": short, "n2": empty})
    assert checker.ok



def test_checker_durable_on_enough_of_two_final_voters() -> None:
    """Shrunk to two voters with one behind: the entry on one of them meets every quorum of two
    (the other needs its vote to lead), which is what the members profile asks; on none it fails."""
    full, empty = MemoryStorage(), MemoryStorage()
    full.save(HardState(1), [entry(1, 1)])
    checker = SafetyChecker()
    checker.on_apply("n0", entry(1, 1), ())
    checker.check_durable_majority({"n1": full, "n4": empty}, needed=1)
    assert checker.ok
    checker.check_durable_majority({"n1": empty, "n4": empty}, needed=1)
    assert not checker.ok and "durable only on no node" in checker.violations[0]

class Watcher:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_save(self, storage: CrashableStorage, entries: list) -> None:
        self.seen.append(f"before {len(entries)}")

    def after_save(self, storage: CrashableStorage, entries: list, snapshot: object) -> None:
        self.seen.append(f"after {storage.last_index()}")

    def on_end_repair(self, storage: CrashableStorage) -> None:
        self.seen.append("repair ended")


def test_crashable_storage_is_watched_and_loses_power_inside_a_write() -> None:
    watcher = Watcher()
    storage = CrashableStorage(watcher)
    storage.save(HardState(1, "n0", 0), [entry(1, 1)], None)
    assert storage.last_index() == 1 and watcher.seen == ["before 1", "after 1"]
    storage.arm_crash = True
    storage.save(HardState(2, "n0", 1), [], None)  # no entries: not the write that loses power
    with pytest.raises(PowerCut):
        storage.save(HardState(2, "n1", 1), [entry(2, 2)], None)
    assert storage.last_index() == 1 and storage.initial_state()[0] == HardState(2, "n0", 1)
    assert not storage.arm_crash  # one crash per arming
    storage.save(None, [entry(2, 2)], None)
    assert storage.last_index() == 2


# -- storage faults (the corruption profile) ---------------------------------------------------


def written(watcher: Watcher, last: int, *, remember: bool = False) -> CrashableStorage:
    """Entries 1..last (term 1 up to 3, then term 2), one save each, committed up to last - 1."""
    storage = CrashableStorage(watcher)
    storage.remember_saves = remember
    storage.save_conf_state(ConfState(("n0", "n1", "n2")))
    for index in range(1, last + 1):
        term = 1 if index <= 3 else 2
        storage.save(HardState(term, "n1", index - 1), [entry(index, term)])
    return storage


@pytest.mark.parametrize("seed", range(40))
def test_detected_damage_keeps_a_prefix_or_nothing_and_begins_the_repair(seed: int) -> None:
    watcher = Watcher()
    storage = written(watcher, 6)
    if seed % 2:
        storage.create_snapshot(4, ConfState(("n0", "n1", "n2")), b"state at 4")
    damage = storage.damage(random.Random(seed))
    assert damage is not None and storage.repair_reason() == f"sim: {damage.reason}"
    hard_state, conf_state = storage.initial_state()
    if damage.emptied:
        assert storage.last_index() == 0 and storage.snapshot().is_empty
        assert hard_state == HardState() and conf_state == ConfState()
    else:
        # the entries before the damage (never less than the snapshot), their last term, no vote
        assert storage.last_index() == damage.kept_last and damage.kept_last >= (4 if seed % 2 else 0)
        assert hard_state == HardState(storage.term(damage.kept_last), None, min(5, damage.kept_last))
        assert conf_state.voters == ("n0", "n1", "n2")
    storage.end_repair()
    assert storage.repair_reason() is None and watcher.seen[-1] == "repair ended"


def test_detected_damage_needs_something_stored() -> None:
    assert written(Watcher(), 0).damage(random.Random(0)) is None


def test_a_lost_tail_vanishes_silently_keeping_term_and_vote() -> None:
    storage = written(Watcher(), 6, remember=True)
    assert storage.lose_tail(2) == 2
    assert storage.last_index() == 4 and storage.initial_state()[0] == HardState(2, "n1", 4)
    assert storage.repair_reason() is None
    assert storage.lose_tail(9) == 2  # only the saves still remembered (4 at most, 2 left)
    assert storage.last_index() == 2
    assert storage.lose_tail(1) == 0  # nothing more remembered to lose
    damaged = written(Watcher(), 6, remember=True)
    damaged.damage(random.Random(1))
    assert damaged.lose_tail(1) == 0  # what was remembered described the disk before the damage
    assert written(Watcher(), 6).lose_tail(1) == 0  # a run without lost tails remembers nothing


def test_a_lost_tail_leaves_a_prefix_of_the_log_never_shorter_than_the_snapshot() -> None:
    watcher = Watcher()
    storage = written(watcher, 4, remember=True)
    storage.save(HardState(3, "n2", 3), [entry(3, 3), entry(4, 3)])  # replaces 3 and 4 (term 2 -> 3)
    assert storage.lose_tail(1) == 1  # the replaced entries do not come back
    assert storage.last_index() == 2 and storage.initial_state()[0] == HardState(3, "n2", 2)
    storage = written(watcher, 6, remember=True)
    storage.create_snapshot(4, ConfState(("n0", "n1", "n2")), b"state at 4")  # not compacted
    assert storage.lose_tail(3) == 3 and storage.last_index() == 4
    storage = written(watcher, 6, remember=True)
    storage.create_snapshot(5, ConfState(("n0", "n1")), b"state at 5")
    storage.compact(5)
    storage.save_conf_state(ConfState(("n0", "n1")))
    assert storage.lose_tail(3) == 3
    assert storage.last_index() == 5 and storage.snapshot().meta.index == 5
    assert storage.initial_state()[1].voters == ("n0", "n1")


def holding(last: int, term_of: dict[int, int] | None = None) -> MemoryStorage:
    storage = MemoryStorage()
    storage.save(HardState(1), [entry(i, (term_of or {}).get(i, 1)) for i in range(1, last + 1)])
    return storage


def test_checker_forgives_only_the_loss_of_what_no_majority_holds_intact() -> None:
    checker = SafetyChecker()
    for index in (1, 2, 3):
        checker.on_apply("n0", entry(index, 1), ())
    # entries 1..3 were on n0 and n1, 1..2 also on n2; n1 lost everything after 1
    storages = {"n0": holding(3), "n1": holding(1), "n2": holding(2)}
    held_before = {1, 2, 3}
    assert checker.on_copies_lost("n1", held_before, storages, [(("n0", "n1", "n2"), 2)]) == [3]
    assert checker.forgiven == {3}
    # another entry at 3 is allowed (the history forks there), one at 2 is not
    checker.before_save("n2", holding(3), [entry(3, 2)])
    assert checker.ok and checker.forked_at == 3
    checker.on_apply("n2", entry(3, 2), ())
    assert checker.ok
    checker.before_save("n2", holding(3), [entry(2, 2)])
    assert not checker.ok and "overwrites committed entry 2" in checker.violations[0]


def test_checker_after_a_forgiven_loss_still_checks_leaders_before_the_fork() -> None:
    checker = SafetyChecker()
    for index in (1, 2, 3):
        checker.on_apply("n0", entry(index, 1), ())
    checker.forgiven.add(3)
    checker.observe_leader("n2", 2)
    checker.check_leader_log("n2", 2, holding(3, {3: 2}))  # lacks only the forgiven entry
    assert checker.ok and checker.forked_at == 3
    checker.check_durable_majority({"n0": holding(2), "n1": holding(2), "n2": holding(3, {3: 2})})
    assert checker.ok
    checker.observe_leader("n1", 3)
    checker.check_leader_log("n1", 3, holding(2, {2: 2}))
    assert not checker.ok and "leader completeness" in checker.violations[0]


def test_checker_counts_a_repairing_node_as_protecting_what_it_lost_until_its_repair_ends() -> None:
    checker = SafetyChecker()
    for index in (1, 2, 3):
        checker.on_apply("n0", entry(index, 1), ())
    quorums = [(("n0", "n1", "n2"), 2)]
    storages = {"n0": holding(3), "n1": holding(1), "n2": holding(2)}
    # n1 found damaged: it repairs and votes for nobody, so entry 3 (on n0 alone) is still safe
    assert checker.on_copies_lost("n1", {1, 2, 3}, storages, quorums, fenced={"n1"}) == []
    checker.check_durable_majority(storages, fenced={"n1"})
    assert checker.ok
    checker.before_save("n2", holding(3), [entry(3, 2)])
    assert not checker.ok and "overwrites committed entry 3" in checker.violations[0]
    # its repair must not end before it holds entry 3 again (a stale leader's commit index)
    checker = SafetyChecker()
    for index in (1, 2, 3):
        checker.on_apply("n0", entry(index, 1), ())
    checker.on_copies_lost("n1", {1, 2, 3}, storages, quorums, fenced={"n1"})
    assert checker.on_unfenced("n1", storages, quorums, fenced=set()) == []
    assert not checker.ok and "n1 ends its repair without committed entry 2" in checker.violations[0]
    checker = SafetyChecker()
    for index in (1, 2, 3):
        checker.on_apply("n0", entry(index, 1), ())
    checker.on_copies_lost("n1", {1, 2, 3}, storages, quorums, fenced={"n1"})
    storages["n1"] = holding(3)  # it ends holding it again
    assert checker.on_unfenced("n1", storages, quorums, fenced=set()) == [] and checker.ok
    # n2 then silently loses 3 while n0 is repairing (and protects it); once n0 ends its repair
    # without it (it never lost it: it did not hold it), only n1 holds it: its loss is allowed
    storages = {"n0": holding(2), "n1": holding(3), "n2": holding(2)}
    assert checker.on_copies_lost("n2", {1, 2, 3}, storages, quorums, fenced={"n0"}) == []
    assert checker.on_unfenced("n0", storages, quorums, fenced=set()) == [3] and checker.ok
