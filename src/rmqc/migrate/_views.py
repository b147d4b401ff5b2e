"""What one controller says about a broker group (its 1006, 1004 and 1012 answers together), the
import row built from the Java controller's view, and the field-by-field difference of two views.
Pure: the answers are given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmqc.fsm import GroupRow
from rmqc.remoting import RemotingCommand, loads_fastjson

from ._errors import MigrationError

Replicas = tuple[tuple[int, str], ...]  # (brokerId, address), sorted by id

# Java does not expose a broker's registerCheckCode (it is only compared when a broker re-applies
# for an id, which a broker with its identity file never does): imported ids carry none.
UNKNOWN_CHECK_CODE = ""


@dataclass(frozen=True, slots=True)
class GroupView:
    """One broker group as one controller answers for it (liveness left out: rmqc has not heard
    the brokers yet when it is asked)."""

    broker_name: str
    master_id: int | None  # 1006 masterBrokerId
    master_address: str | None  # 1006 masterAddress
    master_epoch: int  # 1006 masterEpoch
    sync_state_set_epoch: int  # 1006 syncStateSetEpoch
    in_sync: Replicas  # 1006 inSyncReplicas
    not_in_sync: Replicas  # 1006 notInSyncReplicas
    info_master_id: int | None  # 1004 masterBrokerId
    info_master_address: str | None  # 1004 masterAddress
    info_master_epoch: int  # 1004 masterEpoch
    info_sync_state_set: tuple[int, ...]  # 1004 body syncStateSet
    info_sync_state_set_epoch: int  # 1004 body syncStateSetEpoch
    next_broker_id: int  # 1012 nextBrokerId, never below the largest registered id + 1 (see row_of_view)

    @property
    def replica_ids(self) -> list[int]:
        return sorted(broker_id for broker_id, _ in self.in_sync + self.not_in_sync)

    def compared(self) -> dict[str, Any]:
        """The answers a verification compares, labelled by request and field."""
        return {
            "1006 masterBrokerId": self.master_id, "1006 masterAddress": self.master_address,
            "1006 masterEpoch": self.master_epoch, "1006 syncStateSetEpoch": self.sync_state_set_epoch,
            "1006 inSyncReplicas": list(self.in_sync), "1006 notInSyncReplicas": list(self.not_in_sync),
            "1004 masterBrokerId": self.info_master_id, "1004 masterAddress": self.info_master_address,
            "1004 masterEpoch": self.info_master_epoch, "1004 syncStateSet": list(self.info_sync_state_set),
            "1004 syncStateSetEpoch": self.info_sync_state_set_epoch, "1012 nextBrokerId": self.next_broker_id,
        }


@dataclass(frozen=True, slots=True)
class Difference:
    broker_name: str
    field: str  # a label of GroupView.compared, or "group" when one side has no such group
    java: Any
    rmqc: Any


def views_of_answers(where: str, sync_state_data: Mapping[str, Any], replica_info: Mapping[str, RemotingCommand],
                     next_ids: Mapping[str, RemotingCommand]) -> dict[str, GroupView | None]:
    """Every asked group's view from `where`'s answers: its 1006 table (name -> ReplicasInfo), and
    per name the 1004 and 1012 answers. None for a group the controller does not have (absent from
    1006, or 1004 answered 2008)."""
    views: dict[str, GroupView | None] = {}
    for name, info in replica_info.items():
        entry = sync_state_data.get(name)
        if entry is None or info.code != 0:
            views[name] = None
            continue
        try:
            views[name] = _view(name, entry, info, next_ids[name])
        except (KeyError, TypeError, ValueError) as exc:
            raise MigrationError(f"{where}: the answers about broker group {name} cannot be read: {exc!r}") from None
    return views


def _view(name: str, entry: Mapping[str, Any], info: RemotingCommand, next_id: RemotingCommand) -> GroupView:
    if next_id.code != 0:
        raise ValueError(f"1012 answered {next_id.code} {next_id.remark}")
    body = loads_fastjson(info.body) if info.body else {}
    in_sync, not_in_sync = _replicas(entry.get("inSyncReplicas")), _replicas(entry.get("notInSyncReplicas"))
    registered = [broker_id for broker_id, _ in in_sync + not_in_sync]
    return GroupView(
        broker_name=name,
        master_id=_optional_int(entry.get("masterBrokerId")),
        master_address=entry.get("masterAddress") or None,
        master_epoch=int(entry.get("masterEpoch") or 0),
        sync_state_set_epoch=int(entry.get("syncStateSetEpoch") or 0),
        in_sync=in_sync, not_in_sync=not_in_sync,
        info_master_id=_optional_int(info.ext("masterBrokerId")),
        info_master_address=info.ext("masterAddress") or None,
        info_master_epoch=int(info.ext("masterEpoch") or 0),
        info_sync_state_set=tuple(sorted(int(i) for i in body.get("syncStateSet") or [])),
        info_sync_state_set_epoch=int(body.get("syncStateSetEpoch") or 0),
        # Java hands out its counter even when a broker applied a larger id itself; rmqc never
        # hands out a taken id, so both sides are compared (and imported) at the first free one
        next_broker_id=max(int(next_id.ext("nextBrokerId") or 1), max(registered, default=0) + 1),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


def _replicas(identities: Any) -> Replicas:
    if identities is None:
        return ()
    if not isinstance(identities, list):
        raise TypeError(f"replicas must be a list, got {identities!r}")
    return tuple(sorted((int(r["brokerId"]), str(r["brokerAddress"])) for r in identities))


def row_of_view(cluster_name: str, view: GroupView) -> GroupRow:
    """The import row of a Java group: its ids and addresses (1006), master, epochs and
    SyncStateSet (1004, what brokers themselves read), the first free id (1012)."""
    replicas = tuple(sorted((broker_id, address, UNKNOWN_CHECK_CODE)
                            for broker_id, address in view.in_sync + view.not_in_sync))
    return (cluster_name, view.broker_name, view.next_broker_id, replicas, view.info_master_id,
            view.info_master_epoch, view.info_sync_state_set, view.info_sync_state_set_epoch)


def diff_views(java: Mapping[str, GroupView | None], rmqc: Mapping[str, GroupView | None]) -> list[Difference]:
    """Every field in which rmqc answers differently from Java, group by group (sorted)."""
    differences = []
    for name in sorted(set(java) | set(rmqc)):
        ours, theirs = rmqc.get(name), java.get(name)
        if ours is None or theirs is None:
            if ours is not theirs:
                differences.append(Difference(name, "group", _presence(theirs), _presence(ours)))
            continue
        mine = ours.compared()
        differences.extend(Difference(name, label, value, mine[label])
                           for label, value in theirs.compared().items() if mine[label] != value)
    return differences


def _presence(view: GroupView | None) -> str:
    return "absent" if view is None else "present"
