"""The HTTP endpoint of the metrics port: a node's Prometheus series (rmqc.metrics.NodeMetrics), its
health (/livez, /readyz) and its status page, served from threads of their own; and the refresh of
the series from a running ControllerNode."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from rmqc.metrics import NOTIFICATION_RESULTS, NodeMetrics, PageSource, answer_page, page_paths, read_page_files
from rmqc.replica import HealthCheck, health_verdict

__all__ = ["MetricsExporter", "start_metrics_exporter", "update_from_node"]

HEALTH_KINDS = ("livez", "readyz")


def update_from_node(metrics: NodeMetrics, node: Any) -> None:
    """Refresh `metrics` from a ControllerNode: the gauges from its replica's published status, the
    refusal and notification counters from its server's and its notifier's running totals."""
    status = node.status()
    if status is not None:  # None: the node is still starting
        metrics.update_from_status(status)
    server = getattr(node, "server", None)
    if server is not None:
        metrics.update_refusals(server.refusals())
    notifier = getattr(node, "notifier", None)
    if notifier is not None:
        metrics.update_notifications({result: getattr(notifier, result) for result in NOTIFICATION_RESULTS})


class HealthSource(Protocol):
    def checks(self, kind: str) -> tuple[HealthCheck, ...]:
        """The checks of `kind` ("livez", "readyz"), callable from the exporter's threads."""


@dataclass(slots=True)
class MetricsExporter:
    """The HTTP endpoint serving a NodeMetrics (and /livez, /readyz); `close()` stops it."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_metrics_exporter(metrics: NodeMetrics, port: int, host: str = "127.0.0.1",
                           health: HealthSource | None = None,
                           status_page: PageSource | None = None) -> MetricsExporter:
    """Serve `metrics` at http://host:port/metrics (port 0: any free port, see `.port`), with
    `health` the health endpoints: /livez and /readyz (`?verbose`, `?exclude=NAME` repeatable), and
    /livez/NAME, /readyz/NAME for one check (rmqc.replica._health says what they answer), and with
    `status_page` the status page at / and its /status.json (rmqc.metrics answers them from the
    document rmqc.node._status_page builds).

    A daemon thread serves them, one thread per request (prometheus-client's threading WSGI
    server): neither a scrape nor a probe runs on the node's Trio loop; the health answers read the
    snapshot the loop publishes (rmqc.node._health).
    """
    metrics_app = make_wsgi_app(metrics.registry)
    page_files = read_page_files() if status_page is not None else {}
    on_page = page_paths() if status_page is not None else frozenset()

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "/").rstrip("/")
        if path in on_page:
            assert status_page is not None
            return answer_page(status_page, page_files, path, str(environ.get("REQUEST_METHOD")), start_response)
        kind, _, only = path.lstrip("/").partition("/")
        if health is None or kind not in HEALTH_KINDS:
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        checks = health.checks(kind)
        if only:
            checks = tuple(check for check in checks if check.name == only)
            if not checks:
                start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
                return [f"no check {only!r} in /{kind}\n".encode()]
        query = parse_qs(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True)
        verdict = health_verdict(kind, checks, verbose="verbose" in query or bool(only),
                                 exclude=query.get("exclude", ()))
        start_response("200 OK" if verdict.ok else "503 Service Unavailable",
                       [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")])
        return [verdict.text.encode()]

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = make_server(host, port, app, Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="rmqc metrics", daemon=True)
    thread.start()
    return MetricsExporter(server, thread)


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per scrape or probe."""

    def log_message(self, format: str, *args: Any) -> None:  # the base class's name
        pass
