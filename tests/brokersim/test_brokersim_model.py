"""The simulator's pure parts: SyncStateSet decisions, the convergence check, identity files, control parsing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rmqc.brokersim import (
    FINAL_FILE,
    TEMP_FILE,
    BrokerBelief,
    BrokerFleet,
    FleetTooLarge,
    IdentityMismatch,
    IdentityStore,
    Phase,
    Role,
    Status,
    convergence_problems,
    expanded_set,
    group_name,
    run_control_line,
    shrunk_set,
)
from rmqc.cli.sim import split_groups


def test_shrink_keeps_the_master_and_slaves_caught_up_recently() -> None:
    members = frozenset({1, 2, 3, 4})
    caught_up = {2: 10_000, 3: 1_000}  # 4 never caught up
    assert shrunk_set(members, 1, caught_up, connected={2, 3, 4}, now_ms=12_000, max_not_catchup_ms=5_000) == {1, 2}
    # no HA connection: dropped even when it caught up a moment ago
    assert shrunk_set(members, 1, caught_up, connected={3}, now_ms=1_500, max_not_catchup_ms=5_000) == {1, 3}
    # the master is always kept, even if the set somehow lacked it
    assert shrunk_set(frozenset({2}), 1, {2: 0}, connected={2}, now_ms=0, max_not_catchup_ms=10) == {1, 2}


def test_expand_adds_caught_up_slaves() -> None:
    assert expanded_set(frozenset({1}), {2, 3}) == {1, 2, 3}
    assert expanded_set(frozenset({1, 2}), set()) == {1, 2}


def belief(name: str, broker_id: int, role: Role, master: int | None, epoch: int = 1,
           status: Status = Status.RUNNING, members: tuple[int, ...] = ()) -> BrokerBelief:
    return BrokerBelief(broker_name=name, slot=broker_id - 1, broker_id=broker_id, address=f"127.0.0.1:{broker_id}",
                        status=status, phase=Phase.RUNNING, role=role, master_id=master, master_address=None,
                        master_epoch=epoch, sync_state_set=members, sync_state_set_epoch=1, epoch=epoch,
                        max_offset=0, lagging=False, notifications=0)


def test_convergence_needs_one_master_every_live_broker_agrees_on() -> None:
    good = [belief("a", 1, Role.MASTER, 1, members=(1, 2)), belief("a", 2, Role.SLAVE, 1),
            belief("a", 3, Role.MASTER, 3, status=Status.KILLED)]
    assert convergence_problems(good) == []
    assert convergence_problems(good, full_sync_state_sets=True) == []
    split = [belief("a", 1, Role.MASTER, 1), belief("a", 2, Role.MASTER, 2, epoch=2)]
    assert "disagree" in convergence_problems(split)[0]
    stale = [belief("a", 1, Role.MASTER, 2, epoch=2), belief("a", 2, Role.SLAVE, 2, epoch=2)]
    assert "brokers in role MASTER" in convergence_problems(stale)[0]  # master 2 is not the one in MASTER role
    no_master = [belief("a", 1, Role.SLAVE, None, epoch=0)]
    assert convergence_problems(no_master) == ["a: master None but brokers in role MASTER are []"]
    starting = [*good, belief("a", 4, Role.NONE, None, epoch=0, status=Status.STARTING)]
    assert convergence_problems(starting) == ["a: 1 live broker(s) not RUNNING (starting in RUNNING)"]
    # why it waits is said: e.g. only dead ids in the SyncStateSet, unclean elections off
    refused = dataclasses.replace(starting[-1], phase=Phase.REGISTER_TO_CONTROLLER_DONE,
                                  last_error="1002 answered 2010: no master elected: unclean election is disabled")
    assert convergence_problems([*good, refused]) == [
        "a: 1 live broker(s) not RUNNING (starting in REGISTER_TO_CONTROLLER_DONE: 1002 answered 2010: "
        "no master elected: unclean election is disabled)"]
    hung = [*good, belief("a", 4, Role.MASTER, 4, epoch=0, status=Status.HUNG)]
    assert convergence_problems(hung) == []
    partial = [belief("a", 1, Role.MASTER, 1, members=(1,)), belief("a", 2, Role.SLAVE, 1)]
    assert convergence_problems(partial) == []
    assert "not every live broker" in convergence_problems(partial, full_sync_state_sets=True)[0]


def test_belief_json_uses_rocketmq_names() -> None:
    document = belief("broker-0001", 2, Role.SLAVE, 1, members=(1, 2)).to_json()
    assert document["brokerName"] == "broker-0001" and document["brokerId"] == 2
    assert (document["role"], document["status"], document["masterBrokerId"]) == ("SLAVE", "running", 1)
    assert document["syncStateSet"] == [1, 2]


def test_identity_files_follow_the_broker_protocol(tmp_path: Path) -> None:
    store = IdentityStore(tmp_path / "b", "C", "broker-a")
    assert store.read_final() is None and store.read_temp() is None
    store.write_temp(3, "127.0.0.1:1;1700000000000")
    assert (tmp_path / "b" / TEMP_FILE).read_text() == "C#broker-a#3#127.0.0.1:1;1700000000000\n"
    assert store.read_temp() == (3, "127.0.0.1:1;1700000000000")
    store.write_final(3)
    store.delete_temp()
    assert (tmp_path / "b" / FINAL_FILE).read_text() == "C#broker-a#3\n"
    assert store.read_final() == 3 and store.read_temp() is None
    with pytest.raises(IdentityMismatch, match="is for C/broker-a"):
        IdentityStore(tmp_path / "b", "C", "broker-b").read_final()
    (tmp_path / "b" / FINAL_FILE).write_text("garbage")
    with pytest.raises(IdentityMismatch, match="is not"):
        store.read_final()


def test_group_names_and_process_split() -> None:
    assert group_name(7) == "broker-0007"
    assert split_groups(10, 3) == [(0, 4), (4, 3), (7, 3)]
    assert split_groups(2, 5) == [(0, 1), (1, 1)]
    assert split_groups(4, 2, first_group=10) == [(10, 2), (12, 2)]


def test_fleet_refuses_more_brokers_than_a_process_holds(tmp_path: Path) -> None:
    with pytest.raises(FleetTooLarge, match="at most"):
        BrokerFleet(["127.0.0.1:1"], groups=10_000, replicas=3, state_dir=tmp_path)


async def test_control_lines_report_bad_input_as_json(tmp_path: Path) -> None:
    fleet = BrokerFleet(["127.0.0.1:1"], groups=1, replicas=1, state_dir=tmp_path)
    assert (await run_control_line(fleet, "explode"))["ok"] is False
    wrong = await run_control_line(fleet, "kill broker-0000 x")
    assert wrong["ok"] is False and "NAME ID" in wrong["error"]
    unknown = await run_control_line(fleet, "kill broker-0099 1")
    assert unknown["ok"] is False and "broker-0099" in unknown["error"]
    nobody = await run_control_line(fleet, "kill-master broker-0000")
    assert nobody["ok"] is False and "no serving master" in nobody["error"]
    listing = await run_control_line(fleet, "beliefs broker-0000")
    assert listing["ok"] and listing["beliefs"][0]["status"] == "starting"
    assert "kill-master" in (await run_control_line(fleet, "help"))["help"]
