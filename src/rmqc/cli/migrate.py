"""`rmqc migrate from-java`: take over the broker groups of a running Java RocketMQ controller
(docs/operations.md "Migrating from the Java controller").

    rmqc migrate from-java --controllers "java1:9878;java2:9878" --to "rmqc1:9878,rmqc2:9878" \\
        --namesrv namesrv:9876 [--cluster C | --broker-name NAME ...] [--dry-run] [--json]

Reads every group from the Java controllers' leader (1006, 1004, 1012; the names from the
NameServer's 106 or --broker-name), writes them into rmqc as one replicated import (refused
unless rmqc holds no broker group yet, or exactly these already), then asks both sides again and
prints every difference. The ACL account and TLS options are rmqc's (as `rmqc admin`'s).

Exit codes: 0 imported and verified (or the dry run's plan), 1 rmqc refused or a difference was
found, 2 usage, 3 a controller or the NameServer did not answer.
"""

from __future__ import annotations

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
from rmqc.cli.admin import JsonOption, TimeoutOption, client_error_in, parse_controllers

__all__ = ["migrate_app"]

migrate_app = typer.Typer(help="Move to rmqc from another controller without re-registering brokers.",
                          no_args_is_help=True)


@migrate_app.callback()
def migrate_options() -> None:
    """Move to rmqc from another controller without re-registering brokers."""


@migrate_app.command("from-java")
def from_java_command(
    controllers: Annotated[str, typer.Option("--controllers", "-a",
                                             help='the Java controllers, "host:port;host:port"')],
    to: Annotated[str, typer.Option("--to", help='the rmqc nodes, "host:port,host:port"')],
    namesrv: Annotated[str | None, typer.Option(
        "--namesrv", "-n", help="a NameServer listing the broker groups (106); or give --broker-name")] = None,
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="only this cluster's groups (with --namesrv); the cluster of --broker-name")] = None,
    broker_names: Annotated[list[str] | None, typer.Option(
        "--broker-name", "-b", help="a broker group to migrate (repeat it); needs --cluster")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="read and show what would be imported; write nothing")
                       ] = False,
    as_json: JsonOption = False,
    timeout_ms: TimeoutOption = 10_000,
    access_key: AccessKeyOption = None, secret_key: SecretKeyOption = None, tls: TlsOption = False,
    tls_ca: TlsCaOption = None, tls_cert: TlsCertOption = None, tls_key: TlsKeyOption = None,
) -> None:
    """Import every broker group of the Java controllers into an empty rmqc cluster, exactly, and verify."""
    from rmqc.cli._render import emit_json, render_migration

    java_addresses, rmqc_addresses = parse_controllers(controllers), parse_controllers(to)
    if (namesrv is None) == (not broker_names):
        fail(ExitCode.USAGE, "give --namesrv (every group it lists) or --broker-name (not both)")
    if broker_names and not cluster:
        fail(ExitCode.USAGE, "--broker-name needs --cluster (1012 asks for the group's cluster)")
    security = {"credentials": credentials_of(access_key, secret_key),
                "ssl_context": tls_of(tls, tls_ca, tls_cert, tls_key)}
    migration = _run(java_addresses, rmqc_addresses, namesrv, cluster, broker_names or [], dry_run, timeout_ms,
                     security)
    if as_json:
        emit_json(_as_json(migration))
    else:
        render_migration(migration)
    if migration.differences:
        fail(ExitCode.PROBLEMS_FOUND, f"{len(migration.differences)} answer(s) differ between Java and rmqc",
             hint="see the differences above; a group that moved on in Java since the import needs rmqc emptied "
                  "(a fresh cluster) and the migration run again")


def _run(java_addresses: list[str], rmqc_addresses: list[str], namesrv: str | None, cluster: str | None,
         broker_names: list[str], dry_run: bool, timeout_ms: int, security: dict[str, Any]) -> Any:
    import trio

    from rmqc.client import ClientError, ControllerClient
    from rmqc.migrate import MigrationError, MigrationRefused, group_names_from_namesrv, migrate

    async def main() -> Any:
        async with ControllerClient(java_addresses, timeout_ms=timeout_ms) as java:
            if namesrv is not None:
                async with ControllerClient([namesrv], timeout_ms=timeout_ms) as names_client:
                    groups = await group_names_from_namesrv(names_client, namesrv, cluster)
            else:
                groups = dict.fromkeys(broker_names, str(cluster))
            if dry_run:
                return await migrate(java, None, groups, dry_run=True)
            async with ControllerClient(rmqc_addresses, timeout_ms=timeout_ms, **security) as rmqc:
                return await migrate(java, rmqc, groups)

    try:
        return trio.run(main)
    except (MigrationError, ClientError, BaseExceptionGroup) as raised:
        error = client_error_in(raised, (MigrationError, ClientError))
    if isinstance(error, MigrationRefused):
        from rmqc.cli._render import hint_for
        from rmqc.remoting import ResponseCode

        fresh = "import into a fresh rmqc cluster (no broker group registered)"
        fail(ExitCode.REFUSED, str(error), hint=fresh if error.code == ResponseCode.CONTROLLER_INVALID_REQUEST
             else hint_for(error.code, error.remark))
    if isinstance(error, MigrationError):
        fail(ExitCode.REFUSED, str(error))
    fail(ExitCode.UNREACHABLE, f"no answer: {error}", hint="check --controllers, --to and --namesrv, and that they run")


def _as_json(migration: Any) -> dict[str, Any]:
    return {
        "source": migration.source, "dryRun": not migration.imported, "imported": migration.imported,
        "unchanged": migration.unchanged, "verified": migration.verified,
        "groups": [{"clusterName": row[0], "brokerName": row[1], "nextBrokerId": row[2],
                    "replicas": {str(i): address for i, address, _ in row[3]}, "masterBrokerId": row[4],
                    "masterEpoch": row[5], "syncStateSet": list(row[6]), "syncStateSetEpoch": row[7]}
                   for row in migration.rows],
        "differences": [{"brokerName": d.broker_name, "field": d.field, "java": d.java, "rmqc": d.rmqc}
                        for d in migration.differences],
    }
