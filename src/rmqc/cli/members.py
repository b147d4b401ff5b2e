"""`rmqc admin members`: the controller group's membership (rmqc only; the Java controller's is
fixed at start-up).

    rmqc admin members list                        60004: id, address, voter/learner, match, lag, leader
    rmqc admin members add ID HOST:PORT            60005: joins as a learner (start it with --join)
    rmqc admin members promote ID                  60006: a caught-up learner becomes a voter
    rmqc admin members remove ID                   60007: leaves (the leader hands over first)
    rmqc admin members replace OLD NEW HOST:PORT   add, catch up, promote, remove OLD

Only the leader decides; the client finds it (any controller given will do). Each change is
answered once it is committed and applied. Refusals (another change pending, the last voter, a
learner that has not caught up, an unknown id, an address in use) exit 1 with the leader's remark
on stderr; nothing changed. docs/operations.md, "Changing the membership".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from rmqc.cli._render import ExitCode, fail
from rmqc.cli.admin import (
    DEFAULT_CONTROLLERS,
    ControllersOption,
    JsonOption,
    TimeoutOption,
    parse_controllers,
    run_with_client,
)

__all__ = ["members_app"]

members_app = typer.Typer(help="List, add, promote, remove or replace controller nodes.", no_args_is_help=True)
IdArgument = Annotated[str, typer.Argument(help="node id (as `rmqc serve --id`)", show_default=False)]
AddressArgument = Annotated[str, typer.Argument(help="its host:port (as `rmqc serve --listen`)", show_default=False)]
# A change is answered within the leader's request_timeout_ms (5 s by default); removing the leader
# takes a leadership transfer too: wait a little longer than both.
CHANGE_TIMEOUT_MS = 12_000
CatchUpOption = Annotated[float, typer.Option("--catch-up-timeout-s",
                                              help="replace: how long the new node may take to catch up")]


def _change(controllers: str, what: str, call: Callable[[Any], Awaitable[Any]], as_json: bool,
            timeout_ms: int) -> None:
    """One membership request through the leader: its change body, or exit 1 with the remark."""
    import orjson

    from rmqc.cli._render import console, controller_refused, emit_json

    answer = run_with_client(parse_controllers(controllers), call, timeout_ms=timeout_ms)
    if answer.code != 0:
        controller_refused(answer, what, as_json=as_json)
    change = orjson.loads(answer.body or b"{}")
    if as_json:
        emit_json(change)
    else:
        console().print(_change_text(change), markup=False)


def _change_text(change: dict[str, Any]) -> str:
    done = {"add_learner": "added as a learner", "promote": "promoted to voter", "remove": "removed"}
    kind = str(change.get("change"))
    voters, learners = change.get("voters") or [], change.get("learners") or []
    return (f"{change.get('id')} {done.get(kind, kind)} (index {change.get('index')}); voters "
            f"{', '.join(voters) or 'none'}; learners {', '.join(learners) or 'none'}")


@members_app.command("list")
def list_command(controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                 timeout_ms: TimeoutOption = 3000) -> None:
    """Every member as the leader knows it: id, address, voter or learner, match index, lag, leader."""
    from rmqc.cli._render import controller_refused, emit_json, render_members
    from rmqc.client import members_of

    answer = run_with_client(parse_controllers(controllers), lambda client: client.list_members(),
                             timeout_ms=timeout_ms)
    if answer.code != 0:
        controller_refused(answer, "members list", as_json=as_json)
    rows = members_of(answer)
    if as_json:
        emit_json(rows)
    else:
        render_members(rows)


@members_app.command("add")
def add_command(node_id: IdArgument, address: AddressArgument, controllers: ControllersOption = DEFAULT_CONTROLLERS,
                as_json: JsonOption = False, timeout_ms: TimeoutOption = CHANGE_TIMEOUT_MS) -> None:
    """Add a node as a learner (it gets the log but no vote); start it with `rmqc serve --id ID
    --listen ADDRESS --join ANY-MEMBER`, then `promote` it once `list` shows it caught up."""
    _check_address(address)
    _change(controllers, f"members add {node_id}", lambda client: client.add_member(node_id, address), as_json,
            timeout_ms)


@members_app.command("promote")
def promote_command(node_id: IdArgument, controllers: ControllersOption = DEFAULT_CONTROLLERS,
                    as_json: JsonOption = False, timeout_ms: TimeoutOption = CHANGE_TIMEOUT_MS) -> None:
    """Make a learner a voter; refused while it lags behind the leader."""
    _change(controllers, f"members promote {node_id}", lambda client: client.promote_member(node_id), as_json,
            timeout_ms)


@members_app.command("remove")
def remove_command(node_id: IdArgument, controllers: ControllersOption = DEFAULT_CONTROLLERS,
                   as_json: JsonOption = False, timeout_ms: TimeoutOption = CHANGE_TIMEOUT_MS) -> None:
    """Remove a voter or learner (the leader first hands its leadership to another voter); then
    stop the removed node's process."""
    _change(controllers, f"members remove {node_id}", lambda client: client.remove_member(node_id), as_json,
            timeout_ms)


@members_app.command("replace")
def replace_command(old: Annotated[str, typer.Argument(help="the voter to replace", show_default=False)],
                    new: Annotated[str, typer.Argument(help="the new node's id", show_default=False)],
                    address: AddressArgument, controllers: ControllersOption = DEFAULT_CONTROLLERS,
                    as_json: JsonOption = False, timeout_ms: TimeoutOption = CHANGE_TIMEOUT_MS,
                    catch_up_timeout_s: CatchUpOption = 60.0) -> None:
    """Replace voter OLD by NEW at ADDRESS: add NEW as a learner, wait until it has caught up,
    promote it, remove OLD. Start NEW first (`rmqc serve --id NEW --listen ADDRESS --join ...`).
    Stops at the step that fails and says what state it left; running it again resumes."""
    from rmqc.cli._render import console, emit_json, error_console
    from rmqc.client import MemberChangeFailed, replace_member

    _check_address(address)
    progress = (lambda _text: None) if as_json else (lambda text: error_console().print(text, markup=False))

    async def call(client: Any) -> tuple[list[dict[str, Any]], MemberChangeFailed | None]:
        try:
            return await replace_member(client, old, new, address, catch_up_timeout_s=catch_up_timeout_s,
                                        progress=progress), None
        except MemberChangeFailed as failure:
            return [], failure

    steps, failure = run_with_client(parse_controllers(controllers), call, timeout_ms=timeout_ms)
    if failure is not None:
        if as_json:
            emit_json({"replaced": False, "step": failure.step, "reason": failure.reason, "left": failure.left})
        fail(ExitCode.REFUSED, f"members replace {old} {new}: {failure.step} failed: {failure.reason}",
             hint=failure.left)
    if as_json:
        emit_json({"replaced": True, "old": old, "new": new, "address": address, "steps": steps})
    else:
        for change in steps:
            console().print(_change_text(change), markup=False)
        console().print(f"{old} replaced by {new} at {address}", markup=False)


def _check_address(address: str) -> None:
    from rmqc.client._address import parse_address
    from rmqc.errors import ConfigError

    try:
        parse_address(address)
    except ConfigError as error:
        fail(ExitCode.USAGE, str(error), hint="give the new node's host:port, as its `rmqc serve --listen`")
