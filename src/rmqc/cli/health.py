"""`rmqc admin health`: the liveness and readiness checks of every node (the `/livez` and `/readyz`
checks of the metrics port, rmqc.replica._health), from the `health` of each node's
RMQC_NODE_STATUS answer; only the nodes given are asked (a probe of one node asks that node).

Exit codes: 0 every node answered and is ready (the checks given with `--exclude` left out); 1 a
node is not ready, or did not answer while another did; 3 no node answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from rmqc.cli._render import ExitCode, fail
from rmqc.cli.admin import DEFAULT_CONTROLLERS, ControllersOption, JsonOption, parse_controllers, security_options

__all__ = ["health_command", "node_health"]

HEALTH_TIMEOUT_MS = 2000  # one node's answer (connect included); a slower node counts as not answering


def node_health(view: dict[str, Any], exclude: Sequence[str] = ()) -> dict[str, Any]:
    """One node's health from its status view: {"address", "nodeId", "ready", "live", "checks"}
    (`error` instead of checks when it did not answer, or answered without them: not an rmqc node
    of this version)."""
    status = view.get("status")
    address = view["address"]
    if status is None:
        return {"address": address, "nodeId": None, "ready": False, "live": False, "error": view.get("error")}
    checks = status.get("health")
    if checks is None:
        return {"address": address, "nodeId": status.get("nodeId"), "ready": False, "live": False,
                "error": "this node reports no health checks (a Java controller, or an older rmqc)"}
    from rmqc.replica import LIVENESS_CHECKS

    counted = [check for check in checks if check["check"] not in exclude]
    return {"address": address, "nodeId": status.get("nodeId"),
            "ready": all(check["ok"] for check in counted),
            "live": all(check["ok"] for check in counted if check["check"] in LIVENESS_CHECKS),
            "checks": [{**check, "excluded": check["check"] in exclude} for check in checks]}


def health_command(
    controllers: ControllersOption = DEFAULT_CONTROLLERS,
    exclude: Annotated[list[str] | None, typer.Option(
        "--exclude", help="leave this check out of the verdict (repeatable), as /readyz?exclude=NAME")] = None,
    as_json: JsonOption = False,
) -> None:
    """Liveness and readiness checks of every node ([+] passed, [-] failed): loop, disk, leader, lag,
    disk_full, repairing, voter."""
    import trio

    from rmqc.cli.status import fetch_node_views
    from rmqc.client import ControllerClient

    addresses = parse_controllers(controllers)

    async def main() -> list[dict[str, Any]]:
        async with ControllerClient(addresses, timeout_ms=HEALTH_TIMEOUT_MS, max_retries=1,
                                    **security_options()) as client:
            return await fetch_node_views(client, addresses, named_members=False)

    reports = [node_health(view, exclude or ()) for view in trio.run(main)]
    if as_json:
        from rmqc.cli._render import emit_json

        emit_json(reports)
    else:
        _render(reports)
    answered = [report for report in reports if "checks" in report]
    if not answered:
        fail(ExitCode.UNREACHABLE, f"no controller answered ({', '.join(r['address'] for r in reports)})",
             hint="check that these nodes run and that the addresses are right")
    not_ready = [report for report in reports if not report["ready"]]
    if not_ready:
        fail(ExitCode.PROBLEMS_FOUND, "not ready: " + ", ".join(
            f"{report['nodeId'] or report['address']} ({_why(report)})" for report in not_ready),
             hint="the failed checks above say why; docs/operations.md, \"Health endpoints\", says what to do")


def _why(report: dict[str, Any]) -> str:
    if "checks" not in report:
        return str(report.get("error"))
    return ", ".join(check["check"] for check in report["checks"] if not check["ok"] and not check["excluded"])


def _render(reports: list[dict[str, Any]]) -> None:
    from rich.markup import escape

    from rmqc.cli._render import console

    out = console()
    for report in reports:
        name = f"{report['nodeId']} at {report['address']}" if report["nodeId"] else report["address"]
        verdict = "[bold green]ready[/]" if report["ready"] else "[bold red]not ready[/]"
        out.print(f"{escape(name)}: {verdict}")
        if "checks" not in report:
            out.print(f"  [red]{escape(str(report.get('error')))}[/]")
            continue
        for check in report["checks"]:
            if check["excluded"]:
                out.print(f"  \\[+]{check['check']} excluded: {escape(check['detail'])}", highlight=False)
            elif check["ok"]:
                out.print(f"  [green]\\[+][/]{check['check']} ok: {escape(check['detail'])}", highlight=False)
            else:
                out.print(f"  [red]\\[-]{check['check']} failed[/]: {escape(check['detail'])}", highlight=False)
