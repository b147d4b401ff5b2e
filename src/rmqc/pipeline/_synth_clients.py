"""Seeded client histories of key-value registers: linearizable by construction, plus planted
stale reads that no linearization can explain.

Each process runs one op at a time; every op that takes effect gets a linearization point inside
its [invoke, complete] interval and the register is applied in that order, so reads return exactly
what a linearizable store would. Some writes time out (outcome unknown, but they did take effect at
their point) and some fail outright (no effect).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from rmqc.linearizability import READ, WRITE, Op

from ._errors import SynthBoundExceeded

MEAN_OP_NS = 2_000_000  # 2 ms per op: a local controller's linearizable read or write
MEAN_THINK_NS = 1_000_000
UNKNOWN_OUTCOME_PROBABILITY = 0.03
FAILED_PROBABILITY = 0.03


@dataclass(frozen=True)
class PlantedStaleRead:
    key: str
    process: str
    invoke_ns: int


@dataclass
class _Timed:
    op: Op
    point_ns: int


def _process_ops(rng: random.Random, key: str, process: str, count: int, values: list[int]) -> list[_Timed]:
    now, out = rng.randrange(MEAN_OP_NS), []
    for _ in range(count):
        start = now + 1 + int(rng.expovariate(1.0 / MEAN_THINK_NS))
        end = start + 1 + int(rng.expovariate(1.0 / MEAN_OP_NS))
        point = rng.randint(start, end)
        if rng.random() < 0.5:
            values[0] += 1
            roll = rng.random()
            unknown, failed = roll < UNKNOWN_OUTCOME_PROBABILITY, roll > 1 - FAILED_PROBABILITY
            op = Op(process, key, WRITE, values[0], start, None if unknown else end, not failed)
        else:
            op = Op(process, key, READ, None, start, end, True)
        out.append(_Timed(op, point))
        now = end
    return out


def _linearize(timed: list[_Timed]) -> list[Op]:
    """Apply ops at their points; reads get the register's value then."""
    value, ops = None, []
    for item in sorted(timed, key=lambda t: (t.point_ns, t.op.process)):
        op = item.op
        if op.kind == WRITE and op.ok:
            value = op.value
        elif op.kind == READ:
            op = replace(op, value=value)
        ops.append(op)
    return sorted(ops, key=lambda o: (o.invoke_ns, o.process))


def _plant_stale_read(ops: list[Op]) -> tuple[list[Op], PlantedStaleRead]:
    """Make a read return the value of a write that a later completed write overwrote before the
    read began: w1 completes, then w2 runs, then r starts and reads w1's (unique) value."""
    writes = [(o.complete_ns, o) for o in ops if o.kind == WRITE and o.ok and o.complete_ns is not None]
    for position, read in enumerate(ops):
        if read.kind != READ or read.complete_ns is None:
            continue
        before = [(done, w) for done, w in writes if done < read.invoke_ns]
        for _, w2 in before:
            stale = [w1 for done, w1 in before if done < w2.invoke_ns and w1.value != read.value]
            if stale:
                planted = replace(read, value=stale[-1].value)
                changed = [*ops[:position], planted, *ops[position + 1:]]
                return changed, PlantedStaleRead(read.key, read.process, read.invoke_ns)
    raise SynthBoundExceeded(f"no read of key {ops[0].key!r} can be made stale: history too short")


def generate_client_history(
    *, keys: int = 8, ops_per_key: int = 60, processes: int = 4, seed: int = 0, stale_reads: int = 0
) -> tuple[list[Op], list[PlantedStaleRead]]:
    """Ops of every key (one stale read planted in each of the first `stale_reads` keys)."""
    if stale_reads > keys:
        raise SynthBoundExceeded(f"{stale_reads} stale reads need as many keys, got {keys}")
    rng = random.Random(seed)
    history: list[Op] = []
    planted: list[PlantedStaleRead] = []
    for k in range(keys):
        key = f"key-{k:04d}"
        values = [k * 1_000_000]  # unique across keys too
        timed = []
        for p in range(processes):
            timed += _process_ops(rng, key, f"c{p}", ops_per_key // processes, values)
        ops = _linearize(timed)
        if k < stale_reads:
            ops, plant = _plant_stale_read(ops)
            planted.append(plant)
        history += ops
    return history, planted
