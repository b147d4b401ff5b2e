"""Node metrics (rmqc.metrics, without the Trio shell): every metric the brief names is exposed,
labels stay inside fixed tables, election outcomes are classified from apply results, and the gauges
follow the replica's published status. The HTTP exporter and the refresh from a running node:
tests/node/test_metrics_exporter.py."""

from __future__ import annotations

import pytest

from rmqc.fsm import ApplyResult, ApplyStatus, BrokerGroup, ElectMaster, Trigger
from rmqc.metrics import (
    ELECTION_RESULTS,
    ONEWAY_TIMING_EVERY,
    NodeMetrics,
    election_result_of,
    request_label,
    response_label,
)
from rmqc.replica import PeerLag, ReplicaStatus
from rmqc.testing.metrics import samples


def elect(candidate: int | None) -> ElectMaster:
    return ElectMaster(cluster_name="C", broker_name="b", trigger=Trigger.CONTROLLER, candidate=candidate,
                       expected_master_epoch=1, expected_sync_state_set_epoch=1, leader_ts_ms=0)


def test_labels_come_from_fixed_tables() -> None:
    assert request_label(1002) == "CONTROLLER_ELECT_MASTER"
    assert request_label(60001) == "RMQC_NODE_STATUS"
    assert request_label(4242) == request_label(31337) == "other"  # no new series per random code
    assert response_label(2011) == "CONTROLLER_MASTER_STILL_EXIST"
    assert response_label(None) == "oneway" and response_label(9999) == "other"


def test_requests_appends_fsyncs_and_reads_are_counted() -> None:
    metrics = NodeMetrics()
    metrics.observe_request(1004, 0, 0.0004)
    metrics.observe_request(1004, 2008, 0.002)
    metrics.observe_request(904, None, 0.00005)
    metrics.observe_request(5555, 3, 0.0001)
    metrics.observe_append(37)
    metrics.observe_fsync(0.0015)
    metrics.count_read_index_round(3)
    found = samples(metrics)
    get = "CONTROLLER_GET_REPLICA_INFO"
    assert found[("rmqc_requests_total", (("request", get), ("result", "SUCCESS")))] == 1
    assert found[("rmqc_requests_total", (("request", get), ("result", "CONTROLLER_BROKER_METADATA_NOT_EXIST")))] == 1
    assert found[("rmqc_requests_total", (("request", "BROKER_HEARTBEAT"), ("result", "oneway")))] == 1
    assert found[("rmqc_requests_total", (("request", "other"), ("result", "REQUEST_CODE_NOT_SUPPORTED")))] == 1
    assert found[("rmqc_request_latency_seconds_count", (("request", get),))] == 2
    assert found[("rmqc_request_latency_seconds_bucket", (("le", "0.0005"), ("request", get)))] == 1
    assert found[("rmqc_proposals_per_append_sum", ())] == 37
    assert found[("rmqc_proposals_per_append_bucket", (("le", "32.0"),))] == 0
    assert found[("rmqc_proposals_per_append_bucket", (("le", "64.0"),))] == 1
    assert found[("rmqc_fsync_seconds_count", ())] == 1
    assert found[("rmqc_read_index_rounds_total", ())] == 3


def test_elections_are_classified_like_the_java_controller_metrics() -> None:
    group = BrokerGroup("C", "b", master_id=1, master_epoch=1)
    elected = ApplyResult(elect(2), ApplyStatus.OK, group, group)
    cleared = ApplyResult(elect(None), ApplyStatus.OK, group, group)
    kept = ApplyResult(elect(2), ApplyStatus.STALE_MASTER_EPOCH, group, group)
    assert [election_result_of(r) for r in (elected, kept, cleared)] == list(ELECTION_RESULTS)
    orphan = ApplyResult(elect(2), ApplyStatus.UNKNOWN_GROUP, None, None)
    assert election_result_of(orphan) == "no_master_elected"
    metrics = NodeMetrics()
    metrics.count_elections([elected, elected, cleared])
    metrics.count_election("keep_current_master")
    found = samples(metrics)
    assert found[("rmqc_elections_total", (("result", "new_master_elected"),))] == 2
    assert found[("rmqc_elections_total", (("result", "no_master_elected"),))] == 1
    assert found[("rmqc_elections_total", (("result", "keep_current_master"),))] == 1
    with pytest.raises(ValueError, match="not one of"):
        metrics.count_election("won")


