"""rmqc.launcher with small Python children standing in for `rmqc serve`: output waits
(bounded, per run), exits noticed, signals by PID, stop escalation, the registry, node argv."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

import pytest

import rmqc.launcher as launcher
from rmqc.launcher import (
    NodeStartFailed,
    Process,
    ProcessFailed,
    ServeCluster,
    ServeNode,
    _bindable,
    _ephemeral_low,
    _started,
    consecutive_free_ports,
    free_ports,
    rmqc_argv,
    serve_argv,
    serve_nodes,
    stop_all,
    stop_processes,
)

WAIT_S = 30.0  # a Python child starting on a loaded 2-core machine


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# Prints "ready", then stays until signalled (SIGTERM kills it by default).
WAITER = "import sys, time\nprint('ready', flush=True)\nwhile True: time.sleep(1)"
IGNORES_TERM = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" \
               "print('ready', flush=True)\nwhile True: time.sleep(1)"


def test_output_of_an_earlier_run_in_the_same_log_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    first = Process("first", child("print('serving 1', flush=True)"), log)
    assert first.wait_for_output_blocking(r"serving (\d)", WAIT_S).group(1) == "1"
    assert first.wait_exit_blocking(WAIT_S) == 0
    second = Process("second", child(WAITER), log)
    try:
        second.wait_for_output_blocking("ready", WAIT_S)
        assert "serving 1" in log.read_text() and "serving 1" not in second.output_text()
    finally:
        second.stop()
    assert second.returncode == -signal.SIGTERM


def test_a_child_that_exits_without_the_line_fails_with_its_code_and_stderr(tmp_path: Path) -> None:
    process = Process("quitter", child("import sys; print('boom here', file=sys.stderr); sys.exit(3)"),
                      tmp_path / "q.out", err_path=tmp_path / "q.log")
    with pytest.raises(ProcessFailed, match="quitter exited with 3: boom here"):
        process.wait_for_output_blocking("never", WAIT_S)
    assert process.log_text() == "boom here\n" and process.output_text() == ""
    assert process.pid not in _started


def test_a_silent_child_fails_after_the_bound(tmp_path: Path) -> None:
    process = Process("silent", child("import time; time.sleep(60)"), tmp_path / "s.log")
    try:
        with pytest.raises(ProcessFailed, match=r"silent: no 'never' within 0.2 s"):
            process.wait_for_output_blocking("never", 0.2)
        assert process.alive
    finally:
        process.kill()


def test_stop_escalates_to_sigkill_for_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    process = Process("stubborn", child(IGNORES_TERM), tmp_path / "i.log")
    process.wait_for_output_blocking("ready", WAIT_S)
    assert process.stop(grace_s=0.5) == -signal.SIGKILL
    assert process.pid not in _started


def test_a_paused_child_is_resumed_to_stop_unless_told_not_to(tmp_path: Path) -> None:
    resumed, frozen = (Process(name, child(WAITER), tmp_path / f"{name}.log") for name in ("resumed", "frozen"))
    for process in (resumed, frozen):
        process.wait_for_output_blocking("ready", WAIT_S)
        process.pause()
    assert stop_processes([resumed], grace_s=WAIT_S) == [-signal.SIGTERM]
    assert stop_processes([frozen], signal.SIGINT, grace_s=0.5, resume=False) == [-signal.SIGKILL]


async def test_async_waits_and_stop_all_end_every_started_child(tmp_path: Path) -> None:
    processes = [Process(f"p{i}", child(WAITER), tmp_path / f"p{i}.log") for i in range(2)]
    for process in processes:
        await process.wait_for_output("ready", WAIT_S)
    processes[0].signal(signal.SIGTERM)
    assert await processes[0].wait_exit(WAIT_S) == -signal.SIGTERM
    stop_all()
    assert processes[1].returncode == -signal.SIGTERM
    assert not {process.pid for process in processes} & set(_started)


def test_serve_argv_and_the_node_layout(tmp_path: Path) -> None:
    assert serve_argv("n1", "n0-h:1;n1-h:2", tmp_path / "d", ["tick_ms=5"], 9101, ["rmqc"]) == [
        "rmqc", "serve", "--id", "n1", "--peers", "n0-h:1;n1-h:2", "--data-dir", str(tmp_path / "d"),
        "--metrics-port", "9101", "--set", "tick_ms=5"]
    nodes = serve_nodes(tmp_path, [7001, 7002], settings=["a=1"], metrics_base_port=9100)
    cluster = ServeCluster(nodes)
    assert cluster.peers == "n0-127.0.0.1:7001;n1-127.0.0.1:7002" == nodes[1].peers
    assert cluster.controllers == "127.0.0.1:7001;127.0.0.1:7002"
    assert cluster.node("n1") is cluster.node("127.0.0.1:7002") is nodes[1]
    assert (nodes[1].data_dir, nodes[1].log_path, nodes[1].out_path) == (
        tmp_path / "n1", tmp_path / "n1.log", tmp_path / "n1.out")
    assert nodes[1].command()[-6:] == ["--data-dir", str(tmp_path / "n1"), "--metrics-port", "9101", "--set", "a=1"]
    assert nodes[1].command()[:4] == [*rmqc_argv(), "serve"]
    # another tree's rmqc (a before/after), as bench's RMQC_BENCH_PROGRAM and the pause harness run it
    (other,) = serve_nodes(tmp_path, [7003], program=["/old/tree/rmqc"])
    assert other.command()[:2] == ["/old/tree/rmqc", "serve"]


def fake_node(tmp_path: Path, code: str) -> ServeNode:
    node = ServeNode("n0", "127.0.0.1:7001", "n0-127.0.0.1:7001", tmp_path / "n0", tmp_path / "n0.log")
    node.command = lambda: child(code)  # type: ignore[method-assign]
    return node


def test_a_node_is_serving_once_it_prints_its_own_line_and_restarts(tmp_path: Path) -> None:
    node = fake_node(tmp_path, "import time\nprint('rmqc n0 serving on 127.0.0.1:7001', flush=True)\n"
                               "while True: time.sleep(1)")
    cluster = ServeCluster([node])
    cluster.start_blocking(WAIT_S)
    assert node.running and node.data_dir.is_dir()
    node.kill()
    assert node.process is not None and node.process.wait_exit_blocking(WAIT_S) == -signal.SIGKILL
    node.start_blocking(WAIT_S)
    assert node.describe()["returncode"] is None
    assert cluster.stop_blocking() == {"n0": -signal.SIGTERM}
    assert node.out_path.read_text().count("serving on") == 2


def test_a_node_that_dies_before_serving_fails_to_start_with_its_log(tmp_path: Path) -> None:
    node = fake_node(tmp_path, "import sys\nprint('rmqc n0 serving on 127.0.0.1:9', flush=True)\n"
                               "sys.exit('cannot serve: port taken')")
    with pytest.raises(NodeStartFailed, match="n0 exited with 1: cannot serve: port taken"):
        node.start_blocking(WAIT_S)
    never_started = ServeNode("n1", "127.0.0.1:7002", "", tmp_path / "n1", tmp_path / "n1.log")
    assert ServeCluster([node, never_started]).stop_blocking() == {"n0": 1, "n1": None}


async def test_a_cluster_that_fails_to_start_leaves_no_process_behind(tmp_path: Path) -> None:
    serving = fake_node(tmp_path, "import time\nprint('rmqc n0 serving on 127.0.0.1:7001', flush=True)\n"
                                  "while True: time.sleep(1)")
    failing = fake_node(tmp_path / "b", "import sys; sys.exit(2)")
    with pytest.raises(NodeStartFailed, match="exited with 2"):
        await ServeCluster([serving, failing]).start_async(WAIT_S)
    assert serving.process is not None and serving.process.returncode == -signal.SIGTERM
    assert not serving.running and not failing.running


def test_picked_ports_are_ones_the_kernel_never_hands_out_by_itself() -> None:
    """A port picked for a server must not be one a client's connection or a bind to port 0 can
    take before the server binds it (a node of the README walkthrough's cluster can fail to start so)."""
    low = _ephemeral_low()
    assert low > 10_000  # Linux's default range starts at 32768
    picked = free_ports(20)
    assert len(set(picked)) == 20 and all(port < low for port in picked), (low, picked)
    base = consecutive_free_ports(3)
    assert base + 3 <= low
    handed_out = []
    for _ in range(50):  # the kernel's own picks, as a client's would be
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            handed_out.append(sock.getsockname()[1])
    assert not set(handed_out) & {*picked, base, base + 1, base + 2}
    assert min(handed_out) >= low


class _SameSample:
    """A port sampler that offers the same ports to every call, as two calls' random samples can
    overlap (a CI run's node and metrics ports did: the node started second found its port taken)."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    def sample(self, population: range, k: int) -> list[int]:
        return [port for port in self.ports if port in population][:k]


def test_a_port_handed_out_is_not_handed_out_again_before_its_server_binds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    low = _ephemeral_low()
    offered = _SameSample([port for port in range(low - 400, low) if _bindable("127.0.0.1", port)][:12])
    monkeypatch.setattr(launcher, "_PORT_PICKS", offered)
    monkeypatch.setattr(launcher, "_handed_out", {})
    nodes, metrics = free_ports(3), free_ports(3)
    assert not set(nodes) & set(metrics), (nodes, metrics)
    base = consecutive_free_ports(2)
    assert not {base, base + 1} & {*nodes, *metrics}


def test_the_memory_of_ports_handed_out_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "_handed_out", {})
    monkeypatch.setattr(launcher, "REMEMBERED_PICKS", 8)
    first = free_ports(5)
    free_ports(5)
    assert len(launcher._handed_out) == 8
    assert list(launcher._handed_out)[:3] == first[2:]  # the oldest forgotten first
