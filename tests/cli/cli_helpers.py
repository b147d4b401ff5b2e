"""What several CLI test modules share."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from typer.testing import CliRunner

from rmqc.cli._exit import ExitCode
from rmqc.cli.main import app
from rmqc.launcher import poll_blocking

LEADER_WAIT_S = 10.0  # a single node leads once its log is applied, moments after it serves


def wait_serving_as_leader(node: str, args: Sequence[str] = (), env: dict[str, str] | None = None) -> None:
    """`rmqc status` (with `args`, `env`: TLS files, a signing key) until the node at `node` serves
    as leader. A node prints "serving on" moments before it leads; meanwhile it answers and status
    exits 3, "no leader" (README "Exit codes"). Any other answer fails at once."""
    runner = CliRunner()

    def serving_as_leader() -> bool | None:
        result = runner.invoke(app, ["status", "-a", node, "--json", *args], env=env)
        views = orjson.loads(result.stdout) if result.stdout else []
        assert views and "status" in views[0], (result.exit_code, result.stderr)  # it answered us
        if views[0]["status"].get("servingAsLeader"):
            assert result.exit_code == ExitCode.OK, result.stderr
            return True
        assert result.exit_code == ExitCode.UNREACHABLE and "no leader" in result.stderr, result.stderr
        return None

    poll_blocking(serving_as_leader, LEADER_WAIT_S,
                  lambda: AssertionError(f"{node} did not serve as leader within {LEADER_WAIT_S} s"))
