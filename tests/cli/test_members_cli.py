"""`rmqc admin members` without a cluster: usage errors exit 2 before anything is sent, a replace
of a node by itself is refused (exit 1, nothing changed), unreachable controllers exit 3. The
commands against real processes: tests/cluster/test_members.py."""

from __future__ import annotations

from typer.testing import CliRunner

from rmqc.cli.main import app
from rmqc.testing.cluster import free_ports


def members(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["admin", "members", *args])
    return result.exit_code, result.stdout, result.stderr


def test_usage_errors_refusals_and_unreachable_controllers() -> None:
    (nobody,) = free_ports(1)
    controllers = ("-a", f"127.0.0.1:{nobody}", "--timeout-ms", "500")
    code, _, err = members("add", "n3", "not-an-address", *controllers)
    assert code == 2 and "host:port" in err and "rmqc serve --listen" in err
    assert members("replace", "n2", "n3", "10.0.0.1", *controllers)[0] == 2
    assert members("promote", *controllers)[0] == 2  # no id
    code, _, err = members("replace", "n1", "n1", "127.0.0.1:5", *controllers)
    assert code == 1 and "check failed: n1 cannot replace itself" in err and "Nothing changed" in err
    code, _, err = members("list", *controllers)
    assert code == 3 and f"no answer from 127.0.0.1:{nobody}" in err
