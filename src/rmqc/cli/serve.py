"""`rmqc serve`: run one controller node until SIGINT/SIGTERM.

Parses flags, loads the configuration (docs/configuration.md), calls `rmqc.node.run_node`, and
prints one line "rmqc <id> serving on <host:port>" on stdout when the node listens.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

SET_HELP = "OPTION=VALUE for any option of docs/configuration.md (repeatable)"


def serve_command(
    node_id: Annotated[Optional[str], typer.Option("--id", help="this node's id (default n0)")] = None,
    peers: Annotated[Optional[str], typer.Option("--peers", help='voters, e.g. "n0-127.0.0.1:9878;n1-127.0.0.1:9868"')] = None,
    data_dir: Annotated[Optional[str], typer.Option("--data-dir", help="data directory (default ./rmqc-data)")] = None,
    group: Annotated[Optional[str], typer.Option("--group", help="Raft group name (default rmqc)")] = None,
    config_file: Annotated[Optional[str], typer.Option("--config", help="TOML configuration file")] = None,
    controller_conf: Annotated[Optional[str], typer.Option("-c", "--controller-conf",
                                                            help="Java controller.conf properties file")] = None,
    metrics_port: Annotated[Optional[int], typer.Option("--metrics-port", help="Prometheus port")] = None,
    log_format: Annotated[Optional[str], typer.Option("--log-format", help="text or json")] = None,
    settings: Annotated[Optional[list[str]], typer.Option("--set", help=SET_HELP)] = None,
) -> None:
    """Run one rmqc controller node (no arguments: n0 on 127.0.0.1:9878, data in ./rmqc-data)."""
    from rmqc.errors import ConfigError
    from rmqc.node import load_config, run_node, setup_logging

    flags = {"node_id": node_id, "peers": peers, "data_dir": data_dir, "group": group,
             "metrics_port": metrics_port, "log_format": log_format}
    try:
        flags.update(_parse_settings(settings or []))
        loaded = load_config(toml_path=config_file, java_properties_path=controller_conf, flags=flags)
    except ConfigError as error:
        typer.echo(f"rmqc serve: {error}", err=True)
        raise typer.Exit(2) from None
    setup_logging(loaded.config.log_format)
    for warning in loaded.warnings:
        typer.echo(f"rmqc serve: warning: {warning}", err=True)
    raise typer.Exit(run_node(loaded.config))


def _parse_settings(settings: list[str]) -> dict[str, str]:
    from rmqc.errors import ConfigError

    values: dict[str, str] = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals:
            raise ConfigError(f"--set {setting!r}: expected OPTION=VALUE")
        values[name.strip()] = value
    return values
