"""One load-generator process: `python -m bench._loadworker SHARE_JSON`.

It runs its share of a closed-loop load (clients `first_client` .. `first_client + clients - 1`)
on its own Trio loop, so a load of many clients is not limited by one Python process. The
harness (bench._generators) starts several, waits until every one has printed `ready` (imports
done, workload built), then sends each SIGUSR1: all shares start their warm-up together and
measure the same window. The result (ops, errors, latency samples, refusals) is written as JSON to
the share's `result_path`; the process exits 0 after writing it.
"""

from __future__ import annotations

import importlib
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import trio

from ._load import LoadResult, Workload, closed_loop

GO_SIGNAL = signal.SIGUSR1
# The harness signals once every share is ready; a worker left waiting longer has lost its harness.
GO_TIMEOUT_S = 60.0
READY_LINE = "ready"


class NoGo(RuntimeError):
    """The harness never said go."""


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload another process can build: `factory` names a function of a bench module
    ("bench._scn_reads:rmqc_read_workload") returning a Workload, `kwargs` its JSON arguments."""

    factory: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Workload[Any]:
        module, _, name = self.factory.partition(":")
        if not module.startswith("bench.") or not name:
            raise ValueError(f"workload factory {self.factory!r} is not module:function of the bench package")
        workload: Workload[Any] = getattr(importlib.import_module(module), name)(**self.kwargs)
        return workload


@dataclass(frozen=True)
class Share:
    """One generator process's part of a load point."""

    spec: WorkloadSpec
    first_client: int
    clients: int
    warmup_s: float
    duration_s: float
    result_path: str

    def to_json(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> Share:
        fields = orjson.loads(text)
        return cls(**{**fields, "spec": WorkloadSpec(**fields["spec"])})


def write_result(path: Path, result: LoadResult, refusals: dict[str, int]) -> None:
    path.write_bytes(orjson.dumps({**asdict(result), "refusals": refusals}))


def read_result(path: Path) -> tuple[LoadResult, dict[str, int]]:
    fields = orjson.loads(path.read_bytes())
    refusals = fields.pop("refusals")
    return LoadResult(**fields), refusals


def wait_for_go() -> None:
    """Block until the harness's go signal (blocked first, so one sent early waits for us)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {GO_SIGNAL})
    print(READY_LINE, flush=True)
    if signal.sigtimedwait({GO_SIGNAL}, GO_TIMEOUT_S) is None:
        raise NoGo(f"no go signal within {GO_TIMEOUT_S:g} s")


def main(argv: list[str]) -> int:
    share = Share.from_json(argv[0])
    workload = share.spec.build()
    wait_for_go()
    result = trio.run(closed_loop, workload, share.clients, share.duration_s, share.warmup_s, share.first_client)
    write_result(Path(share.result_path), result, dict(workload.refusals))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
