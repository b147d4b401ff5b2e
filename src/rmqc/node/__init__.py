"""rmqc.node: the Trio shell that runs one controller node (configuration, peer transport, driver,
remoting server). Only this package, client/, cli/ and testing/ import trio."""

from ._config import (
    OPTIONS as OPTIONS,
    LoadedConfig as LoadedConfig,
    NodeConfig as NodeConfig,
    Peer as Peer,
    format_peers as format_peers,
    load_config as load_config,
    parse_peers as parse_peers,
)
