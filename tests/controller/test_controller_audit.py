"""The processor records the request's origin in every command it builds, the controller's own
elections name the node that decided, and the cluster-name check refuses a request naming a group
registered under another cluster (on the leader, and at apply for two racing creations)."""

from __future__ import annotations

import pytest

from rmqc.controller import ControllerConfig, Propose, RequestContext
from rmqc.fsm import (
    AlterSyncStateSet,
    ApplyBrokerId,
    ApplyStatus,
    CleanBrokerData,
    ElectMaster,
    Origin,
    Trigger,
    UpdateBrokerAddress,
    UpdateControllerConfig,
)
from rmqc.remoting import RemotingCommand, ResponseCode, make_request
from rmqc.testing.controller_harness import ControllerHarness

C, N = "C", "broker-a"
A, B = "10.0.0.1:30911", "10.0.0.2:30921"
WHO = Origin("ops-admin", "10.9.9.9:50000", "n2")
MISMATCH = ("Broker-set: broker-a is registered in cluster C, not in cluster X: two clusters may not share "
            "a brokerName (clusterNameCheck)")


@pytest.fixture
def h() -> ControllerHarness:
    harness = ControllerHarness()
    assert harness.register(C, N, A) == 1
    harness.heartbeat(C, N, 1, A)
    return harness


def decide(h: ControllerHarness, code: int, ext: dict, body: bytes | None = None) -> Propose:
    outcome = h.processor.handle(make_request(code, 7, ext, body), RequestContext(h.now_ms, origin=WHO))
    assert isinstance(outcome, Propose), outcome
    return outcome


def run(h: ControllerHarness, outcome: Propose) -> RemotingCommand:
    return outcome.finish(h.commit(list(outcome.commands)))


