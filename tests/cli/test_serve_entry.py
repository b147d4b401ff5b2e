"""`rmqc serve` is reached without Typer/Click/Rich (restart time), and parses the same options
whichever way it is reached: the console script's fast path or the Typer app (CliRunner)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rmqc.cli.main import app
from rmqc.cli.serve import build_parser

# What `rmqc serve` must not import: the other commands' UI and analysis stacks, and cattrs (the
# command codec's former dependency); each costs tens of ms of every restart.
NOT_ON_THE_SERVE_PATH = ("typer", "click", "rich", "rich_argparse", "cattrs", "pyspark", "pandas", "pyarrow")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_serve_path_imports_no_cli_or_analysis_stack() -> None:
    probe = run_python("import sys\nimport rmqc.cli.main, rmqc.cli.serve, rmqc.node\n"
                       "rmqc.cli.serve.build_parser().parse_args(['--id', 'n0'])\nprint(' '.join(sys.modules))")
    loaded = set(probe.stdout.split())
    assert probe.returncode == 0, probe.stderr
    assert "rmqc.node" in loaded
    assert [name for name in NOT_ON_THE_SERVE_PATH if name in loaded] == []


def test_serve_through_the_console_entry_exits_with_the_commands_code() -> None:
    code = "import sys\nfrom rmqc.cli.main import app\nsys.argv = ['rmqc', 'serve', '--set', 'tick_ms']\napp()"
    result = run_python(code)
    assert result.returncode == 2
    assert "rmqc serve: --set 'tick_ms': expected OPTION=VALUE" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_help_through_the_console_entry_does_not_start_a_node() -> None:
    result = run_python("import sys\nfrom rmqc.cli.main import app\nsys.argv = ['rmqc', 'serve', '--help']\napp()")
    assert result.returncode == 0
    assert "--data-dir" in result.stdout and "--controller-conf" in result.stdout


def test_serve_help_is_rich_as_the_other_commands_help() -> None:
    code = "import sys\nfrom rmqc.cli.main import app\nsys.argv = ['rmqc', 'serve', '--help']\napp()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "120"})
    assert result.returncode == 0
    assert "\x1b[" in result.stdout  # styled by Rich (rich_argparse), not argparse's plain text
    assert "--data-dir DIR" in re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--metrics-port", "soon"], "invalid int value"), (["--data", "d"], "unrecognized arguments"),
     (["--peers"], "expected one argument")],
)
def test_a_bad_serve_command_line_exits_2_naming_the_problem(args: list[str], message: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_serve_options_parse_into_the_flags_the_node_config_reads() -> None:
    args = build_parser().parse_args(["--id", "n1", "--peers", "n1-127.0.0.1:1", "--data-dir", "d", "-c", "x.conf",
                                      "--metrics-port", "9100", "--set", "a=1", "--set", "b=2=3"])
    assert (args.node_id, args.peers, args.data_dir, args.controller_conf) == ("n1", "n1-127.0.0.1:1", "d", "x.conf")
    assert args.metrics_port == 9100 and args.settings == ["a=1", "b=2=3"]
    joining = build_parser().parse_args(["--id", "n3", "--listen", "127.0.0.1:9", "--join", "127.0.0.1:1"])
    assert (joining.listen, joining.join_address) == ("127.0.0.1:9", "127.0.0.1:1")


def test_serve_through_typer_passes_its_arguments_to_the_same_parser() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "--controller-conf" in result.output
    bad = CliRunner().invoke(app, ["serve", "--set", "oops"])
    assert bad.exit_code == 2 and "expected OPTION=VALUE" in bad.output


def test_the_typer_app_still_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("serve", "log", "analyze", "admin", "status", "dev", "sim"):
        assert command in result.output


def test_serve_leaves_the_garbage_collector_as_it_found_it(capsys: pytest.CaptureFixture[str]) -> None:
    import gc

    from rmqc.cli.serve import serve_main

    assert gc.isenabled()
    assert serve_main(["--set", "no-equals-sign"]) == 2
    assert gc.isenabled()
    gc.disable()
    try:
        assert serve_main(["--set", "no-equals-sign"]) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert "expected OPTION=VALUE" in capsys.readouterr().err
