"""What every rmqc command has in common: one meaning per short option, --version, help that
lists what a command accepts."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from rmqc import __version__
from rmqc.brokersim._control import _COMMANDS
from rmqc.cli._exit import ExitCode
from rmqc.cli.main import app, typer_app
from rmqc.node._node import EXIT_STORAGE_FAILED


def _commands(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


def test_short_options_mean_one_thing() -> None:
    """-c is only `serve -c controller.conf` (as the Java controller's); the controllers are -a
    (as mqadmin's) on every command that takes them."""
    for path, command in _commands(typer.main.get_command(typer_app())):
        for param in getattr(command, "params", []):
            if "--controllers" in param.opts:
                assert "-a" in param.opts, path
            assert "-c" not in param.opts, (path, param.opts)  # serve parses its own options


def test_every_admin_command_takes_the_controllers_and_json() -> None:
    """Issue 16: `-a`/`--controllers` (or RMQC_CONTROLLERS) and `--json` on every `rmqc admin` leaf."""
    leaves = [(path, command) for path, command in _commands(typer.main.get_command(typer_app()))
              if path[:1] == ("admin",) and not getattr(command, "commands", None)]
    assert {path for path, _ in leaves} >= {("admin", "transfer-leader"), ("admin", "snapshot", "save"),
                                            *(("admin", "members", name)
                                              for name in ("list", "add", "promote", "remove", "replace"))}
    for path, command in leaves:
        options = {opt: param for param in command.params for opt in param.opts}
        assert "-a" in options and "--json" in options, path
        assert options["-a"].envvar == "RMQC_CONTROLLERS", path


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"rmqc {__version__}\n")


def test_sim_brokers_help_lists_its_interactive_commands() -> None:
    result = CliRunner().invoke(app, ["sim", "brokers", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for command in [*_COMMANDS, "quit"]:
        assert f" {command}" in text, command


def test_the_readme_exit_code_table_is_the_codes() -> None:
    """One table in the README; every code in it is an ExitCode, and every ExitCode is in it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("### Exit codes", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    assert [int(code) for code, _meaning, _commands in rows] == sorted({int(code) for code in ExitCode})
    meanings = {int(code): meaning for code, meaning, _ in rows}
    assert "no controller answered" in meanings[ExitCode.UNREACHABLE]
    assert "not an rmqc data directory" in meanings[ExitCode.NOT_A_DATA_DIR]
    assert "in use by a running node" in meanings[ExitCode.NODE_RUNNING]
    assert ExitCode.STORAGE_FAILED == EXIT_STORAGE_FAILED  # the node's own constant (no CLI import there)


def test_help_shows_what_to_type_not_python_types() -> None:
    """Every command's help (serve's is argparse's, tested in test_serve_entry)."""
    for path, _command in _commands(typer.main.get_command(typer_app())):
        if path[:1] == ("serve",):
            continue
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=160)
        assert result.exit_code == 0, path
        for python_label in ("<bool>", "<str>", "<int>", "<float>", "<path>", "<list[", "{"):
            assert python_label not in result.stdout, (path, python_label, result.stdout)


def _leaves() -> list[tuple[tuple[str, ...], object]]:
    return [(path, command) for path, command in _commands(typer.main.get_command(typer_app()))
            if path and not getattr(command, "commands", None)]


def test_every_command_takes_h_as_help() -> None:
    """`rmqc -h` was refused while `rmqc serve -h` worked."""
    for path, _command in _commands(typer.main.get_command(typer_app())):
        short = CliRunner().invoke(app, [*path, "-h"], terminal_width=160)
        long = CliRunner().invoke(app, [*path, "--help"], terminal_width=160)
        assert (short.exit_code, long.exit_code) == (0, 0), (path, short.output)
        assert short.stdout == long.stdout and "Usage" in short.stdout.replace("usage", "Usage"), path


def test_short_version() -> None:
    result = CliRunner().invoke(app, ["-V"])
    assert (result.exit_code, result.stdout) == (0, f"rmqc {__version__}\n")


def test_a_misspelled_option_exits_2_naming_the_option_on_every_command() -> None:
    """Click's commands say "Did you mean"/"Possible options"; serve (argparse) says it too."""
    for path, command in _leaves():
        if path == ("serve",):
            continue
        options = sorted(opt for param in getattr(command, "params", []) for opt in param.opts
                         if opt.startswith("--") and len(opt) > 4)
        assert options, path
        result = CliRunner().invoke(app, [*path, options[0][:-1] + "x"], terminal_width=200)
        assert result.exit_code == ExitCode.USAGE, (path, result.output)
        assert options[0] in result.output, (path, result.output)
    serve = CliRunner().invoke(app, ["serve", "--data-dri", "d"])
    assert serve.exit_code == ExitCode.USAGE
    assert "unrecognized arguments: --data-dri d (did you mean --data-dir?)" in serve.output


def test_every_command_that_reports_takes_json() -> None:
    """`--json` on every command that prints a result (docs/operations.md says every command); not
    on those that run until stopped (serve, dev cluster, sim brokers, chaos run) or write reports
    (analyze)."""
    long_running = {("serve",), ("dev", "cluster"), ("sim", "brokers"), ("chaos", "run"), ("analyze",)}
    for path, command in _leaves():
        if path in long_running:
            continue
        options = {opt for param in getattr(command, "params", []) for opt in param.opts}
        assert "--json" in options, path
