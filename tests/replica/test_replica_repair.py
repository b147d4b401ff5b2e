"""A replica whose storage records a repair (rmqc serve --repair) shows the `repairing` alarm,
waits for a leader like a joining node when its log was given up, and records the end of the
repair in its storage once it caught up."""

from __future__ import annotations

import dataclasses
import random

from replica_harness import Cluster

from rmqc.raft import MemoryStorage
from rmqc.replica import REPAIRING, Replica


def elected_cluster() -> tuple[Cluster, str]:
    cluster = Cluster(3)
    cluster.run(3000)
    leader = cluster.leader()
    assert leader is not None
    return cluster, leader


def replace_with_repairing(cluster: Cluster, node_id: str) -> MemoryStorage:
    """The node restarts on an empty storage that records a repair (its log given up)."""
    storage = MemoryStorage()
    storage.begin_repair("test: data.mdb truncated")
    old = cluster.replicas[node_id]
    cluster.outboxes[node_id].clear()
    cluster.replicas[node_id] = Replica(dataclasses.replace(old.config), storage, cluster.clock,
                                        random.Random(7), cluster.outboxes[node_id])
    return storage


def alarms(replica: Replica) -> list[dict[str, object]]:
    return [dict(alarm) for alarm in replica.status().alarms]


def test_a_repairing_replica_raises_the_alarm_and_clears_it_once_caught_up() -> None:
    cluster, leader = elected_cluster()
    follower = next(node_id for node_id in cluster.replicas if node_id != leader)
    storage = replace_with_repairing(cluster, follower)
    replica = cluster.replicas[follower]
    assert replica.repairing and not replica.conf_state.members, "its membership comes from the leader"
    cluster.isolate(follower)
    cluster.run(2000)
    assert alarms(replica) == [{"alarm": REPAIRING, "detail": "test: data.mdb truncated", "targetIndex": None}]
    assert replica.status().role != "leader"
    cluster.cut.clear()
    cluster.run(2000)
    assert alarms(replica) == [] and not replica.repairing
    assert storage.repair_reason() is None, "the end of the repair is recorded"
    assert replica.applied_index >= cluster.replicas[leader].applied_index - 1
