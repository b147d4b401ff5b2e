"""The faults of a chaos window, named as OpenChaos names them where it has them. Each fault is an
async function of the run's world and its seeded random source that does the harm and returns
(what it did, how to heal it). Controller faults act on real `rmqc serve` processes (signals by
PID) or on the proxies in front of their peer links; broker faults act on the simulated fleet, or
on the real Java brokers (signals by PID, the proxies between each broker and the controllers)."""

from __future__ import annotations

import glob
import os
import random
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rmqc.storage import FAULT_STALL_WORD

if TYPE_CHECKING:
    from ._run import World

Heal = Callable[[], Awaitable[None]]
Fault = Callable[["World", random.Random], Awaitable[tuple[str, Heal]]]

DELAY_MS = (50, 250)  # a slow link, not a dead one: well under the election timeout
# Chunks lost on every peer link: from noticeable to a link that loses a leader's heartbeats for
# longer than the election timeout now and then (3 losses in a row hold a chunk 1.4 s).
LOSS_PERCENT = (5, 30)
CLOCK_STEP_S = (30, 600)  # a wall clock stepped by NTP or a bad RTC


def libfaketime() -> str | None:
    """Debian's multi-threaded libfaketime (package `faketime`), None if it is not installed."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")
                   + glob.glob("/usr/lib/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


def set_clock_offset(path: Path, offset_s: float) -> None:
    """The node's wall clock reads real time + `offset_s` from its next reading (libfaketime reads
    the file at every call; the replace makes the change atomic)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{offset_s:+.3f}\n")
    os.replace(tmp, path)


# ----- processes -----

async def _kill(world: World, victims: Sequence[str]) -> tuple[str, Heal]:
    for node_id in victims:
        world.node(node_id).kill(signal.SIGKILL)
    for node_id in victims:
        await world.node(node_id).wait_exit()

    async def heal() -> None:
        await world.restart(victims)

    return f"SIGKILL {','.join(victims)}", heal


async def leader_kill(world: World, rng: random.Random) -> tuple[str, Heal]:
    return await _kill(world, [await world.leader_or_random(rng)])


async def kill(world: World, rng: random.Random) -> tuple[str, Heal]:
    return await _kill(world, [rng.choice(world.node_ids)])