def test_every_command_of_a_request_carries_its_origin(h: ControllerHarness) -> None:
    apply_id = decide(h, 1013, {"clusterName": C, "brokerName": N, "appliedBrokerId": 2,
                                "registerCheckCode": f"{B};1"})
    assert run(h, apply_id).code == 0
    h.heartbeat(C, N, 2, B)
    moved = decide(h, 1003, {"clusterName": C, "brokerName": N, "brokerId": 2, "brokerAddress": "10.0.0.2:1"})
    assert run(h, moved).code == 0
    elected = decide(h, 1002, {"clusterName": C, "brokerName": N, "brokerId": 1, "designateElect": False})
    assert run(h, elected).code == 0
    altered = decide(h, 1001, {"brokerName": N, "masterBrokerId": 1, "masterEpoch": 1},
                     b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
    assert run(h, altered).code == 0
    h.close_connection(f"{N}#1")  # the master dies: the controller elects 2 on its own
    h.close_connection(f"{N}#2")
    cleaned = decide(h, 1011, {"clusterName": C, "brokerName": N, "isCleanLivingBroker": True})
    assert run(h, cleaned).code == 0
    by_request = [apply_id, moved, elected, altered, cleaned]
    kinds = [type(o.commands[0]) for o in by_request]
    assert kinds == [ApplyBrokerId, UpdateBrokerAddress, ElectMaster, AlterSyncStateSet, CleanBrokerData]
    assert all(o.commands[0].origin == WHO for o in by_request)
    controller = [c for entry in h.log for c in entry
                  if isinstance(c, ElectMaster) and c.trigger is Trigger.CONTROLLER]
    assert controller and all(c.origin == Origin(None, None, "n0") for c in controller)  # n0: controllerDLegerSelfId
    assert controller[0].origin.caller == "controller"


def test_a_context_without_origin_records_none(h: ControllerHarness) -> None:
    outcome = h.processor.handle(make_request(1002, 1, {"clusterName": C, "brokerName": N, "brokerId": 1,
                                                             "designateElect": False}),
                                 RequestContext(h.now_ms))
    assert isinstance(outcome, Propose) and outcome.commands[0].origin is None


@pytest.mark.parametrize("code, ext", [
    (1012, {"clusterName": "X", "brokerName": N}),
    (1013, {"clusterName": "X", "brokerName": N, "appliedBrokerId": 2, "registerCheckCode": f"{B};1"}),
    (1003, {"clusterName": "X", "brokerName": N, "brokerId": 1, "brokerAddress": A}),
    (1002, {"clusterName": "X", "brokerName": N, "brokerId": 1, "designateElect": True}),
    (1011, {"clusterName": "X", "brokerName": N, "isCleanLivingBroker": True}),
])
def test_another_clusters_name_is_refused_2005(h: ControllerHarness, code: int, ext: dict) -> None:
    answer = h.request(code, ext)
    assert answer is not None and (answer.code, answer.remark) == (ResponseCode.CONTROLLER_INVALID_REQUEST, MISMATCH)
    assert h.state.group(N).replicas.keys() == {1} and h.state.group(N).master_id is None


@pytest.mark.parametrize("code, ext", [
    (1012, {"brokerName": N}),
    (1002, {"clusterName": "", "brokerName": N, "brokerId": 1, "designateElect": False}),
])
def test_no_cluster_name_names_no_cluster(h: ControllerHarness, code: int, ext: dict) -> None:
    answer = h.request(code, ext)
    assert answer is not None and answer.code == ResponseCode.SUCCESS, answer.remark


def test_the_check_off_mixes_clusters_as_java_does(h: ControllerHarness) -> None:
    h.config.update_from_properties("clusterNameCheck=false")
    answer = h.request(1013, {"clusterName": "X", "brokerName": N, "appliedBrokerId": 2,
                              "registerCheckCode": f"{B};1"})
    assert answer is not None and answer.code == 0
    assert h.state.group(N).replicas.keys() == {1, 2} and h.state.group(N).cluster_name == C


def test_two_clusters_racing_to_create_one_group_cannot_both_win() -> None:
    h = ControllerHarness()
    ctx = RequestContext(h.now_ms)
    outcomes = [h.processor.handle(make_request(1013, i, {"clusterName": cluster, "brokerName": "new",
                                                          "appliedBrokerId": 1,
                                                          "registerCheckCode": f"10.0.0.{i}:1;1"}), ctx)
                for i, cluster in enumerate(("C", "X"))]
    assert all(isinstance(o, Propose) for o in outcomes)  # both decided before either applied
    answers = [run(h, o) for o in outcomes]  # type: ignore[arg-type]
    assert [a.code for a in answers] == [0, ResponseCode.CONTROLLER_INVALID_REQUEST]
    assert "registered in cluster C, not in cluster X" in (answers[1].remark or "")
    assert h.results[-1].status is ApplyStatus.CLUSTER_MISMATCH
    assert h.state.group("new").replicas.keys() == {1}


def test_1009_is_checked_then_proposed_with_its_origin_and_applied(h: ControllerHarness) -> None:
    config = h.processor.config
    refused = h.processor.handle(make_request(1009, 3, {}, b"electMasterMaxRetry=2"), RequestContext(h.now_ms))
    assert not isinstance(refused, Propose) and refused.response.code == ResponseCode.INVALID_PARAMETER
    assert len(h.log) == 1  # nothing entered the log (the registration of the fixture only)
    outcome = decide(h, 1009, {}, b"electMasterMaxRetryCount=2\nenableElectUncleanMaster=true")
    [command] = outcome.commands
    assert isinstance(command, UpdateControllerConfig) and command.origin == WHO
    assert command.properties == (("electMasterMaxRetryCount", "2"), ("enableElectUncleanMaster", "true"))
    assert config.elect_master_max_retry_count == 3  # unchanged until applied
    assert run(h, outcome).code == ResponseCode.SUCCESS
    assert config.elect_master_max_retry_count == 2 and config.enable_elect_unclean_master
    follower = h.processor.handle(make_request(1009, 4, {}, b"electMasterMaxRetryCount=1"),
                                  RequestContext(h.now_ms, is_leader=False))
    assert not isinstance(follower, Propose) and follower.response.code == ResponseCode.CONTROLLER_NOT_LEADER


def test_a_replicated_1009_skips_keys_this_node_black_lists() -> None:
    config = ControllerConfig.from_properties(b"configBlackList=electMasterMaxRetryCount")
    config.apply_replicated({"electMasterMaxRetryCount": "7", "enableElectUncleanMaster": "true"})
    assert config.elect_master_max_retry_count != 7 and config.enable_elect_unclean_master
