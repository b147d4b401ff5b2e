"""`rmqc admin`: the controller commands RocketMQ operators know from mqadmin (spec section 9).

    rmqc admin metadata          -a "a;b;c"            1005 (getControllerMetaData)
    rmqc admin sync-state-set    -a ... NAME... | --all 1006 (getSyncStateSet)
    rmqc admin elect-master      -a ... -n NAME -b ID  1002 designated (electMaster)
    rmqc admin clean-broker      -a ... -n NAME        1011 (cleanBrokerMetadata)
    rmqc admin config get|set    -a ...                1010/1009 on every node given
    rmqc admin transfer-leader   -a ... [--to ID]      60002 (rmqc only): move the Raft leadership
    rmqc admin snapshot save     -a ... FILE           60003 (rmqc only): back up the committed state

`-a` names the controllers as mqadmin's `-a` does (and as RMQC_CONTROLLERS); `-c` is only `rmqc
serve -c controller.conf`, the Java controller's file.

Rich tables by default, `--json` for scripts. Exit codes: 0 ok, 1 a controller said no (its remark
and what to do are printed), 2 usage, 3 no controller reachable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

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
from rmqc.remoting import RMQC_NODE_STATUS, RMQC_SNAPSHOT_SAVE, RMQC_TRANSFER_LEADER

__all__ = ["admin_app", "client_error_in", "parse_controllers", "run_with_client", "security_options"]

T = TypeVar("T")

admin_app = typer.Typer(help="Controller administration (mqadmin's controller commands).", no_args_is_help=True)
config_app = typer.Typer(help="Read or change controller configuration on every node given.", no_args_is_help=True)
admin_app.add_typer(config_app, name="config")
snapshot_app = typer.Typer(help="Back up the committed state (`rmqc log restore` starts a new group from it).",
                           no_args_is_help=True)
admin_app.add_typer(snapshot_app, name="snapshot")
# The ACL account and TLS of this invocation (set by the group's options, used by run_with_client).
_security: dict[str, Any] = {"credentials": None, "ssl_context": None}


@admin_app.callback()
def admin_options(access_key: AccessKeyOption = None, secret_key: SecretKeyOption = None, tls: TlsOption = False,
                  tls_ca: TlsCaOption = None, tls_cert: TlsCertOption = None, tls_key: TlsKeyOption = None) -> None:
    """Controller administration (mqadmin's controller commands)."""
    _security["credentials"] = credentials_of(access_key, secret_key)
    _security["ssl_context"] = tls_of(tls, tls_ca, tls_cert, tls_key)

ControllersOption = Annotated[str, typer.Option("--controllers", "-a", envvar="RMQC_CONTROLLERS",
                                                help='controllers, "host:port;host:port;..."')]
NodeOption = Annotated[str | None, typer.Option("--node", help="ask this node (host:port) instead of any/the leader")]
ConsistencyOption = Annotated[str | None, typer.Option("--consistency",
                                                          help="reads: linearizable, lease or stale")]
JsonOption = Annotated[bool, typer.Option("--json", help="print the answer as JSON")]
TimeoutOption = Annotated[int, typer.Option("--timeout-ms", help="bound on each call, retries included")]
DEFAULT_CONTROLLERS = "127.0.0.1:9878"
# A transfer is answered within the node's request_timeout_ms (5 s by default): wait a little longer.
TRANSFER_TIMEOUT_MS = 8000


def security_options() -> dict[str, Any]:
    """The ACL account and TLS context given to `rmqc admin` (ControllerClient keywords)."""
    return dict(_security)


def parse_controllers(text: str) -> list[str]:
    """`a;b;c` (mqadmin's -a syntax; commas accepted too) as a list; exit 2 if it names nothing."""
    from rmqc.client._address import parse_address
    from rmqc.errors import ConfigError

    addresses = [part.strip() for part in text.replace(",", ";").split(";") if part.strip()]
    if not addresses:
        fail(ExitCode.USAGE, f"--controllers {text!r} names no controller", hint='give "host:port;host:port"')
    for address in addresses:
        try:
            parse_address(address)
        except ConfigError as error:
            fail(ExitCode.USAGE, str(error), hint='give "host:port;host:port"')
    return addresses


def run_with_client(controllers: list[str], call: Callable[[Any], Awaitable[T]], *, timeout_ms: int = 3000,
                    consistency: str | None = None, node: str | None = None) -> T:
    """Run `call(client)` on a fresh ControllerClient; unreachable controllers exit 3, naming the
    `node` the call asked (`--node`) when there is one, else the controllers."""
    import trio

    from rmqc.client import CONSISTENCY_LEVELS, ClientError, ControllerClient

    if consistency is not None and consistency not in CONSISTENCY_LEVELS:
        fail(ExitCode.USAGE, f"--consistency {consistency!r} is not one of {', '.join(sorted(CONSISTENCY_LEVELS))}")

    async def main() -> T:
        async with ControllerClient(controllers, timeout_ms=timeout_ms, consistency=consistency,
                                    **_security) as client:
            return await call(client)

    try:
        return trio.run(main)
    except (ClientError, BaseExceptionGroup) as raised:
        error = client_error_in(raised, ClientError)
        asked = node or ";".join(controllers)
        fail(ExitCode.UNREACHABLE, f"no answer from {asked}: {error}",
             hint="check that it runs (rmqc status) and that the address is right")


def client_error_in(raised: BaseException,
                    kind: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException:
    """The error of `kind` itself, also when Trio's nursery wrapped it in an exception group (any
    other error is raised again)."""
    if isinstance(raised, kind):
        return raised
    if isinstance(raised, BaseExceptionGroup):
        matched, _rest = raised.split(kind)
        if matched is not None:
            return client_error_in(matched.exceptions[0], kind)
    raise raised


def _body(answer: Any) -> Any:
    from rmqc.remoting import loads_fastjson

    return loads_fastjson(answer.body) if answer.body else None


@admin_app.command("metadata")
def metadata_command(controllers: ControllersOption = DEFAULT_CONTROLLERS, node: NodeOption = None,
                     consistency: ConsistencyOption = None, as_json: JsonOption = False,
                     timeout_ms: TimeoutOption = 3000) -> None:
    """Controller group, leader and peers (1005), as one node sees them (without --consistency, as
    Java answers: from that node's own view)."""
    from rmqc.cli._render import answer_json, controller_refused, emit_json, render_metadata

    addresses = parse_controllers(controllers)
    answer = run_with_client(addresses, lambda client: client.get_metadata(node), timeout_ms=timeout_ms,
                             consistency=consistency, node=node)
    if answer.code != 0:
        controller_refused(answer, "metadata", as_json=as_json)
    if as_json:
        emit_json(answer_json(answer))
    else:
        render_metadata(answer, node or "any controller")


@admin_app.command("sync-state-set")
def sync_state_set_command(names: Annotated[list[str] | None, typer.Argument(help="broker group names")] = None,
                           all_groups: Annotated[bool, typer.Option("--all", help="every broker group")] = False,
                           controllers: ControllersOption = DEFAULT_CONTROLLERS, node: NodeOption = None,
                           consistency: ConsistencyOption = None, as_json: JsonOption = False,
                           timeout_ms: TimeoutOption = 3000) -> None:
    """Master, epochs and replicas (in sync or not, alive or not) of broker groups (1006)."""
    from rmqc.cli._render import controller_refused, emit_json, render_sync_state_data

    if bool(names) == all_groups:
        fail(ExitCode.USAGE, "give broker group names or --all (not both)")
    addresses = parse_controllers(controllers)

    async def call(client: Any) -> tuple[Any, list[str]]:
        chosen = list(names or [])
        if all_groups:
            listing = await client.request(RMQC_NODE_STATUS, {"groupNames": True}, address=node, leader=node is None)
            if listing.code != 0:
                return listing, []
            chosen = _body(listing)["groupNames"]
            if not chosen:
                return None, []
        return await client.get_sync_state_data(chosen, address=node), chosen

    answer, chosen = run_with_client(addresses, call, timeout_ms=timeout_ms, consistency=consistency, node=node)
    if answer is None:
        table: dict[str, Any] = {}
    elif answer.code != 0:
        controller_refused(answer, "sync-state-set", as_json=as_json)
    else:
        table = (_body(answer) or {}).get("replicasInfoTable") or {}
    missing = sorted(set(chosen) - set(table))
    if as_json:
        emit_json({"replicasInfoTable": table, "asked": chosen} | ({"unknown": missing} if missing else {}))
    else:
        render_sync_state_data(table)
    if missing and not all_groups:  # with --json too: the same exit code and reason on stderr
        fail(ExitCode.REFUSED, f"unknown broker group(s): {', '.join(missing)}",
             hint="check the names with `rmqc admin sync-state-set --all`")


@admin_app.command("elect-master")
def elect_master_command(broker_name: Annotated[str, typer.Option("--broker-name", "-n", help="broker group")],
                         broker_id: Annotated[int, typer.Option("--broker-id", "-b", help="the broker to make master")],
                         cluster: Annotated[str, typer.Option("--cluster",
                                                              help="broker cluster name")] = "DefaultCluster",
                         controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                         timeout_ms: TimeoutOption = 3000) -> None:
    """Make a chosen broker master (1002 with designateElect=true); it must be alive and in sync."""
    from rmqc.cli._render import answer_json, controller_refused, emit_json, render_elected

    addresses = parse_controllers(controllers)
    answer = run_with_client(addresses,
                             lambda client: client.elect_master(cluster, broker_name, broker_id, designate=True),
                             timeout_ms=timeout_ms)
    if answer.code != 0:
        controller_refused(answer, f"elect-master {broker_name}/{broker_id}", as_json=as_json)
    body = _body(answer) or {}
    if as_json:
        emit_json(answer_json(answer, body))
        return
    members = (body.get("brokerMemberGroup") or {}).get("brokerAddrs") or {}
    render_elected(answer, cluster, broker_name, members)


@admin_app.command("clean-broker")
def clean_broker_command(broker_name: Annotated[str, typer.Option("--broker-name", "-n", help="broker group")],
                         broker_ids: Annotated[str | None, typer.Option(
                             "--broker-ids", "-b", help='ids "1;2" (default: the whole group)')] = None,
                         clean_living: Annotated[bool, typer.Option(
                             "--clean-living", "-l", help="also remove live brokers (the whole group)")] = False,
                         cluster: Annotated[str | None, typer.Option("--cluster", help="broker cluster name")] = None,
                         controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                         timeout_ms: TimeoutOption = 3000) -> None:
    """Remove brokers (or a whole group) from the controller's metadata (1011)."""
    from rmqc.cli._render import answer_json, console, controller_refused, emit_json

    ids = _parse_ids(broker_ids) if broker_ids is not None else None
    addresses = parse_controllers(controllers)
    answer = run_with_client(addresses,
                             lambda client: client.clean_broker_data(cluster, broker_name, ids, clean_living),
                             timeout_ms=timeout_ms)
    if answer.code != 0:
        controller_refused(answer, f"clean-broker {broker_name}", as_json=as_json)
    if as_json:
        emit_json(answer_json(answer))
    else:
        console().print(f"cleaned broker {broker_name} {'ids ' + broker_ids if broker_ids else '(whole group)'} "
                        f"from the controller metadata")


def _parse_ids(text: str) -> list[int]:
    parts = [part.strip() for part in text.split(";") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        fail(ExitCode.USAGE, f"--broker-ids {text!r} is not a list of ids like 1;2")
    return [int(part) for part in parts]


@admin_app.command("transfer-leader")
def transfer_leader_command(to: Annotated[str | None, typer.Option(
                                "--to", help="the voter to lead (default: the most up-to-date one)")] = None,
                            controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                            timeout_ms: TimeoutOption = TRANSFER_TIMEOUT_MS) -> None:
    """Move the Raft leadership to another voter; answered once the new leader serves writes."""
    import orjson

    from rmqc.cli._render import answer_json, console, controller_refused, emit_json

    addresses = parse_controllers(controllers)
    answer = run_with_client(addresses, lambda client: client.request(RMQC_TRANSFER_LEADER, {"to": to} if to else None),
                             timeout_ms=timeout_ms)
    if answer.code != 0:
        controller_refused(answer, f"transfer-leader{' --to ' + to if to else ''}", as_json=as_json)
    moved = orjson.loads(answer.body)
    if as_json:
        emit_json(answer_json(answer, moved))
    elif moved["from"] == moved["to"]:
        console().print(f"{moved['to']} is already the leader (term {moved['term']}); nothing to do")
    else:
        console().print(f"leadership moved from {moved['from']} to {moved['to']} (term {moved['term']}) "
                        f"in {moved['tookMs']} ms")


@snapshot_app.command("save")
def snapshot_save_command(file: Annotated[Path, typer.Argument(help="the file to write (replaced atomically)",
                                                               dir_okay=False)],
                          controllers: ControllersOption = DEFAULT_CONTROLLERS, node: NodeOption = None,
                          as_json: JsonOption = False, timeout_ms: TimeoutOption = 10_000) -> None:
    """Save the committed state at one index, with its membership, to a checksummed file (the
    leader's, or --node's, applied state; online: the node keeps serving)."""
    from rmqc.cli._render import console, controller_refused, emit_json
    from rmqc.errors import RmqcError
    from rmqc.storage import decode_snapshot_file, write_snapshot_file

    addresses = parse_controllers(controllers)
    answer = run_with_client(addresses, lambda client: client.request(RMQC_SNAPSHOT_SAVE, None, address=node,
                                                                      leader=node is None),
                             timeout_ms=timeout_ms, node=node)
    if answer.code != 0:
        controller_refused(answer, "snapshot save", as_json=as_json)
    try:
        write_snapshot_file(file, answer.body or b"")
    except (RmqcError, OSError) as error:
        fail(ExitCode.REFUSED, f"snapshot not written to {file}: {error}",
             hint="retry; check the directory's space and permissions")
    saved = decode_snapshot_file(answer.body or b"")
    summary = {"file": str(file), "index": saved.meta.index, "term": saved.meta.term,
               "voters": list(saved.meta.conf_state.voters), "learners": list(saved.meta.conf_state.learners),
               "bytes": len(answer.body or b""), **saved.origin}
    if as_json:
        emit_json(summary)
    else:
        console().print(f"saved index {saved.meta.index} (term {saved.meta.term}, voters "
                        f"{', '.join(saved.meta.conf_state.voters)}) from {saved.origin.get('nodeId')} to {file} "
                        f"({summary['bytes']} bytes)", markup=False)


@config_app.command("get")
def config_get_command(controllers: ControllersOption = DEFAULT_CONTROLLERS,
                       key: Annotated[str | None, typer.Option("--key", "-k", help="only this key")] = None,
                       as_json: JsonOption = False, timeout_ms: TimeoutOption = 3000) -> None:
    """Every setting of every node given (1010)."""
    from rmqc.cli._render import emit_json, render_config

    addresses = parse_controllers(controllers)
    key = None if key is None else resolve_config_key(key)
    per_node, failed = _on_every_node(addresses, lambda client, address: client.get_config(address), timeout_ms)
    from rmqc.remoting import loads_properties

    result: dict[str, Any] = {}
    for address, answer in per_node.items():
        result[address] = loads_properties(answer.body or b"") if answer.code == 0 else f"{answer.code} {answer.remark}"
    known = {name for values in result.values() if isinstance(values, dict) for name in values}
    if key is not None and known and key not in known:
        fail(ExitCode.USAGE, f"--key {key!r}: no node has that key{_did_you_mean(key, known)}",
             hint="`rmqc admin config get` lists every key with its value")
    if as_json:
        emit_json({address: ({k: v for k, v in values.items() if key is None or k == key}
                             if isinstance(values, dict) else {"error": values}) for address, values in result.items()})
    else:
        render_config(result, key)
    _exit_for_failures(per_node, failed)


@config_app.command("set")
def config_set_command(settings: Annotated[list[str], typer.Argument(help="KEY=VALUE (one or more)")],
                       controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                       timeout_ms: TimeoutOption = 3000) -> None:
    """Change settings (1009): one request to the leader, replicated to every node and logged once
    with who asked (mqadmin sends one to every controller, as Java's controllers do not share their
    settings; rmqc applies each, so that works too, logged once per request)."""
    from rmqc.cli._render import code_name, console, emit_json, hint_for

    properties = _parse_settings(settings)
    addresses = parse_controllers(controllers)
    answer = run_with_client(addresses, lambda client: client.update_config(None, properties), timeout_ms=timeout_ms)
    if as_json:
        emit_json({"code": answer.code, "remark": answer.remark, "properties": properties})
    if answer.code != 0:
        fail(ExitCode.REFUSED, f"the leader answered {code_name(answer.code)}: {answer.remark}",
             hint=hint_for(answer.code, answer.remark))
    if not as_json:
        out = console()
        out.print("updated on every node (one replicated change)")
        for key, value in properties.items():
            out.print(f"{key} : {value}")


def _parse_settings(settings: list[str]) -> dict[str, str]:
    properties: dict[str, str] = {}
    for setting in settings:
        key, equals, value = setting.partition("=")
        if not equals or not key.strip():
            fail(ExitCode.USAGE, f"{setting!r} is not KEY=VALUE")
        properties[resolve_config_key(key.strip())] = value
    return properties


def resolve_config_key(name: str) -> str:
    """The 1009/1010 key (Java's name) for `name`: a Java key as it is, an `rmqc serve` option
    (snake_case, docs/configuration.md) as its Java key. An option that has no Java key (fixed while
    the node runs), or a near miss of one, exits 2 saying so; any other name is left to the
    controller to judge (it names the nearest key it knows; a Java controller may know keys rmqc
    does not)."""
    from rmqc.config import OPTIONS
    from rmqc.controller._config import CONFIG_KEYS

    java_keys = {key.name for key in CONFIG_KEYS}
    if name in java_keys:
        return name
    options = {option.name: option.java_key for option in OPTIONS}
    if options.get(name):
        return str(options[name])
    fixed = {option for option, java_key in options.items() if java_key is None}
    option = name if name in fixed else _nearest(name, fixed)
    if option is not None:
        unknown = "" if option == name else f"unknown key {name!r} (did you mean {option!r}?): "
        fail(ExitCode.USAGE, f"{unknown}{option!r} is an option of `rmqc serve` that has no run-time key (it is "
                             "fixed while the node runs)",
             hint=f"set it when the node starts: rmqc serve --set {option}=VALUE (docs/configuration.md)")
    return name


def _nearest(name: str, known: set[str]) -> str | None:
    """The known name nearest to `name` ignoring case and underscores (tickMs, tickms: tick_ms), if any."""
    import difflib

    def folded(text: str) -> str:
        return text.replace("_", "").lower()

    by_folded = {folded(key): key for key in sorted(known)}
    nearest = difflib.get_close_matches(folded(name), list(by_folded), n=1, cutoff=0.8)
    return by_folded[nearest[0]] if nearest else None


def _did_you_mean(name: str, known: set[str]) -> str:
    nearest = _nearest(name, known)
    return f" (did you mean {nearest!r}?)" if nearest else ""


def _on_every_node(addresses: list[str], call: Callable[[Any, str], Awaitable[Any]], timeout_ms: int
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """`call(client, address)` on every node at once: answers, and the nodes that did not answer."""

    async def all_nodes(client: Any) -> tuple[dict[str, Any], dict[str, str]]:
        import trio

        from rmqc.client import ClientError

        answers: dict[str, Any] = {}
        failed: dict[str, str] = {}

        async def one(address: str) -> None:
            try:
                answers[address] = await call(client, address)
            except ClientError as error:
                failed[address] = str(error)

        async with trio.open_nursery() as nursery:
            for address in addresses:
                nursery.start_soon(one, address)
        return {a: answers[a] for a in addresses if a in answers}, failed

    return run_with_client(addresses, all_nodes, timeout_ms=timeout_ms)


def _exit_for_failures(per_node: dict[str, Any], failed: dict[str, str]) -> None:
    from rmqc.cli._render import code_name, hint_for

    for address, error in failed.items():
        if not per_node:
            fail(ExitCode.UNREACHABLE, f"{address}: {error}", hint="check that the controllers run (rmqc status)")
    if failed:
        fail(ExitCode.UNREACHABLE, "no answer from " + ", ".join(sorted(failed)),
             hint="the other nodes answered; retry for the missing ones")
    refused = {address: answer for address, answer in per_node.items() if answer.code != 0}
    if refused:
        address, answer = next(iter(refused.items()))
        fail(ExitCode.REFUSED, f"{address} answered {code_name(answer.code)}: {answer.remark}",
             hint=hint_for(answer.code, answer.remark))