async def minor_kill(world: World, rng: random.Random) -> tuple[str, Heal]:
    return await _kill(world, rng.sample(world.node_ids, (len(world.node_ids) - 1) // 2))


async def major_kill(world: World, rng: random.Random) -> tuple[str, Heal]:
    return await _kill(world, rng.sample(world.node_ids, len(world.node_ids) // 2 + 1))


async def suspend(world: World, rng: random.Random) -> tuple[str, Heal]:
    victim = await world.leader_or_random(rng) if rng.random() < 0.5 else rng.choice(world.node_ids)
    process = world.node(victim).process
    assert process is not None
    process.pause()

    async def heal() -> None:
        process.resume()

    return f"SIGSTOP {victim}", heal


# ----- links (the proxies in front of every peer link) -----

def _cut(world: World, pairs: Sequence[tuple[str, str]], reject: bool, *, backward: bool = True) -> Heal:
    for pair in pairs:
        proxy = world.mesh.proxies[pair]
        if reject:
            proxy.reject()
        else:
            proxy.cut(forward=True, backward=backward)

    async def heal() -> None:
        world.mesh.heal_all()

    return heal


def _between(side: Sequence[str], others: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for a in side for b in others] + [(b, a) for a in side for b in others]


def _style(reject: bool) -> str:
    return "rejecting" if reject else "silent"


def partition(reject: bool) -> Fault:
    async def fault(world: World, rng: random.Random) -> tuple[str, Heal]:
        ids = list(world.node_ids)
        rng.shuffle(ids)
        cut_at = rng.randint(1, len(ids) // 2)
        minority, majority = ids[:cut_at], ids[cut_at:]
        return f"{_style(reject)} {minority}|{majority}", _cut(world, _between(minority, majority), reject)

    return fault


def partition_leader(reject: bool) -> Fault:
    async def fault(world: World, rng: random.Random) -> tuple[str, Heal]:
        leader = await world.leader_or_random(rng)
        others = [i for i in world.node_ids if i != leader]
        return f"{_style(reject)} isolate {leader}", _cut(world, _between([leader], others), reject)

    return fault


async def asymmetric(world: World, rng: random.Random) -> tuple[str, Heal]:
    """One node's outgoing peer traffic is lost, what others send it still arrives (a one-way cut:
    its own connections carry nothing forward, and nothing back on the connections others opened)."""
    victim = await world.leader_or_random(rng) if rng.random() < 0.5 else rng.choice(world.node_ids)
    others = [i for i in world.node_ids if i != victim]
    for other in others:
        world.mesh.proxies[(victim, other)].cut(forward=True, backward=False)
        world.mesh.proxies[(other, victim)].cut(forward=False, backward=True)

    async def heal() -> None:
        world.mesh.heal_all()

    return f"one-way: {victim} -> {others} lost", heal


async def bridge(world: World, rng: random.Random) -> tuple[str, Heal]:
    """Two halves that only one node (the bridge) sees both of (5 nodes)."""
    ids = list(world.node_ids)
    rng.shuffle(ids)
    middle = len(ids) // 2
    left, hub, right = ids[:middle], ids[middle], ids[middle + 1:]
    return f"bridge {left}<{hub}>{right}", _cut(world, _between(left, right), False)


async def ring(world: World, rng: random.Random) -> tuple[str, Heal]:
    """Each node sees only its two neighbours on a ring (5 nodes): every majority overlaps."""
    ids = list(world.node_ids)
    rng.shuffle(ids)
    count = len(ids)
    neighbours = {ids[i]: {ids[(i - 1) % count], ids[(i + 1) % count]} for i in range(count)}
    pairs = [(a, b) for a in ids for b in ids if a != b and b not in neighbours[a]]
    return f"ring {'-'.join(ids)}", _cut(world, pairs, False)


async def delay(world: World, rng: random.Random) -> tuple[str, Heal]:
    delay_ms = rng.randint(*DELAY_MS)
    for proxy in world.mesh.proxies.values():
        proxy.delay(delay_ms)

    async def heal() -> None:
        world.mesh.heal_all()

    return f"every peer link +{delay_ms} ms", heal


async def loss(world: World, rng: random.Random) -> tuple[str, Heal]:
    """Every peer link loses a share of its chunks, each proxy drawing from its own seeded source;
    TCP turns each loss into a retransmission wait, and repeated ones into a reset (TcpProxy.lose)."""
    percent = rng.randint(*LOSS_PERCENT)
    for proxy in world.mesh.proxies.values():
        proxy.lose(percent / 100, random.Random(rng.getrandbits(64)))

    async def heal() -> None:
        world.mesh.heal_all()

    return f"every peer link loses {percent}% of chunks", heal


async def clock(world: World, rng: random.Random) -> tuple[str, Heal]:
    """A node's wall clock steps far ahead or behind (its monotonic clock runs on: libfaketime with
    FAKETIME_DONT_FAKE_MONOTONIC), as after an NTP step."""
    victim = rng.choice(world.node_ids)
    step_s = rng.randint(*CLOCK_STEP_S) * rng.choice((-1, 1))
    path = world.clock_file(victim)
    set_clock_offset(path, step_s)

    async def heal() -> None:
        set_clock_offset(path, 0)

    return f"{victim} wall clock {step_s:+d} s", heal


# ----- disks -----

def set_disk_stall(path: Path, stalled: bool) -> None:
    """Hold (or release) every commit of the node whose test-only storage fault hook reads `path`
    (rmqc.storage._faults): its fsyncs hang as on a stalled disk."""
    path.write_text(FAULT_STALL_WORD if stalled else "")


async def disk_stall(world: World, rng: random.Random) -> tuple[str, Heal]:
    """The leader's or a random node's (even odds) fsyncs held for the fault's duration."""
    victim = await world.leader_or_random(rng) if rng.random() < 0.5 else rng.choice(world.node_ids)
    path = world.disk_file(victim)
    set_disk_stall(path, True)

    async def heal() -> None:
        set_disk_stall(path, False)

    return f"disk-stall {victim}", heal


# ----- brokers (the simulated fleet, or the Java broker group of rmqc.chaos._java) -----

async def broker_kill(world: World, rng: random.Random) -> tuple[str, Heal]:
    if world.java is not None:
        return await _java_master_kill(world)
    name, broker_id = world.random_master(rng)
    world.fleet.kill(name, broker_id)

    async def heal() -> None:
        await world.fleet.restart(name, broker_id)

    return f"kill broker {name}/{broker_id} (master)", heal


async def _java_master_kill(world: World) -> tuple[str, Heal]:
    """SIGKILL the JVM of the master the controller named; the heal starts it again on its store."""
    assert world.java is not None
    _, broker = world.java.master()
    broker.kill(signal.SIGKILL)
    await broker.wait_exit()

    async def heal() -> None:
        await broker.start()

    return f"SIGKILL broker {broker.name} (master {broker.broker_id()})", heal


async def broker_hang(world: World, rng: random.Random) -> tuple[str, Heal]:
    if world.java is not None:
        return _java_master_stop(world)
    name, broker_id = world.random_master(rng)
    world.fleet.hang(name, broker_id)

    async def heal() -> None:
        world.fleet.resume(name, broker_id)

    return f"hang broker {name}/{broker_id} (master)", heal


def _java_master_stop(world: World) -> tuple[str, Heal]:
    assert world.java is not None
    _, broker = world.java.master()
    process = broker.process
    assert process is not None
    process.pause()

    async def heal() -> None:
        process.resume()

    return f"SIGSTOP broker {broker.name} (master {broker.broker_id()})", heal


async def broker_partition(world: World, rng: random.Random) -> tuple[str, Heal]:
    """The master broker (or a random one, even odds) cut off from every controller: its proxies
    to them swallow both directions (Java brokers only; see rmqc.chaos._java for what it covers)."""
    java = world.java
    assert java is not None, "broker-partition needs the Java brokers"
    index, broker = java.master() if rng.random() < 0.5 else rng.choice(list(enumerate(java.brokers)))
    cut = [proxy for (of, _), proxy in java.proxies.items() if of == index]
    for proxy in cut:
        proxy.cut()

    async def heal() -> None:
        for proxy in cut:
            proxy.heal()

    return f"broker {broker.name} (id {broker.broker_id()}) cut off from the controllers", heal


FAULTS: dict[str, Fault] = {
    "leader-kill": leader_kill,
    "kill": kill,
    "minor-kill": minor_kill,
    "major-kill": major_kill,
    "suspend": suspend,
    "partition": partition(reject=False),
    "partition-reject": partition(reject=True),
    "partition-leader": partition_leader(reject=False),
    "partition-leader-reject": partition_leader(reject=True),
    "asymmetric": asymmetric,
    "bridge": bridge,
    "ring": ring,
    "delay": delay,
    "loss": loss,
    "clock": clock,
    "disk-stall": disk_stall,
    "broker-kill": broker_kill,
    "broker-hang": broker_hang,
    "broker-partition": broker_partition,
}
FIVE_NODES_ONLY = frozenset({"bridge", "ring"})
