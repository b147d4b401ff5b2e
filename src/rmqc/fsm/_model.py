"""The replicated data of one broker group (spec section 4.1), kept in ONE immutable record.

Java keeps two maps per broker-set (`BrokerReplicaInfo` and `SyncStateInfo`) and a partial
`CleanBrokerDataEvent` can remove one without the other (spec 4.2 "Quirk"), after which the set
answers 2008/2010 while ids remain. rmqc deliberately does not reproduce that: replica info and
sync state live in a single `BrokerGroup`, so a group either exists with both or not at all.

Records are frozen and replaced on every change (copy-on-write), which makes the "before" and
"after" of an apply free to keep (the export and the processors use them) and makes accidental
mutation of committed state impossible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Replica:
    """One registered broker id of a group."""

    address: str
    register_check_code: str


@dataclass(frozen=True, slots=True)
class BrokerGroup:
    """A broker-set (all brokers sharing one brokerName): replica info and sync state together."""

    cluster_name: str
    broker_name: str
    next_broker_id: int = 1
    # id -> replica. Never mutated in place: every change builds a new dict.
    replicas: Mapping[int, Replica] = field(default_factory=dict)
    master_id: int | None = None
    master_epoch: int = 0  # 0 = never had a master
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self.replicas

    def address_of(self, broker_id: int | None) -> str | None:
        replica = self.replicas.get(broker_id) if broker_id is not None else None
        return None if replica is None else replica.address

    @property
    def master_address(self) -> str | None:
        return self.address_of(self.master_id)

    def sorted_sync_state_set(self) -> list[int]:
        return sorted(self.sync_state_set)


def evolve(group: BrokerGroup, **changes: object) -> BrokerGroup:
    """A copy of `group` with `changes` (dataclasses.replace without its per-call introspection,
    and stored as restore stores its records: apply runs this once per command)."""
    get = changes.get
    return restored_group(
        get("cluster_name", group.cluster_name),  # type: ignore[arg-type]
        get("broker_name", group.broker_name),  # type: ignore[arg-type]
        get("next_broker_id", group.next_broker_id),  # type: ignore[arg-type]
        get("replicas", group.replicas),  # type: ignore[arg-type]
        get("master_id", group.master_id),  # type: ignore[arg-type]
        get("master_epoch", group.master_epoch),  # type: ignore[arg-type]
        get("sync_state_set", group.sync_state_set),  # type: ignore[arg-type]
        get("sync_state_set_epoch", group.sync_state_set_epoch),  # type: ignore[arg-type]
    )


# ---- restore's constructors -----------------------------------------------------------------------
# A restart restores every group from the snapshot (10,000s of records) before it can serve. The
# frozen dataclass __init__ stores each field through object.__setattr__; these store the already
# checked values straight into the slots, which halves the cost of building the records. They name
# every field: a field added above must be added here too (tests/fsm checks that the lists match).

_new = object.__new__
REPLICA_FIELDS = ("address", "register_check_code")
GROUP_FIELDS = ("cluster_name", "broker_name", "next_broker_id", "replicas", "master_id", "master_epoch",
                "sync_state_set", "sync_state_set_epoch")
_set_address, _set_check_code = (getattr(Replica, name).__set__ for name in REPLICA_FIELDS)
(_set_cluster, _set_name, _set_next_id, _set_replicas, _set_master, _set_master_epoch, _set_sync_state_set,
 _set_sync_state_set_epoch) = (getattr(BrokerGroup, name).__set__ for name in GROUP_FIELDS)


def restored_replica(address: str, register_check_code: str) -> Replica:
    replica = _new(Replica)
    _set_address(replica, address)
    _set_check_code(replica, register_check_code)
    return replica


def restored_group(cluster_name: str, broker_name: str, next_broker_id: int, replicas: Mapping[int, Replica],
                   master_id: int | None, master_epoch: int, sync_state_set: frozenset[int],
                   sync_state_set_epoch: int) -> BrokerGroup:
    group = _new(BrokerGroup)
    _set_cluster(group, cluster_name)
    _set_name(group, broker_name)
    _set_next_id(group, next_broker_id)
    _set_replicas(group, replicas)
    _set_master(group, master_id)
    _set_master_epoch(group, master_epoch)
    _set_sync_state_set(group, sync_state_set)
    _set_sync_state_set_epoch(group, sync_state_set_epoch)
    return group
