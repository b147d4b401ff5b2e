"""The migration itself: read the Java controller, import into rmqc, verify both sides. Every
request goes through the ControllerClient instances the caller opened (rmqc's with its ACL
account); this module opens nothing itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from rmqc.fsm import GroupRow
from rmqc.remoting import RMQC_IMPORT_GROUPS, RemotingCommand, RequestCode, loads_fastjson

from ._errors import MigrationError, MigrationRefused
from ._views import Difference, GroupView, diff_views, row_of_view, views_of_answers

if TYPE_CHECKING:
    from rmqc.client import ControllerClient

# Names per 1006 request: its answer for 3-replica groups is ~0.5 kB a group, so a batch stays far
# below the 16 MB frame bound (and below what a Java controller builds comfortably in one answer).
NAMES_PER_REQUEST = 500


@dataclass
class Migration:
    """What a run did: the groups read (as import rows), whether rmqc took them (False on a dry
    run; `unchanged`: it held them already) and every difference the verification found."""

    source: str
    rows: tuple[GroupRow, ...]
    imported: bool = False
    unchanged: bool = False
    differences: list[Difference] = field(default_factory=list)
    java_views: dict[str, GroupView | None] = field(default_factory=dict)
    rmqc_views: dict[str, GroupView | None] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return self.imported and not self.differences


async def group_names_from_namesrv(namesrv: ControllerClient, address: str,
                                   cluster: str | None = None) -> dict[str, str]:
    """brokerName -> clusterName of every broker group the NameServer at `address` lists (106),
    only `cluster`'s when given. The Java controller has no request that lists its groups."""
    answer = await namesrv.request(RequestCode.GET_BROKER_CLUSTER_INFO, address=address, leader=False)
    assert answer is not None  # two-way
    if answer.code != 0 or not answer.body:
        raise MigrationError(f"NameServer {address}: 106 (GET_BROKER_CLUSTER_INFO) answered {answer.code} "
                             f"{answer.remark}")
    table = loads_fastjson(answer.body).get("clusterAddrTable") or {}
    names = {str(name): str(cluster_name) for cluster_name, members in table.items()
             if cluster is None or cluster_name == cluster for name in members}
    if not names:
        where = f"cluster {cluster}" if cluster else "any cluster"
        raise MigrationError(f"NameServer {address} lists no broker group in {where}")
    return names


async def migrate(java: ControllerClient, rmqc: ControllerClient | None, groups: Mapping[str, str],
                  *, dry_run: bool = False) -> Migration:
    """Read `groups` (brokerName -> clusterName) from the Java controller; unless `dry_run` (or
    without `rmqc`), import them into rmqc as one command and compare what both sides answer."""
    source = f"java controller {await java_leader(java)}"
    java_views = await read_views(java, groups)
    missing = sorted(name for name, view in java_views.items() if view is None)
    if missing:
        raise MigrationError(f"the Java controller has no broker group {', '.join(missing)}: check the names "
                             "(or --cluster), or clean them from the NameServer first")
    rows = tuple(row_of_view(groups[name], view) for name, view in sorted(java_views.items()) if view is not None)
    migration = Migration(source, rows, java_views=java_views)
    if dry_run or rmqc is None:
        return migration
    migration.unchanged = await import_rows(rmqc, source, rows)
    migration.imported = True
    await verify(java, rmqc, groups, migration)
    return migration


async def verify(java: ControllerClient, rmqc: ControllerClient, groups: Mapping[str, str],
                 migration: Migration) -> None:
    """Ask both sides again (Java first: a group that moved on since the import shows as a difference)."""
    migration.java_views = await read_views(java, groups)
    migration.rmqc_views = await read_views(rmqc, groups)
    migration.differences = diff_views(migration.java_views, migration.rmqc_views)


async def java_leader(java: ControllerClient) -> str:
    """The Java controllers' leader address (1005 of any of them)."""
    answer = await java.get_metadata()
    leader = answer.ext("controllerLeaderAddress") if answer.code == 0 else None
    if not leader:
        raise MigrationError(f"the Java controllers name no leader (1005 answered {answer.code} {answer.remark}): "
                             "wait until they have elected one")
    return leader


async def import_rows(rmqc: ControllerClient, source: str, rows: tuple[GroupRow, ...]) -> bool:
    """One RMQC_IMPORT_GROUPS; True when rmqc held these very groups already."""
    body = orjson.dumps({"source": source, "groups": rows})
    answer = await rmqc.request(RMQC_IMPORT_GROUPS, None, body)
    assert answer is not None  # two-way
    if answer.code != 0:
        raise MigrationRefused(answer.code, answer.remark)
    return bool(loads_fastjson(answer.body or b"{}").get("unchanged"))


async def read_views(client: ControllerClient, groups: Mapping[str, str]) -> dict[str, GroupView | None]:
    """1006 (in batches), then 1004 and 1012 per group, from the leader `client` finds."""
    names = sorted(groups)
    table: dict[str, Any] = {}
    for start in range(0, len(names), NAMES_PER_REQUEST):
        answer = await client.get_sync_state_data(names[start:start + NAMES_PER_REQUEST])
        _check(answer, "1006 (GET_SYNC_STATE_DATA)")
        table |= loads_fastjson(answer.body or b"{}").get("replicasInfoTable") or {}
    infos = {name: await client.get_replica_info(name) for name in names}
    next_ids = {name: await client.get_next_broker_id(groups[name], name) for name in names
                if infos[name].code == 0}
    return views_of_answers(_where(client), table, infos, next_ids)


def _check(answer: RemotingCommand, request: str) -> None:
    if answer.code != 0:
        raise MigrationError(f"{request} answered {answer.code}: {answer.remark}")


def _where(client: ControllerClient) -> str:
    return client.leader_address or "the controller"
