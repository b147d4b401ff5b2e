"""The scenarios in the order they run, and which ones each profile includes."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._scn_brokers import broker_failover, heartbeats
from ._scn_cluster import leader_kill, restart_history
from ._scn_java import java_broker_failover, java_heartbeats, java_leader_kill, java_writes
from ._scn_pauses import catch_up, learner_catch_up, pauses
from ._scn_reads import reads_etcd, reads_rmqc
from ._scn_scale import scale
from ._scn_security import security
from ._scn_writes import single_queue, writes_etcd, writes_pysyncobj, writes_rmqc
from ._suite import Scenario, Suite, say

REPO = Path(__file__).resolve().parent.parent
TEST_SUITE_TIMEOUT_S = 40 * 60


async def test_suite(suite: Suite) -> dict[str, Any]:
    """The CI target: the whole pytest suite (this package's own smoke test excluded), timed."""
    import trio

    started = time.perf_counter()
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--ignore=tests/bench"]
    completed = await trio.to_thread.run_sync(lambda: subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=TEST_SUITE_TIMEOUT_S))
    minutes = (time.perf_counter() - started) / 60
    summary = next((line for line in reversed(completed.stdout.splitlines())
                    if re.search(r"\d+ (passed|failed)", line)), "no pytest summary line")
    say(f"   pytest: {summary.strip('= ')} in {minutes:.1f} min")
    failed = [line for line in completed.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return {"conditions": suite.base_conditions(command=" ".join(argv[1:])), "minutes": round(minutes, 2),
            "summary": summary.strip("= "), "returncode": completed.returncode, "failed": failed[:50]}


SCENARIOS: list[tuple[str, str, Scenario]] = [
    ("writes_rmqc", "durable writes at 1..256 clients, rmqc", writes_rmqc),
    ("writes_etcd", "durable writes at 1..256 clients, etcd anchor", writes_etcd),
    ("writes_pysyncobj", "writes at 1..256 clients, PySyncObj anchor", writes_pysyncobj),
    ("single_queue", "rmqc in the single-queue shape (batch 1, pipeline 1)", single_queue),
    ("reads_rmqc", "reads per consistency level and node role, rmqc", reads_rmqc),
    ("reads_etcd", "reads (linearizable, serializable) per node role, etcd anchor", reads_etcd),
    ("heartbeats", "heartbeats ingested by a 3-node cluster", heartbeats),
    ("security", "TLS + ACL + peer secret on versus off: writes and heartbeats, same run", security),
    ("leader_kill", "controller leader SIGKILL -> first write accepted", leader_kill),
    ("pauses", "leader and follower SIGSTOP 3 s, SIGCONT, under broker registrations (1012 + 1013)", pauses),
    ("catch_up", "a follower restarted far behind: write latency while it catches up", catch_up),
    ("learner_catch_up", "an empty node joins as a learner: write latency while it catches up", learner_catch_up),
    ("broker_failover", "broker master lost (closed / hung) -> others notified", broker_failover),
    ("scale", "broker groups at scale, then masters lost at once", scale),
    ("restart", "restart on a long history -> serving again", restart_history),
    ("java_writes", "registration writes at 1..256 clients: rmqc, Java DLedger, Java JRaft, same run", java_writes),
    ("java_heartbeats", "heartbeats of 1,000 and 10,000 brokers: rmqc, Java DLedger, Java JRaft", java_heartbeats),
    ("java_leader_kill", "controller leader SIGKILL -> write accepted: rmqc, Java DLedger, Java JRaft",
     java_leader_kill),
    ("java_broker_failover", "broker master closed -> others notified (1008): rmqc, Java DLedger, Java JRaft",
     java_broker_failover),
    ("test_suite", "the CI test suite, timed", test_suite),
]
FULL_ONLY = {"test_suite"}


class UnknownScenario(ValueError):
    pass


def select(profile: str, only: str) -> list[tuple[str, str, Scenario]]:
    names = [name.strip() for name in only.split(",") if name.strip()]
    known = {name for name, _, _ in SCENARIOS}
    if unknown := sorted(set(names) - known):
        raise UnknownScenario(f"unknown scenario(s) {unknown}; known: {sorted(known)}")
    if names:
        return [s for s in SCENARIOS if s[0] in names]
    return [s for s in SCENARIOS if profile == "full" or s[0] not in FULL_ONLY]
