"""`rmqc dev cluster`: starts N `rmqc serve` processes, shows them, and on Ctrl-C (SIGINT) stops every
node and exits 0. Also LocalCluster's escalation to SIGKILL for a node that ignores SIGINT."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from rmqc.cli.dev import LocalCluster, end_with_parent, rmqc_argv
from rmqc.cli.main import app
from rmqc.launcher import poll_blocking

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


def accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def test_dev_cluster_runs_three_nodes_and_stops_them_on_ctrl_c(tmp_path: Path) -> None:
    argv = [*rmqc_argv(), "dev", "cluster", "--nodes", "3", "--data-dir", str(tmp_path / "dev")]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=end_with_parent)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True)
    reader.start()
    try:
        controllers = ""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not controllers:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line.startswith("controllers:"):
                controllers = line.split()[1]
        addresses = controllers.split(";")
        assert len(addresses) == 3 and all(accepts(address) for address in addresses)
        def status_ok() -> bool | None:  # exit 3 ("no leader") until the first election is done
            status = CliRunner().invoke(app, ["status", "-a", controllers, "--json"])
            assert status.exit_code in (0, 3), status.stderr
            return True if status.exit_code == 0 else None

        poll_blocking(status_ok, START_TIMEOUT_S, lambda: AssertionError("status never found a leader"))
        watch_status_until_ctrl_c(controllers, tmp_path / "watch.out")
        restart_a_killed_node(process, lines, tmp_path / "dev", addresses[1])
        for node in ("n0", "n1", "n2"):
            assert (tmp_path / "dev" / node).is_dir() and "serving on" in (tmp_path / "dev" / f"{node}.out").read_text()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=STOP_TIMEOUT_S) == 0
        reader.join(STOP_TIMEOUT_S)
        output = "".join(lines.queue)
        assert "stopped: n0 exit 0, n1 exit 0, n2 exit 0" in output
        assert not any(accepts(address) for address in addresses)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def restart_a_killed_node(cluster: subprocess.Popen[str], lines: queue.Queue[str], data_dir: Path,
                          address: str) -> None:
    """n1 killed (the PID its lock file names: a process this test started, through the command);
    the view says how to restart it, SIGHUP restarts it, and it is the cluster's again (Ctrl-C
    stops it with the rest, checked by the caller)."""
    os.kill(int((data_dir / "n1" / "node.lock").read_text().split()[0]), signal.SIGKILL)
    seen: list[str] = []

    def hint_shown() -> bool | None:
        while not lines.empty():
            seen.append(lines.get_nowait())
        return True if any(f"kill -HUP {cluster.pid}" in line for line in seen) else None

    poll_blocking(hint_shown, START_TIMEOUT_S, lambda: AssertionError("no restart hint: " + "".join(seen[-20:])))
    for line in seen:
        lines.put(line)
    cluster.send_signal(signal.SIGHUP)
    poll_blocking(lambda: accepts(address) or None, START_TIMEOUT_S, lambda: AssertionError("n1 not restarted"))


def watch_status_until_ctrl_c(controllers: str, out_path: Path) -> None:
    """`rmqc status --watch` draws the table, then ends with exit 0 on SIGINT."""
    with open(out_path, "w") as out:
        watcher = subprocess.Popen([*rmqc_argv(), "status", "--watch", "-a", controllers], stdout=out,
                                   stderr=subprocess.STDOUT, preexec_fn=end_with_parent)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "rmqc controllers" not in out_path.read_text() and time.monotonic() < deadline:
            assert watcher.poll() is None, out_path.read_text()
            time.sleep(0.1)  # a child process's output file: nothing to wait on but polling it
        assert "rmqc controllers" in out_path.read_text()
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=STOP_TIMEOUT_S) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


def test_stop_kills_a_node_that_ignores_sigint(tmp_path: Path) -> None:
    cluster = LocalCluster(1, data_dir=tmp_path)
    with cluster:
        pid = cluster.nodes[0].process.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGSTOP)  # a stopped process cannot act on SIGINT
        codes = cluster.stop(grace_s=1.0)
    assert codes == {"n0": -signal.SIGKILL}


def test_a_node_on_a_busy_port_is_named_with_its_reason_once(tmp_path: Path) -> None:
    """`make serve` holding 9878 while the walkthrough's `dev cluster` starts: exit 1 (not 3, "no
    controller answered") with the node's error, not its log lines joined by " | "."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run([*rmqc_argv(), "dev", "cluster", "--nodes", "1", "--base-port", str(port),
                                 "--data-dir", str(tmp_path / "dev")], capture_output=True, text=True,
                                timeout=START_TIMEOUT_S, preexec_fn=end_with_parent)
    assert result.returncode == 1, result.stderr
    err = " ".join(result.stderr.split())
    assert f"error: n0: cannot serve on 127.0.0.1:{port}: 127.0.0.1:{port} is in use by another process" in err
    assert " | " not in result.stderr and "INFO" not in result.stderr
