"""The suite's frame: load profiles (tiny for the smoke test, quick, full), the run context every
scenario receives, and the runner that calls each scenario, prints its figures and keeps going
when one fails (the report then says which and why)."""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from rmqc.launcher import stop_all

from ._conditions import filesystem_of, machine


@dataclass(frozen=True)
class Profile:
    name: str
    seconds: float  # measured window of each load point
    warmup_s: float
    write_clients: tuple[int, ...]
    many_read_clients: int
    # processes the many-clients read points run their clients in (so one Python process's core is
    # not the limit); the 1-client latency points stay in the harness's one process
    read_generators: int
    leader_kills: int
    broker_kills: int
    broker_hangs: int
    fleet_groups: int
    scale_groups: int
    scale_kills: int
    scale_steady_s: float
    restart_entries: int
    heartbeat_s: float
    heartbeat_brokers: int
    pauses: int  # SIGSTOP of the leader, then a follower, alternating (issue 13)
    catchup_entries: int  # a follower restarted this far behind


PROFILES = {
    "tiny": Profile("tiny", seconds=0.5, warmup_s=0.2, write_clients=(1, 4), many_read_clients=4, read_generators=2,
                    leader_kills=1, broker_kills=1, broker_hangs=1, fleet_groups=2, scale_groups=20, scale_kills=5,
                    scale_steady_s=1.0, restart_entries=2_000, heartbeat_s=0.5, heartbeat_brokers=300,
                    pauses=2, catchup_entries=2_000),
    "quick": Profile("quick", seconds=3.0, warmup_s=0.5, write_clients=(1, 16, 64, 256), many_read_clients=64,
                     read_generators=2, leader_kills=8, broker_kills=8, broker_hangs=3, fleet_groups=10,
                     scale_groups=1_000, scale_kills=100, scale_steady_s=5.0, restart_entries=200_000,
                     heartbeat_s=3.0, heartbeat_brokers=30_000, pauses=6, catchup_entries=20_000),
    "full": Profile("full", seconds=10.0, warmup_s=1.0, write_clients=(1, 16, 64, 256), many_read_clients=128,
                    read_generators=2, leader_kills=30, broker_kills=30, broker_hangs=10, fleet_groups=30,
                    scale_groups=10_000, scale_kills=1_000, scale_steady_s=30.0, restart_entries=1_000_000,
                    heartbeat_s=10.0, heartbeat_brokers=30_000, pauses=20, catchup_entries=100_000),
}


@dataclass
class Suite:
    profile: Profile
    out: Path
    skip_anchors: bool = False
    machine: dict[str, Any] = field(default_factory=machine)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_s: float = field(default_factory=time.time)

    @classmethod
    def for_run(cls, profile: Profile, out: Path, skip_anchors: bool) -> Suite:
        """A suite that runs into `out`. An earlier run into the same folder left its data
        directories there, and a node started on one finds a saved membership that names the old
        run's ports and never elects, so they go first (results.json and the report are replaced)."""
        shutil.rmtree(out / "work", ignore_errors=True)
        return cls(profile, out, skip_anchors=skip_anchors)

    def work_dir(self, scenario: str) -> Path:
        path = self.out / "work" / scenario
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def fsync(self) -> str:
        return f"on (LMDB, data on {filesystem_of(self.out)})"

    def base_conditions(self, **fields: Any) -> dict[str, Any]:
        return {"profile": self.profile.name, "nproc": self.machine["nproc"],
                "memory_mb": self.machine["memory_mb"], "python": self.machine["python"],
                # other work on the machine shows here; figures taken under load are not comparable
                "loadavg_1m": round(os.getloadavg()[0], 2), **fields}


Scenario = Callable[[Suite], Awaitable[dict[str, Any]]]


def say(text: str) -> None:
    print(text, flush=True)


async def run_scenarios(suite: Suite, scenarios: list[tuple[str, str, Scenario]]) -> None:
    for name, title, scenario in scenarios:
        say(f"\n== {name}: {title}")
        started = time.perf_counter()
        try:
            result = await scenario(suite)
            result.setdefault("status", "ok")
        except Skipped as skip:
            result = {"status": "skipped", "message": str(skip)}
        except Exception as error:  # one broken scenario must not lose the others' figures
            result = {"status": "failed", "message": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc()}
        finally:
            stop_all()
        result.update(name=name, title=title, elapsed_s=round(time.perf_counter() - started, 1))
        if result["status"] != "ok":
            say(f"   {result['status'].upper()}: {result.get('message', '')}")
        suite.results[name] = result
        write_json(suite)


class Skipped(Exception):
    """A scenario that cannot run here (e.g. etcd not installed); the report says so."""


def write_json(suite: Suite) -> Path:
    path = suite.out / "results.json"
    document = {"profile": asdict(suite.profile), "machine": suite.machine, "started": suite.started_s,
                "results": suite.results}
    path.write_text(json.dumps(document, indent=1, default=str))
    return path


def run_suite(suite: Suite, scenarios: list[tuple[str, str, Scenario]]) -> None:
    try:
        trio.run(run_scenarios, suite, scenarios)
    finally:
        stop_all()
