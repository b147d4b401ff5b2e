"""`rmqc status`: every node's role (learners too), term, commit/applied index, leader, replication
lag, broker groups, live brokers and alarms (a full disk), from the private RMQC_NODE_STATUS request
(60001) each node answers; members the nodes name that were not given are asked too. Under the
table: the learners, a pending membership change and a leadership transfer under way.

A node that does not know 60001 (a Java controller) is shown from its 1005 answer instead (role and
leader only). `--watch` redraws the table live. Exit codes (status_verdict): 0 every node answered
and one serves as leader; 3 no node answered, or none leads; 1 a leader serves but some node did not
answer, or every node refused the request (ACL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from rmqc.cli._credentials import (
    AccessKeyOption,
    SecretKeyOption,
    TlsCaOption,
    TlsCertOption,
    TlsKeyOption,
    TlsOption,
    credentials_of,
    tls_of,
)
from rmqc.cli._render import ExitCode, fail
from rmqc.cli.admin import DEFAULT_CONTROLLERS, parse_controllers

if TYPE_CHECKING:  # the client and its trio are imported when a command runs, not when the CLI starts
    from rmqc.client import ClientError
    from rmqc.remoting import RemotingCommand

__all__ = ["fetch_node_views", "status_command"]

WATCH_REFRESH_S = 1.0
STATUS_TIMEOUT_MS = 2000  # one node's answer (connect included); slower nodes show as not answering


async def fetch_node_views(client: Any, addresses: list[str], *, named_members: bool = True) -> list[dict[str, Any]]:
    """Ask every node at once, then (`named_members`) the members the nodes name that were not asked
    (a node added since the command line was written); one view per address: `status` (dict) or
    `error` (text)."""
    from functools import partial

    from rmqc.client import node_views

    view_of = partial(_view_of, client)
    views = await node_views(client, addresses, view_of)
    if not named_members:
        return views
    named = {address for view in views for address in ((view.get("status") or {}).get("members") or {}).values()}
    more = sorted(named - set(addresses))
    return views + (await node_views(client, more, view_of) if more else [])


async def _view_of(client: Any, address: str, answer: RemotingCommand | ClientError) -> dict[str, Any]:
    """A node's view from its answer to 60001, or from 1005 when it does not know 60001 (a Java
    controller), or why it could not be asked."""
    import orjson

    from rmqc.client import ClientError
    from rmqc.remoting import ResponseCode

    if isinstance(answer, ClientError):
        return _unreachable(address, answer)
    if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        try:
            return {"address": address, "status": await _status_from_metadata(client, address)}
        except ClientError as error:
            return _unreachable(address, error)
    if answer.code != ResponseCode.SUCCESS:
        return {"address": address, "error": f"answered {answer.code}: {answer.remark}", "refusedCode": answer.code}
    return {"address": address, "status": orjson.loads(answer.body or b"{}")}


def _unreachable(address: str, error: Exception) -> dict[str, Any]:
    return {"address": address, "error": f"unreachable: {_cause(error)}"}


def _cause(error: Exception) -> str:
    """Why a node could not be asked, in words (the last attempt's error, not the client's class)."""
    from rmqc.client import ConnectionLost, RequestTimeout, RetriesExhausted

    while isinstance(error, RetriesExhausted):
        error = error.last_error
    if isinstance(error, ConnectionLost):
        return "could not connect" if "connect failed" in str(error) else "connection lost"
    if isinstance(error, RequestTimeout):
        return f"no answer within {STATUS_TIMEOUT_MS} ms"
    return str(error) or type(error).__name__


async def _status_from_metadata(client: Any, address: str) -> dict[str, Any]:
    """What 1005 tells about a node that has no status request (a Java controller)."""
    answer = await client.get_metadata(address)
    is_leader = answer.ext("isLeader") == "true"
    return {"nodeId": "(1005 only)", "role": "leader" if is_leader else "follower", "servingAsLeader": is_leader,
            "leader": answer.ext("controllerLeaderId"), "peers": {}}


def status_command(
    controllers: Annotated[str, typer.Option(
        "--controllers", "-a", envvar="RMQC_CONTROLLERS",
        help='nodes to ask, "host:port;host:port" (or one node)')] = DEFAULT_CONTROLLERS,
    peers: Annotated[str | None, typer.Option(
        "--peers", help='instead of --controllers: the nodes as `rmqc serve --peers` names them, '
                        '"n0-host:port;n1-host:port" (plain host:port items too)')] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="refresh live until Ctrl-C")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the views as JSON")] = False,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    tls: TlsOption = False,
    tls_ca: TlsCaOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
) -> None:
    """Role, term, commit/applied, leader, lag, broker groups, live brokers and alarms of every node."""
    addresses = parse_controllers(controllers if peers is None else _addresses_of_peers(peers))
    security = {"credentials": credentials_of(access_key, secret_key),
                "ssl_context": tls_of(tls, tls_ca, tls_cert, tls_key)}
    if watch:
        _watch(addresses, security)
        return
    views = _fetch_once(addresses, security)
    if as_json:
        from rmqc.cli._render import emit_json

        emit_json(views)
    else:
        from rmqc.cli._render import render_status

        render_status(views)
    verdict = status_verdict(views)
    if verdict is not None:
        fail(*verdict[:2], hint=verdict[2])


def status_verdict(views: list[dict[str, Any]]) -> tuple[ExitCode, str, str] | None:
    """What is wrong (exit code, message, what to do), None when nothing is (README "Exit codes"):
    3 when no node answered or none names a serving leader (the group takes no writes); 1 when every
    node refused the request (ACL) or, with a leader, some node did not answer."""
    from rmqc.cli._render import hint_for

    answered = [view for view in views if "status" in view]
    refused = [view for view in views if "refusedCode" in view]
    silent = [view["address"] for view in views if "status" not in view and "refusedCode" not in view]
    if refused and not answered:
        first = refused[0]
        return (ExitCode.REFUSED, f"{', '.join(view['address'] for view in refused)} refused the status request: "
                f"{first['error']}", hint_for(first["refusedCode"], first["error"]))
    if not answered:
        return (ExitCode.UNREACHABLE, f"no controller answered ({', '.join(silent)})",
                "check that these nodes run and that the addresses are right; `rmqc dev cluster` starts a local "
                "cluster")
    leaders = [view for view in answered if view["status"].get("servingAsLeader")]
    if not leaders:
        return (ExitCode.UNREACHABLE, "no leader: no node serves as leader, so the group takes no writes",
                "a majority of the voters must run and reach each other: start the nodes that do not answer"
                + (f" ({', '.join(silent)})" if silent else "") + ", or look at their logs")
    if silent or refused:
        others = silent + [view["address"] for view in refused]
        return (ExitCode.PROBLEMS_FOUND, f"no status from {', '.join(others)} (the group has a leader and serves)",
                "check that these nodes run and reach the others; their rows above say why")
    return None


def _addresses_of_peers(text: str) -> str:
    """serve's `id-host:port` items as `host:port`; an item without an id is taken as it is."""
    from rmqc.config import parse_peers

    items = [item.strip() for item in text.split(";") if item.strip()]
    try:
        return ";".join(parse_peers(item)[0].address if "-" in item else item for item in items)
    except ValueError as error:
        fail(ExitCode.USAGE, f"--peers: {error}")


def _fetch_once(addresses: list[str], security: dict[str, Any]) -> list[dict[str, Any]]:
    import trio

    from rmqc.client import ControllerClient

    async def main() -> list[dict[str, Any]]:
        async with ControllerClient(addresses, timeout_ms=STATUS_TIMEOUT_MS, max_retries=1,
                                        **security) as client:
            return await fetch_node_views(client, addresses)

    return trio.run(main)


def _watch(addresses: list[str], security: dict[str, Any]) -> None:
    import signal

    import trio

    from rmqc.cli._render import LiveView, status_table
    from rmqc.client import ControllerClient

    async def refresh(live: LiveView, client: ControllerClient) -> None:
        while True:
            await trio.sleep(WATCH_REFRESH_S)
            live.update(status_table(await fetch_node_views(client, addresses)))

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with ControllerClient(addresses, timeout_ms=STATUS_TIMEOUT_MS, max_retries=1,
                                        **security) as client:
                with LiveView(status_table(await fetch_node_views(client, addresses))) as live:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(refresh, live, client)
                        async for _signal in signals:
                            break  # Ctrl-C ends the watch cleanly
                        nursery.cancel_scope.cancel()

    trio.run(main)
