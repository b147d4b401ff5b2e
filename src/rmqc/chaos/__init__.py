"""rmqc.chaos: OpenChaos-style fault runs on real `rmqc serve` processes (`rmqc chaos run`).

It runs real processes through rmqc.launcher behind its fault proxy (`_tcp_proxy`) and checks
histories with rmqc.linearizability; no serving code imports it. docs/chaos.md explains every fault,
checker and output."""

from ._checks import all_violations as all_violations
from ._faults import FAULTS as FAULTS, FIVE_NODES_ONLY as FIVE_NODES_ONLY
from ._history import History as History, read_jsonl as read_jsonl
from ._output import verdict_line as verdict_line, write_outputs as write_outputs
from ._run import (
           JAVA_ONLY as JAVA_ONLY,
           ChaosConfig as ChaosConfig,
           run_and_report as run_and_report,
           run_chaos as run_chaos,
           schedule as schedule,
)
from ._summary import summarize as summarize

__all__ = ["FAULTS", "FIVE_NODES_ONLY", "JAVA_ONLY", "ChaosConfig", "History", "all_violations", "read_jsonl",
           "run_and_report", "run_chaos", "schedule", "summarize", "verdict_line", "write_outputs"]
