"""`rmqc sim brokers` as a process steered through stdin (also the helper other CLI tests use to put
simulated brokers behind a real cluster).

Bounds: SIM_CONVERGE_S covers broker start-up and convergence on a shared, loaded machine.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from rmqc.cli.dev import LocalCluster, end_with_parent, rmqc_argv

SIM_CONVERGE_S = 180.0
ANSWER_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 60.0


class SimProcess:
    """A running `rmqc sim brokers --json`: send command lines, read its JSON lines (bounded waits)."""

    def __init__(self, controllers: str, state_dir: Path, *extra: str) -> None:
        argv = [*rmqc_argv(), "sim", "brokers", "--controllers", controllers, "--state-dir", str(state_dir),
                "--fast", "--json", "--report-every", "0.5", *extra]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        preexec_fn=end_with_parent)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.put(orjson.loads(line))

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float, what: str) -> dict[str, Any]:
        """The first line satisfying `predicate` within `timeout_s` in all (lines keep coming every
        report interval, so the bound is on the whole wait, not on each line)."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] | None = None
        try:
            while True:
                last = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
                if predicate(last):
                    return last
        except queue.Empty:
            raise AssertionError(f"no line with {what} within {timeout_s} s (exit {self.process.poll()});"
                                 f" the last line: {last}") from None

    def ask(self, command: str, key: str, timeout_s: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        self.send(command)
        return self.wait_for(lambda line: key in _unwrap(line), timeout_s, key)

    def beliefs(self, name: str) -> list[dict[str, Any]]:
        return _unwrap(self.ask(f"beliefs {name}", "beliefs"))["beliefs"]

    def wait_full_group(self, name: str, replicas: int, timeout_s: float = SIM_CONVERGE_S,
                        past_epoch: int = -1) -> list[dict[str, Any]]:
        """Beliefs of `name` once its master holds at least `replicas` brokers in its SyncStateSet
        and all agree on that master (at least: a new master may have expanded it already), every
        broker having heard of a master epoch after `past_epoch` (the controller answers an election
        before its 1008s reach the brokers: without it the old master's beliefs would do)."""
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            beliefs = self.beliefs(name)
            masters = [b for b in beliefs if b["role"] == "MASTER" and b["status"] == "running"]
            if (len(masters) == 1 and len(masters[0]["syncStateSet"]) >= replicas
                    and all(b["masterBrokerId"] == masters[0]["brokerId"] and b["masterEpoch"] > past_epoch
                            for b in beliefs)):
                return beliefs
            self.wait_for(lambda line: "summary" in _unwrap(line), ANSWER_TIMEOUT_S, "a summary")  # ~0.5 s
        raise AssertionError(f"{name} did not fill its SyncStateSet within {timeout_s} s: {beliefs}")

    def quit(self) -> int:
        """`quit` on stdin; the exit code (the process is killed if it does not exit in time)."""
        if self.process.poll() is None:
            self.send("quit")
        try:
            return self.process.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self._close_pipes()

    def _close_pipes(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self._reader.join(timeout=EXIT_TIMEOUT_S)  # it ends at EOF, once the process has exited
        self.process.stdout.close()


def _unwrap(line: dict[str, Any]) -> dict[str, Any]:
    """Lines relayed from a child process arrive as {"process": i, "line": {...}}."""
    return line["line"] if "line" in line and isinstance(line["line"], dict) else line


def converged_summary(line: dict[str, Any], running: int) -> bool:
    summary = _unwrap(line).get("summary")
    return summary is not None and summary["notConverged"] == 0 and summary["running"] == running


@pytest.fixture(scope="module")
def one_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(1, data_dir=tmp_path_factory.mktemp("node")) as cluster:
        cluster.wait_for_leader()
        yield cluster


def test_sim_over_two_processes_routes_commands_and_fails_over(one_node: LocalCluster, tmp_path: Path) -> None:
    beliefs_out = tmp_path / "beliefs.json"
    sim = SimProcess(one_node.controllers, tmp_path / "sim", "--groups", "4", "--processes", "2",
                     "--beliefs-out", str(beliefs_out), "--seed", "9")
    try:
        for process in (0, 1):
            sim.wait_for(lambda line, p=process: line.get("process") == p and converged_summary(line, 6),
                         SIM_CONVERGE_S, f"a converged summary of process {process}")
        killed = _unwrap(sim.ask("kill-master broker-0003", "brokerId"))
        assert killed["ok"] and killed["brokerName"] == "broker-0003"
        answer = sim.wait_for(lambda line: line.get("process") == 1
                              and _unwrap(line).get("summary", {}).get("killed") == 1
                              and converged_summary(line, 5), SIM_CONVERGE_S, "process 1 converged after the kill")
        assert _unwrap(answer)["summary"]["masters"] == 2
        wrong = _unwrap(sim.ask("hang broker-0000 x", "error"))
        assert wrong["ok"] is False and "NAME ID" in wrong["error"]
    finally:
        assert sim.quit() == 0
    for index in (0, 1):
        beliefs = orjson.loads(Path(f"{beliefs_out}.{index}").read_bytes())
        assert len(beliefs) == 6
    killed_beliefs = orjson.loads(Path(f"{beliefs_out}.1").read_bytes())
    group = [b for b in killed_beliefs if b["brokerName"] == "broker-0003"]
    assert sum(b["status"] == "killed" for b in group) == 1
    live = [b for b in group if b["status"] == "running"]
    assert len({b["masterBrokerId"] for b in live}) == 1 and {b["masterEpoch"] for b in live} == {2}


def test_sim_rejects_impossible_sizes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rmqc.cli.main import app

    result = CliRunner().invoke(app, ["sim", "brokers", "--groups", "0", "-a", "127.0.0.1:1"])
    assert result.exit_code == 2 and "groups >= 1" in result.stderr
    result = CliRunner().invoke(app, ["sim", "brokers", "--groups", "5000", "--replicas", "3", "-a", "127.0.0.1:1",
                                      "--state-dir", str(tmp_path)])
    assert result.exit_code == 2 and "at most" in result.stderr
