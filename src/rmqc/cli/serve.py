"""`rmqc serve`: run one controller node until SIGINT/SIGTERM.

Parses flags, loads the configuration (docs/configuration.md), calls `rmqc.node.run_node`, and
prints one line "rmqc <id> serving on <host:port>" on stdout when the node listens.

This is the command on a restart's critical path (design target: serving again within 1 s of a
restart), so it is parsed with argparse and reached from the console script without Typer, Click or
Rich (see `rmqc.cli.main`); it imports nothing but the node. The options are written once, here:
`rmqc serve --help` is this parser's help whichever way the command is reached.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from rmqc._gc import collector_paused, tune_for_serving

from ._exit import ExitCode

SUMMARY = "Run one rmqc controller node (no arguments: n0 on 127.0.0.1:9878, data in ./rmqc-data)."
SET_HELP = "OPTION=VALUE for any option of docs/configuration.md (repeatable)"


class _Parser(argparse.ArgumentParser):
    """Help and usage in the Rich style of the other commands. rich_argparse (~12 ms of imports)
    is loaded only to print them: argparse also builds formatters while options are added, and
    that must stay on the plain, already imported one (the restart path)."""

    _checking = True  # until help or usage is printed

    def _get_formatter(self) -> argparse.HelpFormatter:
        return argparse.HelpFormatter(self.prog) if self._checking else super()._get_formatter()

    def format_help(self) -> str:
        return self._formatted(super().format_help)

    def format_usage(self) -> str:
        return self._formatted(super().format_usage)

    def error(self, message: str) -> NoReturn:
        """argparse's usage error, with the nearest option for a misspelled one (as the Click
        commands say it: `--data-dri` -> did you mean --data-dir?)."""
        if message.startswith("unrecognized arguments: "):
            import difflib

            known = [option for action in self._actions for option in action.option_strings]
            for word in message.removeprefix("unrecognized arguments: ").split():
                nearest = difflib.get_close_matches(word.split("=", 1)[0], known, n=1) if word.startswith("--") else []
                if nearest:
                    message += f" (did you mean {nearest[0]}?)"
                    break
        super().error(message)

    def _formatted(self, format_text: Callable[[], str]) -> str:
        from rich_argparse import RichHelpFormatter

        self.formatter_class, self._checking = RichHelpFormatter, False
        return format_text()


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: an abbreviated option is refused, as the other (Click) commands refuse it.
    parser = _Parser(prog="rmqc serve", description=SUMMARY, allow_abbrev=False)
    parser.add_argument("--id", dest="node_id", metavar="ID", help="this node's id (default n0)")
    parser.add_argument("--peers", metavar="ID-HOST:PORT;...",
                        help='every voter, e.g. "n0-127.0.0.1:9878;n1-127.0.0.1:9868"')
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="this node's address (default: its entry in --peers; enough alone with --join)")
    parser.add_argument("--join", dest="join_address", metavar="ADDRESS",
                        help="host:port of any member: an empty node asks the group to add it as a learner")
    parser.add_argument("--data-dir", metavar="DIR", help="data directory (default ./rmqc-data)")
    parser.add_argument("--group", metavar="NAME", help="Raft group name (default rmqc)")
    parser.add_argument("--config", dest="config_file", metavar="FILE", help="TOML configuration file")
    parser.add_argument("-c", "--controller-conf", metavar="FILE",
                        help="a Java controller's controller.conf (as `mqcontroller -c`)")
    parser.add_argument("--metrics-port", type=int, metavar="PORT", help="Prometheus port")
    parser.add_argument("--log-format", metavar="text|json", help="stderr log lines (default text)")
    parser.add_argument("--repair", action="store_true",
                        help="a data directory found damaged rejoins its cluster: the damaged files are kept "
                             "aside, the node votes again once it caught up (docs/operations.md)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="OPTION=VALUE",
                        help=SET_HELP)
    return parser


def serve_main(argv: Sequence[str]) -> int:
    """`rmqc serve ARGV...`: the process exit code (argparse exits 2 itself on a bad command line)."""
    args = build_parser().parse_args(list(argv))
    # the imports build ~30,000 long-lived objects and no garbage: the collector would run ~80
    # times over them meanwhile (3-5 % of the import time)
    with collector_paused():
        from rmqc.config import load_config
        from rmqc.errors import ConfigError
        from rmqc.node import run_node, setup_logging
    flags = {"node_id": args.node_id, "peers": args.peers, "listen": args.listen, "join_address": args.join_address,
             "data_dir": args.data_dir, "group": args.group,
             "metrics_port": args.metrics_port, "log_format": args.log_format}
    try:
        flags.update(_parse_settings(args.settings))
        loaded = load_config(toml_path=args.config_file, java_properties_path=args.controller_conf, flags=flags)
    except ConfigError as error:
        print(f"rmqc serve: {error}", file=sys.stderr)
        return ExitCode.USAGE
    setup_logging(loaded.config.log_format)
    for warning in loaded.warnings:
        print(f"rmqc serve: warning: {warning}", file=sys.stderr)
    tune_for_serving()
    return run_node(loaded.config, repair=args.repair)




def _parse_settings(settings: list[str]) -> dict[str, str]:
    from rmqc.errors import ConfigError

    values: dict[str, str] = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals:
            raise ConfigError(f"--set {setting!r}: expected OPTION=VALUE")
        values[name.strip()] = value
    return values
