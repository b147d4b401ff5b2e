"""`rmqc events`: what one node saw happen, from its RMQC_EVENTS request (60008): failovers with
their reason, the candidates weighed and each step of their timeline, leader and membership changes,
alarms (docs/operations.md "Events"). Any node answers, a follower too, with its own events.

Without --follow it prints the events the node keeps and exits; with --follow it keeps asking
(a long poll: the node answers as soon as an event happens) until Ctrl-C. A reader that fell behind
the node's ring gets a line saying how many events it missed; a node that restarted starts over.
Exit codes: 0 done; 3 the node did not answer; 1 it refused (ACL) or failed the request.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

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

__all__ = ["events_command"]

# How long the node holds one --follow request open when nothing happens; the client waits longer.
FOLLOW_WAIT_MS = 10_000
REQUEST_TIMEOUT_MS = FOLLOW_WAIT_MS + 5_000


def events_command(
    controller: Annotated[str, typer.Option(
        "--controller", "--controllers", "-a", envvar="RMQC_CONTROLLERS",
        help='the node to ask, "host:port" (of a list, the first)')] = DEFAULT_CONTROLLERS,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing events as they happen, until Ctrl-C")]
    = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per event, one per line")] = False,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    tls: TlsOption = False,
    tls_ca: TlsCaOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
) -> None:
    """Failovers (why, candidates, timeline), leader and membership changes and alarms of one node."""
    import trio

    from rmqc.cli._render import render_event

    address = parse_controllers(controller)[0]
    security = {"credentials": credentials_of(access_key, secret_key),
                "ssl_context": tls_of(tls, tls_ca, tls_cert, tls_key)}
    emit = _json_line if as_json else render_event
    failure = None
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a --follow cleanly
        failure = trio.run(_stream, address, security, follow, emit)
    if failure is not None:
        code, message, hint = failure
        fail(code, message, hint=hint)


# Why the stream ended early: (exit code, message, what to do). Returned, not raised: raised inside
# the client's nursery it would arrive wrapped in an exception group.
Failure = tuple[ExitCode, str, str | None]


async def _stream(address: str, security: dict[str, Any], follow: bool, emit: Any) -> Failure | None:
    from rmqc.client import ClientError, ControllerClient

    after = 0
    async with ControllerClient([address], timeout_ms=REQUEST_TIMEOUT_MS, max_retries=1, **security) as client:
        while True:
            try:
                page = await _page(client, address, after, FOLLOW_WAIT_MS if follow else 0)
            except ClientError as error:
                return (ExitCode.UNREACHABLE, f"{address} did not answer the events request: {error}",
                        "check that the node runs and that the address is right")
            if isinstance(page, tuple):
                return page
            if page["lastSeq"] < after:  # the node restarted: its numbering starts again
                emit({"kind": "restarted", "node": address})
                after = 0
            if page["missed"]:
                emit({"kind": "missed", "count": page["missed"]})
            for event in page["events"]:
                emit(event)
            if page["events"]:
                after = page["events"][-1]["seq"]
            elif not follow:
                return None


async def _page(client: Any, address: str, after: int, wait_ms: int) -> dict[str, Any] | Failure:
    """The node's answer: its events after `after`, or why it refused."""
    import orjson

    from rmqc.cli._render import hint_for
    from rmqc.remoting import RMQC_EVENTS, ResponseCode

    answer = await client.request(RMQC_EVENTS, {"after": after, "waitMs": wait_ms}, address=address)
    if answer.code != ResponseCode.SUCCESS:
        code = ExitCode.UNREACHABLE if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED else ExitCode.REFUSED
        return (code, f"{address} answered the events request {answer.code}: {answer.remark}",
                hint_for(answer.code, answer.remark))
    page: dict[str, Any] = orjson.loads(answer.body or b"{}")
    return page


def _json_line(event: dict[str, Any]) -> None:
    import orjson

    typer.echo(orjson.dumps(event).decode())
