"""Broker-facing scenarios: heartbeat ingestion, master failover seen by simulated brokers (closed
connections, and a hung master measured from its heartbeat deadline), and the fleet at scale."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio

from rmqc.brokersim import BrokerFleet, NotConverged, SimTiming

from ._heartbeats import Broker, drain_marker, heartbeat_chunks
from ._load import RemotingConn
from ._rmqc import CLUSTER, RmqcCluster
from ._stats import fmt, summarise_ms
from ._suite import Suite, say

CONNECTIONS_PER_NODE = 2
FAILOVER_BOUND_S = 30.0
# between rounds the fleet must converge again (full sync state sets); beyond this the rounds stop
CONVERGE_BOUND_S = 60.0
POLL_S = 0.001


async def heartbeats(suite: Suite) -> dict[str, Any]:
    cluster = RmqcCluster(suite.work_dir("heartbeats"), 3)
    await cluster.start()
    brokers = [Broker(CLUSTER, f"hb-{i // 3:05d}", i % 3 + 1, f"10.1.{i // 250 % 250}.{i % 250}:10911")
               for i in range(suite.profile.heartbeat_brokers)]
    conns = [await RemotingConn.open(cluster.address(node))
             for node in cluster.ids for _ in range(CONNECTIONS_PER_NODE)]
    sent, elapsed = await blast_heartbeats(conns, brokers, suite.profile.heartbeat_s)
    cpu = cluster.cpu_s()
    for conn in conns:
        await conn.aclose()
    cluster.stop()
    rate = sent / elapsed
    say(f"   heartbeats ingested: {fmt(rate, 0)}/s over {elapsed:.1f} s ({len(brokers):,} brokers, "
        f"{len(conns)} connections spread over 3 nodes)")
    return {"conditions": suite.base_conditions(system="rmqc", nodes=3, brokers=len(brokers), connections=len(conns),
                                                request="904 one-way, pre-encoded, sent as fast as TCP accepts; "
                                                        "a two-way 904 at the end on each connection marks the drain"),
            "heartbeats_per_s": round(rate, 1), "sent": sent, "elapsed_s": round(elapsed, 2),
            "cpu_s_per_node": cpu}


async def blast_heartbeats(conns: list[RemotingConn], brokers: list[Broker], seconds: float) -> tuple[int, float]:
    """Each connection sends its share of the brokers' pre-encoded one-way 904s (signed with the
    connection's credentials, if any) as fast as TCP takes them for `seconds`, then a two-way 904
    whose answer means the node read everything before it: (heartbeats sent, seconds until the
    last answer)."""
    share = [brokers[i::len(conns)] for i in range(len(conns))]
    chunks = [heartbeat_chunks(part, conn.credentials) for part, conn in zip(share, conns, strict=True)]
    sent = [0] * len(conns)
    start = time.perf_counter()
    stop_at = start + seconds

    async def blast(index: int) -> None:
        frames_per_chunk = [frames_in(chunk) for chunk in chunks[index]]
        while time.perf_counter() < stop_at:
            for chunk, frames in zip(chunks[index], frames_per_chunk, strict=True):
                await conns[index].stream.send_all(chunk)
                sent[index] += frames
        await drain_marker(conns[index], share[index][0])

    async with trio.open_nursery() as nursery:
        for index in range(len(conns)):
            nursery.start_soon(blast, index)
    return sum(sent), time.perf_counter() - start


def frames_in(chunk: bytes) -> int:
    count, position = 0, 0
    while position < len(chunk):
        position += 4 + int.from_bytes(chunk[position:position + 4], "big")
        count += 1
    return count


def sim_timing() -> SimTiming:
    """Java broker timings except a 1 s heartbeat timeout (the hung case measures from it anyway) and a
    quick start; polling 1004 stays at 5 s, so sub-second convergence can only come from 1008."""
    return SimTiming(heartbeat_interval_ms=200, heartbeat_timeout_ms=1000, poll_interval_ms=5000,
                     check_sync_state_set_ms=1000, register_round_interval_ms=500, register_retry_max_ms=200,
                     replication_interval_ms=100, start_spread_ms=500)


async def others_notified(fleet: BrokerFleet, name: str, master: int, old_epoch: int) -> float:
    """perf_counter time at which every other replica of `name` holds a master epoch above `old_epoch`."""
    others = [b for b in fleet.group(name) if b.broker_id != master]
    with trio.fail_after(FAILOVER_BOUND_S):
        while not all(b.master_epoch > old_epoch for b in others):
            await trio.sleep(POLL_S)
    return time.perf_counter()


def stuck_brokers(fleet: BrokerFleet) -> str:
    """What the brokers of the first group that did not converge believe, and their last errors."""
    problems = fleet.problems(full_sync_state_sets=True)
    if not problems:
        return "converged since"
    name = problems[0].split(":", 1)[0]
    return "; ".join(f"{b.broker_id} {b.status}/{b.phase}/{b.role} master {b.master_id}@{b.master_epoch} "
                     f"errors {list(b.errors)[-3:]}" for b in fleet.group(name))


async def broker_failover(suite: Suite) -> dict[str, Any]:
    cluster = RmqcCluster(suite.work_dir("broker_failover"), 3)
    await cluster.start()
    try:
        figures = await failover_rounds(suite, cluster.addresses, suite.work_dir("broker_failover") / "brokers",
                                        suite.profile.broker_kills, suite.profile.broker_hangs)
    finally:
        cluster.stop()
    timing = sim_timing()
    return {"conditions": suite.base_conditions(
                system="rmqc", nodes=3, groups=suite.profile.fleet_groups, replicas=3,
                broker_timing=f"heartbeat every {timing.heartbeat_interval_ms} ms, timeout "
                              f"{timing.heartbeat_timeout_ms} ms, 1004 poll {timing.poll_interval_ms} ms",
                hang="in-process hang of rmqc.brokersim (heartbeats and reads stop, connections stay open): "
                     "the fleet simulates a group's replicas in one process, so SIGSTOP would freeze the "
                     "replicas that must receive 1008 too"),
            **figures}


async def failover_rounds(suite: Suite, controllers: list[str], state_dir: Path, kills: int,
                          hangs: int) -> dict[str, Any]:
    """A simulated fleet of the profile's groups against `controllers`: `kills` masters closed, then
    `hangs` masters hung, each followed by a restart (resume) and the fleet converging again;
    milliseconds until every other replica of the group holds the new master epoch (1008 or 1004)."""
    timing = sim_timing()
    killed_ms: list[float] = []
    hung_ms: list[float] = []
    stopped = ""
    async with BrokerFleet(controllers, groups=suite.profile.fleet_groups, replicas=3,
                           state_dir=state_dir, timing=timing, seed=1) as fleet:
        await fleet.wait_converged(120, full_sync_state_sets=True)
        for round_ in range(kills + hangs):
            hang = round_ >= kills
            name = fleet.group_names[round_ % len(fleet.group_names)]
            master = fleet.master_of(name)
            assert master is not None
            broker = fleet.broker(name, master)
            old_epoch = broker.master_epoch
            if hang:
                broker.heartbeat_stamps.clear()  # the next round's stamp is the last before the hang
                with trio.fail_after(5):
                    while not broker.heartbeat_stamps:
                        await trio.sleep(POLL_S)
                fleet.hang(name, master)
                t0 = broker.heartbeat_stamps[-1] + timing.heartbeat_timeout_ms / 1000  # the controllers' deadline
            else:
                t0 = time.perf_counter()
                fleet.kill(name, master)
            done = await others_notified(fleet, name, master, old_epoch)
            (hung_ms if hang else killed_ms).append((done - t0) * 1000)
            say(f"   {'hang' if hang else 'kill'} master of {name}: others notified after "
                f"{(done - t0) * 1000:.1f} ms {'past the heartbeat deadline' if hang else 'after the close'}")
            if hang:
                fleet.resume(name, master)
            else:
                await fleet.restart(name, master)
            try:
                await fleet.wait_converged(CONVERGE_BOUND_S, full_sync_state_sets=True)
            except NotConverged as error:
                stopped = (f"stopped after round {round_ + 1}: the fleet did not converge again ({str(error)[:300]}); "
                           f"{stuck_brokers(fleet)}")
                say(f"   {stopped}")
                break
    closed, hung = summarise_ms(killed_ms), summarise_ms(hung_ms)
    say(f"   connections closed -> others notified: p50 {fmt(closed['p50_ms'])} ms  p99 {fmt(closed['p99_ms'])} ms")
    if hangs:
        say(f"   hung master, from deadline -> others notified: p50 {fmt(hung['p50_ms'])} ms  "
            f"p99 {fmt(hung['p99_ms'])} ms")
    return {"closed": closed, "hung_from_deadline": hung, "stopped_early": stopped,
            "closed_samples_ms": [round(s, 2) for s in killed_ms], "hung_samples_ms": [round(s, 2) for s in hung_ms]}
