"""rmqc.config: a node's configuration, pure (no Trio, nothing of the rmqc.node shell): the table of
options, the sources it is read from (TOML, Java controller properties, environment, flags), the
frozen `NodeConfig` with its checks, and the `peers` syntax. `rmqc serve` (rmqc.node) and the
simulator (rmqc.testing) build the same NodeConfig from here."""

from ._node_config import (
    OPTIONS as OPTIONS,
    LoadedConfig as LoadedConfig,
    NodeConfig as NodeConfig,
    Peer as Peer,
    format_peers as format_peers,
    is_loopback as is_loopback,
    java_properties_of as java_properties_of,
    load_config as load_config,
    parse_java_properties as parse_java_properties,
    parse_peers as parse_peers,
)

__all__ = [
    "OPTIONS",
    "LoadedConfig",
    "NodeConfig",
    "Peer",
    "format_peers",
    "is_loopback",
    "java_properties_of",
    "load_config",
    "parse_java_properties",
    "parse_peers",
]
