"""The simulator against one in-process controller over real TCP: registration with identity files,
SyncStateSet expand/shrink, failover after kill and hang, restart with the same id.

Bounds: CONVERGE_S is generous because the machine is shared; the fast timings (SimTiming.fast)
poll every 0.5 s, expire heartbeats after 3 s and shrink slaves after 2 s behind.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import trio
from sim_helpers import single_node

from rmqc.brokersim import FINAL_FILE, TEMP_FILE, BrokerFleet, Role, SimTiming

CONVERGE_S = 30.0
GROUPS = 4


async def test_brokers_register_elect_and_fill_their_sync_state_sets(tmp_path: Path) -> None:
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=GROUPS, replicas=3, state_dir=tmp_path / "sim",
                               timing=SimTiming.fast(), seed=7) as fleet:
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            for name in fleet.group_names:
                ids = {b.broker_id for b in fleet.group(name)}
                group = node.replica.state.group(name)
                # distinct ids, all registered; a 1013 that timed out may leave an orphan id (spec 7.2 c)
                assert len(ids) == 3 and ids <= set(group.replicas), f"seed {fleet.seed}: {name} ids {ids}"

                assert group is not None and group.master_id == fleet.master_of(name)
                assert group.sync_state_set == ids
            for broker in fleet.brokers():
                store = tmp_path / "sim" / f"{broker.broker_name}-{broker.slot}"
                assert (store / FINAL_FILE).read_text() == f"DefaultCluster#{broker.broker_name}#{broker.broker_id}\n"
                assert not (store / TEMP_FILE).exists()
            assert len(node.replica.liveness.table) == GROUPS * 3


async def test_killed_masters_fail_over_and_restarted_brokers_keep_their_ids(tmp_path: Path) -> None:
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=GROUPS, replicas=3, state_dir=tmp_path / "sim",
                               timing=SimTiming.fast(), seed=11) as fleet:
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            old = {name: (fleet.master_of(name), node.replica.state.group(name).master_epoch)
                   for name in fleet.group_names}
            for name, (master, _epoch) in old.items():
                fleet.kill(name, master)
            await fleet.wait_converged(CONVERGE_S)
            for name, (master, epoch) in old.items():
                new_master = fleet.master_of(name)
                assert new_master is not None and new_master != master, f"seed {fleet.seed}: {name}"
                assert node.replica.state.group(name).master_epoch > epoch
                assert node.replica.state.group(name).master_id == new_master
            name = fleet.group_names[0]
            killed_id = old[name][0]
            next_id = node.replica.state.group(name).next_broker_id
            await fleet.restart(name, killed_id)
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            restarted = fleet.broker(name, killed_id)
            assert restarted.role is Role.SLAVE and restarted.master_id == fleet.master_of(name)
            assert node.replica.state.group(name).next_broker_id == next_id  # it read its identity file: no new id


async def test_a_hung_master_is_replaced_after_its_heartbeat_timeout(tmp_path: Path) -> None:
    timing = SimTiming.fast()
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=1, replicas=3, state_dir=tmp_path / "sim",
                               timing=timing, seed=3) as fleet:
            name = fleet.group_names[0]
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            hung = fleet.master_of(name)
            fleet.hang(name, hung)
            with trio.fail_after(CONVERGE_S):
                while fleet.master_of(name) in (None, hung):
                    await trio.sleep(0.05)
            took_s = await fleet.wait_converged(CONVERGE_S)
            assert node.replica.state.group(name).master_id not in (None, hung)
            fleet.resume(name, hung)
            await fleet.wait_converged(CONVERGE_S)  # the old master learns the newer epoch and follows
            assert fleet.broker(name, hung).role is Role.SLAVE, f"seed {fleet.seed}, {took_s:.1f} s"


async def test_a_lagging_slave_leaves_the_sync_state_set_and_returns_when_caught_up(tmp_path: Path) -> None:
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=1, replicas=3, state_dir=tmp_path / "sim",
                               timing=SimTiming.fast(), seed=5) as fleet:
            name = fleet.group_names[0]
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            master = fleet.master_of(name)
            slave = next(b.broker_id for b in fleet.group(name) if b.broker_id != master)
            fleet.lag(name, slave)
            with trio.fail_after(CONVERGE_S):
                while slave in node.replica.state.group(name).sync_state_set:
                    await trio.sleep(0.05)
            assert slave not in fleet.broker(name, master).sync_state_set
            assert fleet.broker(name, slave).max_offset < fleet.broker(name, master).max_offset
            fleet.lag(name, slave, False)
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            assert slave in node.replica.state.group(name).sync_state_set


async def test_a_restarted_broker_learns_the_next_failover_from_1008(tmp_path: Path) -> None:
    """Kill the master, restart it on its port, kill the next master: the restarted broker must hear
    of the new master from the controller's 1008 (its 1004 poll is set beyond this test's bounds).
    The controller's connection cached from before the kill must not swallow that 1008."""
    timing = dataclasses.replace(SimTiming.fast(), poll_interval_ms=600_000)
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=1, replicas=3, state_dir=tmp_path / "sim",
                               timing=timing, seed=13) as fleet:
            name = fleet.group_names[0]
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            first = fleet.master_of(name)
            fleet.kill(name, first)
            await fleet.wait_converged(CONVERGE_S)
            await fleet.restart(name, first)
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            restarted = fleet.broker(name, first)
            heard, epoch = restarted.notifications, restarted.master_epoch
            fleet.kill(name, fleet.master_of(name))
            await fleet.wait_converged(CONVERGE_S)
            assert restarted.master_epoch > epoch, f"seed {fleet.seed}"
            assert restarted.notifications > heard, f"seed {fleet.seed}: no 1008 reached the restarted broker"


async def test_a_broker_restarted_at_once_after_a_kill_registers_again(tmp_path: Path) -> None:
    """The killed run may still be unwinding when the restarted one begins: it must not clear the
    new run's controller client (the restarted broker then stayed INITIAL, "is not running")."""
    async with single_node(tmp_path) as node:
        async with BrokerFleet([node.config.listen_address], groups=1, replicas=3, state_dir=tmp_path / "sim",
                               timing=SimTiming.fast(), seed=5) as fleet:
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            name = fleet.group_names[0]
            slave = next(b.broker_id for b in fleet.group(name) if b.broker_id != fleet.master_of(name))
            fleet.kill(name, slave)
            await fleet.restart(name, slave)  # no checkpoint between: the old run has not unwound yet
            await fleet.wait_converged(CONVERGE_S, full_sync_state_sets=True)
            assert all(b.serving for b in fleet.group(name)), f"seed {fleet.seed}: {fleet.problems()}"
