"""rmqc.node: the Trio shell that runs one controller node (configuration, peer transport, driver,
remoting server, notifier). Only this package, client/, cli/ and testing/ import trio."""

from ._config import (
    OPTIONS as OPTIONS,
    LoadedConfig as LoadedConfig,
    NodeConfig as NodeConfig,
    Peer as Peer,
    format_peers as format_peers,
    java_properties_of as java_properties_of,
    load_config as load_config,
    parse_peers as parse_peers,
)
from ._node import ControllerNode as ControllerNode, RequestFailed as RequestFailed
from ._run import run_node as run_node, serve_until_signalled as serve_until_signalled, setup_logging as setup_logging

__all__ = [
    "OPTIONS",
    "ControllerNode",
    "LoadedConfig",
    "NodeConfig",
    "Peer",
    "RequestFailed",
    "format_peers",
    "java_properties_of",
    "load_config",
    "parse_peers",
    "run_node",
    "serve_until_signalled",
    "setup_logging",
]