def test_failover_detection_and_notification_latencies_are_histograms() -> None:
    metrics = NodeMetrics()
    metrics.observe_detection(0.004)
    metrics.observe_detection(-0.002)  # the wall clock stepped back between the two stamps: counted as 0
    metrics.observe_failover_step("notified", 0.0015)
    metrics.observe_failover_step("heartbeat", 0.3)
    found = samples(metrics)
    assert found[("rmqc_failover_detection_seconds_count", ())] == 2
    assert found[("rmqc_failover_detection_seconds_bucket", (("le", "0.001"),))] == 1  # the 0
    assert found[("rmqc_failover_detection_seconds_bucket", (("le", "0.005"),))] == 2
    assert found[("rmqc_failover_notification_seconds_bucket", (("le", "0.0025"), ("step", "notified")))] == 1
    assert found[("rmqc_failover_notification_seconds_bucket", (("le", "0.25"), ("step", "heartbeat")))] == 0
    assert found[("rmqc_failover_notification_seconds_count", (("step", "heartbeat"),))] == 1


def replica_status(peers: dict[str, PeerLag]) -> ReplicaStatus:
    return ReplicaStatus(node_id="n0", role="leader", leader="n0", term=7, commit=120, applied=118, last_index=120,
                         serving=True, voters=("n0", "n1"), learners=("n3",), transferring_to=None,
                         pending_conf_change=None, peers=peers, broker_groups=3, live_brokers=0, alarms=())


def test_gauges_follow_the_published_status() -> None:
    metrics = NodeMetrics()
    metrics.update_from_status(replica_status({"n1": PeerLag(match=100, next=101, lag=20, state="replicate",
                                                             active=True)}))
    found = samples(metrics)
    assert found[("rmqc_raft_term", ())] == 7
    assert found[("rmqc_raft_commit_index", ())] == 120
    assert found[("rmqc_raft_applied_index", ())] == 118
    assert found[("rmqc_is_leader", ())] == 1
    assert found[("rmqc_broker_groups", ())] == 3
    assert found[("rmqc_live_brokers", ())] == 0
    assert found[("rmqc_raft_learners", ())] == 1
    assert found[("rmqc_raft_pending_conf_change", ())] == 0
    assert found[("rmqc_raft_peer_lag_entries", (("peer", "n1"),))] == 20
    assert ("rmqc_raft_peer_lag_entries", (("peer", "n0"),)) not in found  # not itself
    metrics.update_from_status(replica_status({}))  # no longer the leader: no peer series
    assert not any(name == "rmqc_raft_peer_lag_entries" for name, _ in samples(metrics))


def test_two_nodes_in_one_process_keep_separate_registries() -> None:
    first, second = NodeMetrics(), NodeMetrics()
    first.observe_append(5)
    assert samples(second)[("rmqc_proposals_per_append_count", ())] == 0


def test_inline_heartbeats_are_counted_in_bulk_and_one_in_n_is_timed() -> None:
    metrics = NodeMetrics()
    count = 3 * ONEWAY_TIMING_EVERY + 5
    for _ in range(count):
        if metrics.oneway_timing_due(904):
            metrics.observe_oneway(904, 0.00002)
    found = samples(metrics)
    key = ("request", "BROKER_HEARTBEAT")
    assert found[("rmqc_requests_total", (key, ("result", "oneway")))] == 3 * ONEWAY_TIMING_EVERY
    assert found[("rmqc_request_latency_seconds_count", (key,))] == 3
    metrics.update_gauges(term=1, commit=0, applied=0, is_leader=False, live_brokers=0, broker_groups=0)
    assert samples(metrics)[("rmqc_requests_total", (key, ("result", "oneway")))] == count  # the rest flushed
