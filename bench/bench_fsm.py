"""In-process throughput of the controller state machine, processors and liveness table.

10,000 broker groups of 3 brokers: register (apply ids), elect, alter the SyncStateSet, snapshot
and restore; then heartbeats, through HeartbeatTable.update and through the 904 processor.
Prints the figures; asserts nothing about time.

    .venv/bin/python bench/bench_fsm.py [--groups 10000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rmqc.controller import ControllerConfig, ControllerProcessor, Propose, RequestContext
from rmqc.fsm import (
    AlterSyncStateSet,
    ApplyBrokerId,
    Command,
    ControllerState,
    ElectMaster,
    Trigger,
    decode_commands,
    encode_commands,
)
from rmqc.liveness import BrokerKey, Heartbeat, HeartbeatTable
from rmqc.remoting import make_request

CLUSTER = "bench"
BROKERS_PER_GROUP = 3


def timed(label: str, count: int, unit: str, work: Callable[[], object]) -> float:
    """Run `work`, print wall and CPU time and the rate per CPU second (the machine is shared,
    so CPU time is the steadier figure for single-threaded in-process work)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:<42} {count:>8,} {unit:<10} wall {wall * 1000:7.1f} ms  cpu {cpu * 1000:7.1f} ms"
          f"  {count / max(cpu, 1e-9):>10,.0f} {unit}/cpu-s")
    return cpu


def group_commands(groups: int) -> tuple[list[Command], list[Command], list[Command]]:
    register: list[Command] = []
    elect: list[Command] = []
    alter: list[Command] = []
    for n in range(groups):
        name = f"broker-{n}"
        for broker_id in range(1, BROKERS_PER_GROUP + 1):
            address = f"10.{n // 250 % 250}.{n % 250}.{broker_id}:30911"
            register.append(ApplyBrokerId(CLUSTER, name, broker_id, address, f"{address};1700000000000", 1))
        elect.append(ElectMaster(CLUSTER, name, Trigger.BROKER, 1, 0, 0, 2, requester_id=1))
        alter.append(AlterSyncStateSet(name, 1, 1, 1, tuple(range(1, BROKERS_PER_GROUP + 1)), 3))
    return register, elect, alter


def bench_state(groups: int) -> None:
    register, elect, alter = group_commands(groups)
    state = ControllerState()
    total = len(register) + len(elect) + len(alter)
    seconds = timed("apply: register (ApplyBrokerId)", len(register), "commands", lambda: state.apply_all(register))
    seconds += timed("apply: elect (ElectMaster)", len(elect), "commands", lambda: state.apply_all(elect))
    seconds += timed("apply: alter (AlterSyncStateSet)", len(alter), "commands", lambda: state.apply_all(alter))
    print(f"{'apply: all':<42} {total:>8,} {'commands':<10} cpu {seconds * 1000:7.1f} ms"
          f"  {total / seconds:>10,.0f} commands/cpu-s")
    assert all(g.sync_state_set_epoch == 2 for g in state.groups())

    batches = [register[i:i + 100] for i in range(0, len(register), 100)]
    payloads: list[bytes] = []
    timed("encode_commands (100 per entry)", len(register), "commands",
          lambda: payloads.extend(encode_commands(b) for b in batches))
    timed("decode_commands (100 per entry)", len(register), "commands",
          lambda: [decode_commands(p) for p in payloads])

    snapshot: list[bytes] = []
    timed(f"snapshot ({groups:,} groups)", groups, "groups", lambda: snapshot.append(state.snapshot()))
    restored = ControllerState()
    timed(f"restore ({len(snapshot[0]) / 1e6:.1f} MB)", groups, "groups", lambda: restored.restore(snapshot[0]))
    assert restored.snapshot() == snapshot[0]


def bench_processor(groups: int) -> None:
    state, liveness = ControllerState(), HeartbeatTable()
    processor = ControllerProcessor(ControllerConfig(), state, liveness)
    ctx = RequestContext(now_ms=1_700_000_000_000)
    requests = []
    for n in range(groups):
        for broker_id in range(1, BROKERS_PER_GROUP + 1):
            address = f"10.0.{n % 250}.{broker_id}:30911"
            requests.append(make_request(1013, n, {"clusterName": CLUSTER, "brokerName": f"broker-{n}",
                                                   "appliedBrokerId": broker_id,
                                                   "registerCheckCode": f"{address};1"}))

    def run() -> None:
        for request in requests:
            outcome = processor.handle(request, ctx)
            assert isinstance(outcome, Propose)
            outcome.finish(state.apply_all(list(outcome.commands)))

    timed("processor: 1013 decide + apply + answer", len(requests), "requests", run)


def bench_heartbeats(groups: int) -> None:
    brokers = [BrokerKey(CLUSTER, f"broker-{n}", i) for n in range(groups) for i in range(1, BROKERS_PER_GROUP + 1)]
    table = HeartbeatTable()
    beats = [Heartbeat(key, "10.0.0.1:30911", 10_000, 1, 1000, 1000) for key in brokers]
    rounds = 3

    def direct() -> None:
        for second in range(rounds):
            now = second * 1000
            for index, beat in enumerate(beats):
                table.update(beat, now, channel_id=index)

    timed("HeartbeatTable.update", len(beats) * rounds, "heartbeats", direct)
    timed("HeartbeatTable.expire (all, after 10 s)", len(beats), "brokers", lambda: table.expire(13_000))

    processor = ControllerProcessor(ControllerConfig(), ControllerState(), HeartbeatTable())
    requests = [make_request(904, 0, {"clusterName": CLUSTER, "brokerName": k.broker_name, "brokerAddr": "10.0.0.1:1",
                                      "brokerId": k.broker_id, "epoch": 1, "maxOffset": 1000,
                                      "heartbeatTimeoutMills": 10_000}, oneway=True) for k in brokers]

    def through_processor() -> None:
        for index, request in enumerate(requests):
            processor.handle(request, RequestContext(now_ms=1000, channel_id=index))

    timed("processor: 904 one-way heartbeats", len(requests), "heartbeats", through_processor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10_000)
    groups = parser.parse_args().groups
    print(f"{groups:,} groups x {BROKERS_PER_GROUP} brokers")
    bench_state(groups)
    bench_processor(groups)
    bench_heartbeats(groups)


if __name__ == "__main__":
    main()
