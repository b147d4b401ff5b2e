"""`rmqc dev cluster`: a local N-node rmqc cluster for trying rmqc out, with a live view of the nodes.

`LocalCluster` is the launcher's ServeCluster (rmqc.launcher: one `rmqc serve` process per
node, PIDs kept, each in its own session so a terminal's Ctrl-C reaches only us) with the blocking
calls a CLI and plain tests want: start waits for each node's "serving on" line within a bound, and
stop sends SIGINT to each PID, waits (bounded), then SIGKILLs any still running.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqc.launcher import (
    START_TIMEOUT_S,
    STOP_GRACE_S,
    NodeStartFailed as NodeStartFailed,
    ServeCluster,
    ServeNode as NodeProcess,
    end_with_parent as end_with_parent,
    free_ports as free_ports,
    rmqc_argv as rmqc_argv,
    serve_nodes,
)

__all__ = ["LocalCluster", "NodeProcess", "NodeStartFailed", "dev_app", "end_with_parent", "free_ports", "rmqc_argv"]

dev_app = typer.Typer(help="Local development helpers.", no_args_is_help=True)

MAX_NODES = 9  # a Raft group on one machine: more voters only slow commits down


class LocalCluster(ServeCluster):
    """`with LocalCluster(3, data_dir=d) as cluster: cluster.controllers` ("a;b;c")."""

    def __init__(self, nodes: int = 3, *, data_dir: str | Path, base_port: int | None = None,
                 host: str = "127.0.0.1", settings: list[str] | None = None,
                 metrics_base_port: int | None = None) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise typer.BadParameter(f"--nodes {nodes}: between 1 and {MAX_NODES}")
        ports = [base_port + i for i in range(nodes)] if base_port else free_ports(nodes, host)
        self.host = host
        self.settings = list(settings or [])
        self.metrics_base_port = metrics_base_port
        super().__init__(serve_nodes(Path(data_dir), ports, host, self.settings, metrics_base_port))

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
        self.start_blocking(timeout_s)

    def start_node(self, node_id: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start one (stopped or killed) node again with its data directory."""
        self.node(node_id).start_blocking(timeout_s)

    def restart_exited(self, timeout_s: float = START_TIMEOUT_S) -> list[str]:
        """Start again every node whose process exited (killed, crashed, stopped); their ids. They
        stay this cluster's: Ctrl-C stops them with the rest."""
        exited = [node.node_id for node in self.nodes if not node.running]
        for node_id in exited:
            self.start_node(node_id, timeout_s)
        return exited

    def wait_for_leader(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """The leader's address once every running node names it in its 1005 answer (bounded)."""
        import trio

        return trio.run(self.wait_leader, None, timeout_s)

    def kill(self, node_id: str) -> None:
        """SIGKILL one node (a crash) and reap it."""
        process = self.node(node_id).process
        if process is not None:
            process.kill()

    def stop(self, grace_s: float = STOP_GRACE_S) -> dict[str, int | None]:
        """SIGINT to every node, wait up to `grace_s`, SIGKILL the rest; their exit codes. A node
        that is SIGSTOPped stays so and is SIGKILLed: the CLI never wakes what someone paused."""
        return self.stop_blocking(signal.SIGINT, grace_s, resume=False)

    def describe(self) -> list[dict[str, Any]]:
        return [node.describe() for node in self.nodes]


_LOG_LINE = re.compile(r"^\S+ \S+ (?:ERROR|CRITICAL) [\w.]+: (.*)$")


def why_not_started(cluster: LocalCluster, error: Exception) -> str:
    """The errors the nodes that exited logged, one per line (not their whole log tail in one)."""
    errors = [match[1] for node in cluster.nodes if node.process is not None and not node.process.alive
              for line in node.process.log_text().splitlines() if (match := _LOG_LINE.match(line))]
    return "\n".join(errors) if errors else str(error)


@dev_app.command("cluster")
def cluster_command(
    nodes: Annotated[int, typer.Option("--nodes", "-n", help="number of nodes")] = 3,
    base_port: Annotated[int | None, typer.Option("--base-port", help="first port (default: free ports)")] = None,
    data_dir: Annotated[Path, typer.Option("--data-dir", help="one sub-directory per node")] = Path("rmqc-dev"),
    metrics_base_port: Annotated[int | None, typer.Option("--metrics-base-port",
                                                             help="Prometheus port of n0 (n1 +1, ...)")] = None,
    settings: Annotated[list[str] | None, typer.Option("--set", help="OPTION=VALUE for every node")] = None,
    run_for_s: Annotated[float | None, typer.Option("--run-for", help="stop after this many seconds")] = None,
) -> None:
    """Start N `rmqc serve` processes, show them live, stop them all on Ctrl-C."""
    from rmqc.cli._render import ExitCode, console, fail

    cluster = LocalCluster(nodes, data_dir=data_dir, base_port=base_port, settings=settings,
                           metrics_base_port=metrics_base_port)
    try:
        cluster.start()
    except NodeStartFailed as error:
        cluster.stop()
        fail(ExitCode.CANNOT_SERVE, why_not_started(cluster, error), hint=f"the nodes' logs are in {data_dir}/")
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
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async with ControllerClient(cluster.addresses, timeout_ms=STATUS_TIMEOUT_MS, max_retries=1) as client:
                views = await fetch_node_views(client, cluster.addresses)
                with LiveView(render_cluster_processes(cluster.describe(), views)) as live:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(refresh, live, client)
                        with trio.move_on_after(run_for_s if run_for_s is not None else float("inf")):
                            async for signum in signals:
                                if signum != signal.SIGHUP:
                                    break
                                await trio.to_thread.run_sync(cluster.restart_exited)
                        nursery.cancel_scope.cancel()

    trio.run(main)
