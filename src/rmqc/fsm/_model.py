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

from dataclasses import dataclass, field
from typing import Mapping


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
    """A copy of `group` with `changes` (dataclasses.replace without its per-call introspection;
    apply runs this once per command)."""
    get = changes.get
    return BrokerGroup(
        get("cluster_name", group.cluster_name),  # type: ignore[arg-type]
        get("broker_name", group.broker_name),  # type: ignore[arg-type]
        get("next_broker_id", group.next_broker_id),  # type: ignore[arg-type]
        get("replicas", group.replicas),  # type: ignore[arg-type]
        get("master_id", group.master_id),  # type: ignore[arg-type]
        get("master_epoch", group.master_epoch),  # type: ignore[arg-type]
        get("sync_state_set", group.sync_state_set),  # type: ignore[arg-type]
        get("sync_state_set_epoch", group.sync_state_set_epoch),  # type: ignore[arg-type]
    )
