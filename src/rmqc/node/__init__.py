"""rmqc.node: the Trio shell that runs one controller node (peer transport, driver, remoting server,
notifier, the metrics port's HTTP server; its configuration is rmqc.config's, its series and status
page document rmqc.metrics'). Only this package, client/, cli/ and testing/ import trio."""

from ._node import ControllerNode as ControllerNode, RequestFailed as RequestFailed
from ._run import run_node as run_node, serve_until_signalled as serve_until_signalled, setup_logging as setup_logging

__all__ = [
    "ControllerNode",
    "RequestFailed",
    "run_node",
    "serve_until_signalled",
    "setup_logging",
]
