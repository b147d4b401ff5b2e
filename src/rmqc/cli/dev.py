"""`rmqc dev cluster`: a local N-node rmqc cluster for trying rmqc out, with a live view of the nodes.

`LocalCluster` starts one `rmqc serve` process per node (PIDs kept, each in its own session so a
terminal's Ctrl-C reaches only us), waits for each node's "serving on" line within a bound, and
stops them: SIGINT to each PID, a bounded wait, then SIGKILL for any still running. Tests and
benchmarks use it too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from rmqc.errors import RmqcError
from rmqc.testing.cluster import free_ports

__all__ = ["LocalCluster", "NodeProcess", "NodeStartFailed", "dev_app", "end_with_parent", "free_ports", "rmqc_argv"]

dev_app = typer.Typer(help="Local development helpers.", no_args_is_help=True)

START_TIMEOUT_S = 60.0  # a node imports trio, LMDB and the controller: seconds on a loaded machine
STOP_GRACE_S = 10.0  # SIGINT -> exit; the node itself gives in-flight answers 0.5 s
POLL_S = 0.05
SERVING_MARK = " serving on "
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
MAX_NODES = 9  # a Raft group on one machine: more voters only slow commits down


class NodeStartFailed(RmqcError):
    """A node exited, or did not print its "serving on" line within the bound."""


def end_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the process that started it dies, so a killed
    `rmqc dev cluster` or test never leaves nodes behind (they are in their own session)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: stop() still ends them on every normal exit


def rmqc_argv() -> list[str]:
    """How to run the `rmqc` command of this very installation as a child process."""
    return [sys.executable, "-c", "import sys; from rmqc.cli.main import app; sys.argv[0] = 'rmqc'; app()"]


@dataclass(slots=True)
class NodeProcess:
    node_id: str
    address: str
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def out_path(self) -> Path:
        return self.data_dir.parent / f"{self.node_id}.out"

    @property
    def err_path(self) -> Path:
        return self.data_dir.parent / f"{self.node_id}.log"

    def describe(self) -> dict[str, Any]:
        process = self.process
        return {"node_id": self.node_id, "address": self.address, "data_dir": str(self.data_dir),
                "pid": process.pid if process else None, "returncode": process.poll() if process else "not started"}


class LocalCluster:
    """`with LocalCluster(3, data_dir=d) as cluster: cluster.controllers` ("a;b;c")."""

    def __init__(self, nodes: int = 3, *, data_dir: str | Path, base_port: int | None = None,
                 host: str = "127.0.0.1", settings: list[str] | None = None, metrics_base_port: int | None = None) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise typer.BadParameter(f"--nodes {nodes}: between 1 and {MAX_NODES}")
        ports = [base_port + i for i in range(nodes)] if base_port else free_ports(nodes, host)
        self.host = host
        self.settings = list(settings or [])
        self.metrics_base_port = metrics_base_port
        root = Path(data_dir)
        self.nodes = [NodeProcess(f"n{i}", f"{host}:{port}", root / f"n{i}") for i, port in enumerate(ports)]

    @property
    def peers(self) -> str:
        return ";".join(f"{node.node_id}-{node.address}" for node in self.nodes)

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in self.nodes]

    @property
    def controllers(self) -> str:
        return ";".join(self.addresses)

    def node(self, node_id: str) -> NodeProcess:
        return next(node for node in self.nodes if node.node_id == node_id)

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start every node, then wait (bounded) until each has printed its "serving on" line."""
        for node in self.nodes:
            self._spawn(node)
        for node in self.nodes:
            self._wait_serving(node, timeout_s)

    def start_node(self, node_id: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start one (stopped or killed) node again with its data directory."""
        node = self.node(node_id)
        self._spawn(node)
        self._wait_serving(node, timeout_s)

    def _spawn(self, node: NodeProcess) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [*rmqc_argv(), "serve", "--id", node.node_id, "--peers", self.peers, "--data-dir", str(node.data_dir)]
        if self.metrics_base_port is not None:
            argv += ["--metrics-port", str(self.metrics_base_port + int(node.node_id[1:]))]
        for setting in self.settings:
            argv += ["--set", setting]
        with open(node.out_path, "wb") as out, open(node.err_path, "ab") as err:
            node.process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                            start_new_session=True, preexec_fn=end_with_parent)

    def _wait_serving(self, node: NodeProcess, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        assert node.process is not None
        while time.monotonic() < deadline:
            if SERVING_MARK in node.out_path.read_text(errors="replace"):
                return
            if node.process.poll() is not None:
                raise NodeStartFailed(f"{node.node_id} exited with {node.process.returncode}; "
                                      f"last log lines: {self._tail(node)}")
            time.sleep(POLL_S)  # a child process, not a Trio task: nothing to wait on but its file
        raise NodeStartFailed(f"{node.node_id} did not print 'serving on' within {timeout_s:.0f} s: {self._tail(node)}")

    @staticmethod
    def _tail(node: NodeProcess) -> str:
        try:
            return " | ".join(node.err_path.read_text(errors="replace").strip().splitlines()[-5:])
        except FileNotFoundError:
            return "(no log)"

    def wait_for_leader(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """The leader's address once every node names the same one in its 1005 answer (bounded)."""
        import trio

        from rmqc.client import ClientError, ControllerClient

        async def leaders_named() -> set[str | None]:
            async with ControllerClient(self.addresses, timeout_ms=2000, max_retries=0) as client:
                named: set[str | None] = set()
                for address in self.addresses:
                    try:
                        named.add((await client.get_metadata(address)).ext("controllerLeaderAddress"))
                    except ClientError:
                        named.add(None)
                return named

        deadline = time.monotonic() + timeout_s
        named: set[str | None] = set()
        while time.monotonic() < deadline:
            named = trio.run(leaders_named)
            if len(named) == 1 and None not in named:
                return str(next(iter(named)))
            time.sleep(POLL_S)  # the nodes are other processes: ask again shortly
        raise NodeStartFailed(f"no leader every node agrees on within {timeout_s:.0f} s (named: {named})")

    def kill(self, node_id: str) -> None:
        """SIGKILL one node (a crash)."""
        process = self.node(node_id).process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=STOP_GRACE_S)

    def stop(self, grace_s: float = STOP_GRACE_S) -> dict[str, int | None]:
        """SIGINT to every node, wait up to `grace_s`, SIGKILL the rest; their exit codes."""
        running = [node for node in self.nodes if node.process is not None and node.process.poll() is None]
        for node in running:
            assert node.process is not None
            try:
                os.kill(node.process.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        for node in running:
            assert node.process is not None
            try:
                node.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        return {node.node_id: node.process.poll() if node.process else None for node in self.nodes}

    def describe(self) -> list[dict[str, Any]]:
        return [node.describe() for node in self.nodes]


@dev_app.command("cluster")
def cluster_command(
    nodes: Annotated[int, typer.Option("--nodes", "-n", help="number of nodes")] = 3,
    base_port: Annotated[Optional[int], typer.Option("--base-port", help="first port (default: free ports)")] = None,
    data_dir: Annotated[Path, typer.Option("--data-dir", help="one sub-directory per node")] = Path("rmqc-dev"),
    metrics_base_port: Annotated[Optional[int], typer.Option("--metrics-base-port",
                                                             help="Prometheus port of n0 (n1 +1, ...)")] = None,
    settings: Annotated[Optional[list[str]], typer.Option("--set", help="OPTION=VALUE for every node")] = None,
    run_for_s: Annotated[Optional[float], typer.Option("--run-for", help="stop after this many seconds")] = None,
) -> None:
    """Start N `rmqc serve` processes, show them live, stop them all on Ctrl-C."""
    from rmqc.cli._render import ExitCode, console, fail

    cluster = LocalCluster(nodes, data_dir=data_dir, base_port=base_port, settings=settings,
                           metrics_base_port=metrics_base_port)
    try:
        cluster.start()
    except NodeStartFailed as error:
        cluster.stop()
        fail(ExitCode.UNREACHABLE, str(error), hint="is the port free? see the node logs in --data-dir")
    out = console()
    out.print(f"controllers: [bold]{cluster.controllers}[/]  (export RMQC_CONTROLLERS='{cluster.controllers}')")
    try:
        _live_view(cluster, run_for_s)
        out.print("stopping every node ...")
    finally:
        codes = cluster.stop()
    out.print("stopped: " + ", ".join(f"{node_id} exit {code}" for node_id, code in codes.items()))


def _live_view(cluster: LocalCluster, run_for_s: float | None) -> None:
    """Redraw the nodes every second until SIGINT/SIGTERM or `run_for_s`."""
    import trio

    from rmqc.cli._render import LiveView, render_cluster_processes
    from rmqc.cli.status import STATUS_TIMEOUT_MS, WATCH_REFRESH_S, fetch_node_views
    from rmqc.client import ControllerClient

    async def refresh(live: LiveView, client: ControllerClient) -> None:
        while True:
            await trio.sleep(WATCH_REFRESH_S)
            views = await fetch_node_views(client, cluster.addresses)
            live.update(render_cluster_processes(cluster.describe(), views))

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with ControllerClient(cluster.addresses, timeout_ms=STATUS_TIMEOUT_MS, max_retries=1) as client:
                views = await fetch_node_views(client, cluster.addresses)
                with LiveView(render_cluster_processes(cluster.describe(), views)) as live:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(refresh, live, client)
                        with trio.move_on_after(run_for_s if run_for_s is not None else float("inf")):
                            async for _signal in signals:
                                break
                        nursery.cancel_scope.cancel()

    trio.run(main)
