"""Running a node as a process: logging setup, signals, graceful shutdown, optional metrics."""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator

import orjson
import trio

from rmqc.config import NodeConfig
from rmqc.errors import CorruptionError, RmqcError
from rmqc.storage import DAMAGE_ADVICE, verify_isolated

from ._exporter import start_metrics_exporter, update_from_node
from ._node import ControllerNode
from ._port_holders import port_holders
from ._status_page import StatusPage

log = logging.getLogger("rmqc.node")

# After SIGINT/SIGTERM (docs/operations.md, "Stopping a node"): a leader hands its role to the most
# up-to-date voter (at most two election timeouts), then no new request is read and those in flight
# get STOP_DRAIN_S to be answered; what is still waiting then is failed (SYSTEM_ERROR), and those
# answers get SHUTDOWN_GRACE_S to be written before every task is cancelled. A second signal skips
# the handover and the drain.
STOP_DRAIN_S = 1.0
SHUTDOWN_GRACE_S = 0.5
METRICS_INTERVAL_S = 1.0


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document = {"ts": record.created, "level": record.levelname, "logger": record.name,
                    "msg": record.getMessage()}
        if record.exc_info:
            document["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(document).decode()


def setup_logging(log_format: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def run_node(config: NodeConfig, repair: bool = False) -> int:
    """Run until SIGINT/SIGTERM; returns the process exit code (1 if the node could not start:
    port taken, data directory locked by a live node, storage unreadable or damaged); `repair`:
    a damaged data directory is set aside and the node rejoins (rmqc serve --repair)."""
    failures: list[BaseException] = []
    try:
        _check_port_free(config)  # before the data directory is created or locked
    except OSError as error:
        failures.append(error)
    else:
        try:
            trio.run(serve_until_signalled, config, repair)
        except* (OSError, RmqcError) as group:
            failures.extend(_leaves(group))
    for failure in failures:
        log.error("%s: cannot serve on %s: %s", config.node_id, config.listen_address, _in_words(failure, config))
    if any(isinstance(failure, CorruptionError) for failure in failures):
        log.error("%s: refusing to serve from a damaged log; `rmqc log verify %s` finds: %s. %s", config.node_id,
                  config.data_dir, verify_finding(config.data_dir), DAMAGE_ADVICE)
    return 1 if failures else 0


def _check_port_free(config: NodeConfig) -> None:
    """Bind the node's address once, as the node will (SO_REUSEADDR), and let go: OSError if it cannot."""
    peer = config.self_peer
    with socket.create_server((peer.host, peer.port)):
        pass


def _in_words(failure: BaseException, config: NodeConfig) -> str:
    if isinstance(failure, OSError) and failure.errno == errno.EADDRINUSE:
        holders = port_holders(config.self_peer.port)
        held_by = f"held by {', '.join(holders)}" if holders else "another rmqc serve?"
        return (f"{config.listen_address} is in use by another process ({held_by}; `make serve` takes "
                "127.0.0.1:9878, as does the README's `rmqc dev cluster --base-port 9876`): stop it, or give this "
                "node another port (--listen, --peers)")
    if isinstance(failure, OSError) and failure.errno == errno.EADDRNOTAVAIL:
        return f"{config.listen_address} is not an address of this machine ({failure.strerror})"
    return str(failure)


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    """The errors themselves: nurseries nest them in groups within groups."""
    leaves: list[BaseException] = []
    for error in group.exceptions:
        leaves.extend(_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return leaves


def verify_finding(data_dir: object) -> str:
    """What `rmqc log verify` says about the log in `data_dir`, in one line."""
    try:
        report = verify_isolated(str(data_dir))
    except RmqcError as error:
        return f"the log cannot be read: {error}"
    if report.ok:
        return f"ok: {report.entries_checked} entries checked"
    return (f"corrupt at index {report.first_bad_index}: {report.problem} "
            f"({report.entries_checked} entries good before it)")


async def serve_until_signalled(config: NodeConfig, repair: bool = False) -> None:
    node = ControllerNode(config, repair=repair)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            address = await nursery.start(node.run)
            print(f"rmqc {config.node_id} serving on {address}", flush=True)
            if config.metrics_port is not None:
                nursery.start_soon(_export_metrics, node, config.metrics_port, config.metrics_host)
            signum = await signals.__anext__()
            log.info("%s: signal %s, shutting down", config.node_id, signal.Signals(signum).name)
            with trio.CancelScope() as graceful:
                nursery.start_soon(_cancel_on_next_signal, signals, graceful, config.node_id)
                await node.stop_gracefully(STOP_DRAIN_S)
            await node.shutdown(SHUTDOWN_GRACE_S)
            nursery.cancel_scope.cancel()


async def _cancel_on_next_signal(signals: AsyncIterator[int], graceful: trio.CancelScope, node_id: str) -> None:
    """A second SIGINT/SIGTERM ends the graceful part of a stop at once."""
    async for signum in signals:
        log.warning("%s: signal %s again: stopping now", node_id, signal.Signals(signum).name)
        graceful.cancel()
        return


async def _export_metrics(node: ControllerNode, port: int, host: str) -> None:
    """Serve the node's Prometheus metrics, health and status page on host:port; gauges refreshed
    every second."""
    page = StatusPage(node)
    exporter = start_metrics_exporter(node.node_metrics, port, host, health=node.health, status_page=page)
    log.info("%s: metrics on http://%s:%d/metrics, health on /livez and /readyz, status page on /",
             node.config.node_id, host, exporter.port)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(page.run)
            while True:
                update_from_node(node.node_metrics, node)
                await trio.sleep(METRICS_INTERVAL_S)
    finally:
        exporter.close()
