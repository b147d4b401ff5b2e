"""Processors through the harness: the happy path of spec 13.1 and every failure answer."""

from __future__ import annotations

import pytest

from rmqc.controller import NoReply, Propose, Reply, RequestContext
from rmqc.controller._namesrv import SHUTDOWN_NOTICE_MS
from rmqc.fsm import ElectionReason, ElectMaster, Trigger
from rmqc.liveness import BrokerKey
from rmqc.remoting import RemotingCommand, ResponseCode, dumps_fastjson, loads_fastjson, make_request
from rmqc.testing.controller_harness import ControllerHarness

C, N = "C", "broker-a"
A, B, D, E = "10.0.0.1:30911", "10.0.0.2:30921", "10.0.0.3:30931", "10.0.0.4:30941"


def body(response: RemotingCommand) -> object:
    assert response.body is not None
    return loads_fastjson(response.body)


def ask(h: ControllerHarness, code: int, ext: dict | None = None, payload: object = None) -> RemotingCommand:
    raw = None if payload is None else (payload if isinstance(payload, bytes) else dumps_fastjson(payload))
    response = h.request(code, ext, raw)
    assert response is not None
    return response


def elect(h: ControllerHarness, broker_id: int, *, designate: bool = False, name: str = N) -> RemotingCommand:
    ext = {"clusterName": C, "brokerName": name, "brokerId": broker_id, "designateElect": designate}
    return ask(h, 1002, ext)


def alter(h: ControllerHarness, master: int, master_epoch: int, ids: list[int], sss_epoch: int) -> RemotingCommand:
    ext = {"brokerName": N, "masterBrokerId": master, "masterEpoch": master_epoch}
    return ask(h, 1001, ext, {"syncStateSet": ids, "syncStateSetEpoch": sss_epoch})


def replica_info(h: ControllerHarness, name: str = N) -> RemotingCommand:
    return ask(h, 1004, {"brokerName": name})


@pytest.fixture
def h() -> ControllerHarness:
    return ControllerHarness()


def two_brokers_with_master(h: ControllerHarness) -> None:
    """A (id 1) master, B (id 2) slave, both live, SyncStateSet {1, 2} at epoch 2."""
    assert h.register(C, N, A) == 1
    h.heartbeat(C, N, 1, A)
    assert elect(h, 1).code == 0
    assert h.register(C, N, B) == 2
    h.heartbeat(C, N, 2, B)
    assert alter(h, 1, 1, [1, 2], 1).code == 0


def test_happy_path_trace_of_spec_13_1(h: ControllerHarness) -> None:
    meta = ask(h, 1005)
    assert meta.code == 0 and meta.ext("controllerLeaderAddress") == "127.0.0.1:9878"
    assert meta.ext("isLeader") == "true" and meta.ext("peers") == "n0:127.0.0.1:9878;"

    nxt = ask(h, 1012, {"clusterName": C, "brokerName": N})
    assert (nxt.code, nxt.ext_fields) == (0, {"clusterName": C, "brokerName": N, "nextBrokerId": "1"})
    applied = ask(h, 1013, {"clusterName": C, "brokerName": N, "appliedBrokerId": 1,
                            "registerCheckCode": f"{A};1700000000000"})
    assert (applied.code, applied.ext_fields) == (0, {"clusterName": C, "brokerName": N})
    group = h.state.group(N)
    assert group is not None and (group.next_broker_id, group.master_epoch, group.sync_state_set) == (2, 0, frozenset())

    reg = ask(h, 1003, {"clusterName": C, "brokerName": N, "brokerId": 1, "brokerAddress": A})
    assert reg.code == 0 and set(reg.ext_fields) == {"clusterName", "brokerName"}  # no master fields
    assert body(reg) == {"syncStateSet": [], "syncStateSetEpoch": 0}

    h.heartbeat(C, N, 1, A)
    assert h.liveness.is_alive(BrokerKey(C, N, 1), h.now_ms)

    won = elect(h, 1)
    assert won.code == 0
    assert won.ext_fields == {"masterBrokerId": "1", "masterAddress": A, "masterEpoch": "1", "syncStateSetEpoch": "1"}
    assert won.body == (b'{"brokerMemberGroup":{"brokerAddrs":{1:"10.0.0.1:30911"},"brokerName":"broker-a",'
                        b'"cluster":"C"},"syncStateSet":[1]}')  # bare numeric key, as fastjson writes
    assert [(addr, n.code, n.ext("masterEpoch")) for addr, n in h.notifications] == [(A, 1008, "1")]

    assert ask(h, 1012, {"clusterName": C, "brokerName": N}).ext("nextBrokerId") == "2"
    assert ask(h, 1013, {"clusterName": C, "brokerName": N, "appliedBrokerId": 2,
                         "registerCheckCode": f"{B};1700000000001"}).code == 0
    assert h.state.group(N).next_broker_id == 3
    reg_b = ask(h, 1003, {"clusterName": C, "brokerName": N, "brokerId": 2, "brokerAddress": B})
    assert reg_b.code == 0 and reg_b.ext_fields == {
        "clusterName": C, "brokerName": N, "masterBrokerId": "1", "masterAddress": A,
        "masterEpoch": "1", "syncStateSetEpoch": "1"}
    h.heartbeat(C, N, 2, B)

    altered = alter(h, 1, 1, [1, 2], 1)
    assert (altered.code, altered.ext_fields) == (0, {"newSyncStateSetEpoch": "2"})
    assert body(altered) == {"syncStateSet": [1, 2], "syncStateSetEpoch": 2}

    h.notifications.clear()
    assert h.close_connection(f"{N}#1") == [BrokerKey(C, N, 1)]  # A dies
    group = h.state.group(N)
    assert (group.master_id, group.master_epoch, group.sync_state_set, group.sync_state_set_epoch) == (
        2, 2, frozenset({2}), 3)
    # Java notifies the live replicas (B); rmqc also the deposed master (A), in case it still runs
    assert [address for address, _ in h.notifications] == [A, B]
    address, note = h.notifications[1]
    assert address == B and note.is_oneway and note.code == 1008
    assert h.notifications[0][1].ext_fields == note.ext_fields
    assert note.ext_fields == {"masterAddress": B, "masterEpoch": "2", "syncStateSetEpoch": "3", "masterBrokerId": "2"}
    assert body(note) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
    last = h.log[-1]
    assert len(last) == 1 and isinstance(last[0], ElectMaster) and last[0].trigger is Trigger.CONTROLLER

    info = replica_info(h)
    assert info.ext_fields == {"masterBrokerId": "2", "masterAddress": B, "masterEpoch": "2"}
    h.heartbeat(C, N, 1, A)  # A restarts
    back = ask(h, 1003, {"clusterName": C, "brokerName": N, "brokerId": 1, "brokerAddress": A})
    assert back.ext("masterBrokerId") == "2" and back.ext("masterAddress") == B and back.ext("masterEpoch") == "2"


# ---- failure answers ---------------------------------------------------------------------------


def test_2000_fenced_master_epoch(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    answer = alter(h, 1, 0, [1], 2)
    assert (answer.code, answer.ext_fields) == (2000, {"newSyncStateSetEpoch": "0"})
    assert "current master epoch is:{1}, not {0}" in answer.remark


def test_2001_fenced_sync_state_set_epoch(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    answer = alter(h, 1, 1, [1], 1)
    assert answer.code == 2001 and "current syncStateSet epoch is:{2}, not {1}" in answer.remark


def test_2002_invalid_master(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    answer = alter(h, 2, 1, [2], 2)
    assert answer.code == 2002 and "current leader is:{1}, not {2}" in answer.remark


def test_2003_before_2006_when_both_apply(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    h.close_connection(f"{N}#2")  # 2 is now dead as well
    answer = alter(h, 1, 1, [1, 2, 9], 2)
    assert answer.code == 2003 and "replicas {9} don't exist" in answer.remark


def test_2006_broker_not_alive(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    h.register(C, N, D)  # id 3, never heartbeats
    answer = alter(h, 1, 1, [1, 2, 3], 2)
    assert answer.code == 2006 and "replicas {3} don't alive" in answer.remark
    assert h.state.group(N).sync_state_set_epoch == 2


def test_2008_replica_info_of_unknown_group(h: ControllerHarness) -> None:
    answer = replica_info(h, "nobody")
    assert (answer.code, answer.remark, answer.ext_fields) == (2008, "Broker metadata is not existed", None)


def test_2009_clean_refusals(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    base = {"clusterName": C, "brokerName": N}
    assert ask(h, 1011, base).remark == f"Broker {N} is still alive, clean up failure"
    live = ask(h, 1011, {**base, "brokerControllerIdsToClean": "2"})
    assert (live.code, live.remark) == (2009, f"Broker [{N},  2] is still alive, clean up failure")
    bad = ask(h, 1011, {**base, "brokerControllerIdsToClean": "1;x"})
    assert bad.code == 2009 and 'For input string: "x"' in bad.remark
    unknown = ask(h, 1011, {**base, "brokerName": "nobody"})
    assert unknown.remark == "Broker nobody is not existed,clean broker data failure."


def test_clean_living_broker_removes_the_whole_group_even_with_ids(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    answer = ask(h, 1011, {"clusterName": C, "brokerName": N, "brokerControllerIdsToClean": "2",
                           "isCleanLivingBroker": True})
    assert answer.code == 0 and h.state.group(N) is None  # the Java quirk, kept


def test_2010_register_and_elect_for_unknown_group_or_id(h: ControllerHarness) -> None:
    assert elect(h, 1).code == 2010
    h.register(C, N, A)
    answer = ask(h, 1003, {"clusterName": C, "brokerName": N, "brokerId": 5, "brokerAddress": B})
    assert (answer.code, answer.remark) == (2010, f"BrokerId: 5 hasn't been registered in broker-set: {N}")


def test_2011_master_still_exists(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    answer = elect(h, 2)
    assert answer.code == 2011 and answer.ext("masterBrokerId") == "1"
    assert body(answer) == {"syncStateSet": [1, 2]}
    assert h.state.group(N).master_epoch == 1


def test_2012_no_candidate_for_a_broker_trigger(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    h.config.update_from_properties("electMasterMaxRetryCount=0")
    h.close_connection(f"{N}#1")
    h.close_connection(f"{N}#2")
    answer = elect(h, 2)
    assert (answer.code, answer.remark) == (2012, "Failed to elect a new master")


def test_2013_alter_failures(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    assert alter(h, 1, 1, [1, 2], 2).code == 2013  # equal set
    missing_master = alter(h, 1, 1, [2], 2)
    assert missing_master.code == 2013 and "don't contains origin leader {1}" in missing_master.remark
    unknown = ask(h, 1001, {"brokerName": "nobody", "masterBrokerId": 1, "masterEpoch": 1},
                  {"syncStateSet": [1], "syncStateSetEpoch": 1})
    assert (unknown.code, unknown.remark) == (2013, "Broker metadata is not existed")


def test_2014_apply_broker_id_conflicts(h: ControllerHarness) -> None:
    ext = {"clusterName": C, "brokerName": N, "appliedBrokerId": 2, "registerCheckCode": f"{A};1"}
    first = ask(h, 1013, ext)
    assert first.code == 2014 and first.remark == (
        f"Broker-set: {N} hasn't been registered in controller, but broker try to apply brokerId: 2")
    h.register(C, N, A)
    taken = ask(h, 1013, {**ext, "appliedBrokerId": 1, "registerCheckCode": f"{B};2"})
    assert (taken.code, taken.remark) == (2014, f"Fail to apply brokerId: 1 in broker-set: {N}")


@pytest.mark.parametrize("code", [1007, 1008, 1014, 1015, 1016, 1017, 1018, 42])
def test_3_for_codes_the_controller_does_not_serve(h: ControllerHarness, code: int) -> None:
    answer = ask(h, code)
    assert (answer.code, answer.remark) == (3, f" request type {code} not supported")


@pytest.mark.parametrize("code", [1001, 1002, 1003, 1004, 1006, 1011, 1012, 1013])
def test_2007_leader_only_requests_on_a_follower(code: int) -> None:
    h = ControllerHarness(is_leader=False)
    answer = ask(h, code, {"brokerName": N})
    assert (answer.code, answer.remark) == (2007, "The controller is not in leader state")


def test_follower_serves_reads_when_the_server_made_them_safe() -> None:
    h = ControllerHarness()
    h.register(C, N, A)
    request = make_request(1004, 9, {"brokerName": N})
    ctx = RequestContext(h.now_ms, is_leader=False, leader_ready=False, read_allowed=True)
    outcome = h.processor.handle(request, ctx)
    assert isinstance(outcome, Reply) and outcome.response.code == 0
    write = make_request(1002, 10, {"clusterName": C, "brokerName": N, "brokerId": 1, "designateElect": False})
    outcome = h.processor.handle(write, ctx)
    assert isinstance(outcome, Reply) and outcome.response.code == 2007


def test_leader_not_ready_answers_2007() -> None:
    h = ControllerHarness()
    ctx = RequestContext(h.now_ms, is_leader=True, leader_ready=False)
    outcome = h.processor.handle(make_request(1012, 1, {"clusterName": C, "brokerName": N}), ctx)
    assert isinstance(outcome, Reply) and outcome.response.code == 2007


# ---- heartbeats -------------------------------------------------------------------------------


def test_one_way_heartbeat_gets_no_reply_and_updates_liveness(h: ControllerHarness) -> None:
    ext = {"clusterName": C, "brokerName": N, "brokerAddr": A, "brokerId": "1"}
    outcome = h.processor.handle(make_request(904, 1, ext, oneway=True), RequestContext(h.now_ms))
    assert isinstance(outcome, NoReply)
    assert h.liveness.is_alive(BrokerKey(C, N, 1), h.now_ms)
    no_id = {k: v for k, v in ext.items() if k != "brokerId"}
    assert isinstance(h.processor.handle(make_request(904, 2, no_id, oneway=True), RequestContext(h.now_ms)), NoReply)


def test_two_way_heartbeat_answers(h: ControllerHarness) -> None:
    ext = {"clusterName": C, "brokerName": N, "brokerAddr": A, "brokerId": "1"}
    ok = ask(h, 904, ext)
    assert (ok.code, ok.remark) == (0, "Heart beat success")
    assert ask(h, 904, {k: v for k, v in ext.items() if k != "brokerId"}).code == 2005
    assert ask(h, 904).code == 2005  # no extFields at all: Java skips decoding
    missing = ask(h, 904, {"brokerName": N, "brokerId": "1"})
    assert (missing.code, missing.remark) == (1, "the custom field <clusterName> is null")


def test_a_heartbeat_with_unparsable_numbers_keeps_the_defaults(h: ControllerHarness) -> None:
    ext = {"clusterName": C, "brokerName": N, "brokerAddr": A, "brokerId": "1", "epoch": "x",
           "heartbeatTimeoutMills": "1.5"}
    assert ask(h, 904, ext).code == 0
    info = h.liveness.live_info(BrokerKey(C, N, 1))
    assert info is not None and (info.epoch, info.timeout_ms) == (-1, 10_000)


# ---- metadata and configuration -----------------------------------------------------------------


def test_1005_without_node_info_uses_the_config() -> None:
    h = ControllerHarness(node=None)
    meta = ask(h, 1005)
    assert meta.ext_fields == {"group": "rmqc", "controllerLeaderId": "n0",
                               "controllerLeaderAddress": "127.0.0.1:9878", "isLeader": "true",
                               "peers": "n0:127.0.0.1:9878;"}
    follower = ControllerHarness(node=None, is_leader=False)
    answer = ask(follower, 1005)
    assert answer.ext("isLeader") == "false" and answer.ext("controllerLeaderAddress") is None


def test_1009_and_1010(h: ControllerHarness) -> None:
    assert ask(h, 1009, None, b"enableElectUncleanMaster=true\nnotifyBrokerRoleChanged=false\n").code == 0
    assert h.config.enable_elect_unclean_master and not h.config.notify_broker_role_changed
    text = ask(h, 1010).body.decode()
    assert "enableElectUncleanMaster=true\n" in text and "isProcessReadEvent=false\n" in text
    assert text.splitlines() == sorted(text.splitlines())
    denied = ask(h, 1009, None, b"configStorePath=/tmp/x\n")
    assert (denied.code, denied.remark) == (16, "Can not update config in black list.")
    assert ask(h, 1009, None, b"rocketmqHome=/x\n").code == 16
    broken = ask(h, 1009, None, b"key=\\u12\n")
    assert (broken.code, broken.remark) == (1, "string2Properties error")
    assert ask(h, 1009).code == 0  # an empty body is a success


@pytest.mark.parametrize(("update", "remark"), [
    (b"electMasterMaxRetryCount=many\n", "bad value for electMasterMaxRetryCount: 'many'"),
    (b"enableElectUncleanMaster=maybe\n", "bad value for enableElectUncleanMaster: 'maybe'"),
    (b"noSuchKey=1\n", "unknown key 'noSuchKey'"),
    (b"enableElectUnclenMaster=true\n",
     "unknown key 'enableElectUnclenMaster' (did you mean 'enableElectUncleanMaster'?)"),
    (b"notifyBrokerRoleChanged=false\nenableElectUnclenMaster=true\n", "(did you mean 'enableElectUncleanMaster'?)"),
])
def test_1009_refuses_unknown_keys_and_bad_values_as_bad_requests(h: ControllerHarness, update: bytes,
                                                                   remark: str) -> None:
    before = ask(h, 1010).body
    answer = ask(h, 1009, None, update)
    assert (answer.code, ResponseCode(answer.code).name) == (29, "INVALID_PARAMETER")
    assert remark in answer.remark
    assert ask(h, 1010).body == before  # nothing applied, not even the good key beside the typo


def test_1006_sync_state_data(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    h.register(C, N, D)
    answer = ask(h, 1006, None, [N, "unknown"])
    table = body(answer)["replicasInfoTable"]
    assert list(table) == [N]
    entry = table[N]
    assert (entry["masterBrokerId"], entry["masterAddress"], entry["masterEpoch"], entry["syncStateSetEpoch"]) == (
        1, A, 1, 2)
    assert [(r["brokerId"], r["alive"]) for r in entry["inSyncReplicas"]] == [(1, True), (2, True)]
    assert [(r["brokerId"], r["alive"], r["brokerAddress"]) for r in entry["notInSyncReplicas"]] == [(3, False, D)]
    for empty in (ask(h, 1006), ask(h, 1006, None, [])):  # as Java (spec 13 item 10)
        assert (empty.code, empty.remark) == (1, "not set any response code")
    assert ask(h, 1006, None, b"{not json").code == 1


# ---- elections decided by the controller ----------------------------------------------------


def make_groups(h: ControllerHarness, count: int) -> None:
    for n in range(count):
        name = f"g{n}"
        for index, address in enumerate((A, B)):
            assert h.register(C, name, address) == index + 1
            h.heartbeat(C, name, index + 1, address, epoch=1, max_offset=100 * (index + 1))
        assert elect(h, 1, name=name).code == 0
        ext = {"brokerName": name, "masterBrokerId": 1, "masterEpoch": 1}
        assert ask(h, 1001, ext, {"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).code == 0


def test_elections_for_many_dead_masters_go_into_one_entry(h: ControllerHarness) -> None:
    make_groups(h, 5)
    dead = [BrokerKey(C, f"g{n}", 1) for n in range(5)]
    for key in dead:
        h.liveness.remove(key)
    reported = [*dead, dead[0], BrokerKey(C, "g1", 2)]  # a duplicate and a slave: ignored
    commands = h.processor.elections_due(h.now_ms, reported)
    assert [c.broker_name for c in commands] == [f"g{n}" for n in range(5)]  # one per group, once
    results = h.commit(commands)
    assert len(h.log[-1]) == 5 and all(r.ok and r.after.master_id == 2 for r in results)


def test_an_election_for_a_missed_deadline_says_why_and_whom_it_weighed(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.advance(9_000)
    h.heartbeat(C, "g0", 2, B, epoch=1, max_offset=200, priority=3)  # the slave stays alive
    h.advance(1_500)  # the master's deadline (its last heartbeat + 10 s) passes
    [election] = h.log[-1]
    assert isinstance(election, ElectMaster) and election.candidate == 2
    assert election.reason is ElectionReason.HEARTBEAT_MISSED
    assert election.deadline_missed_by_ms == 1  # the harness expires 1 ms after the deadline
    assert election.candidates == ((2, 1, 200, 3, True),)  # the dead master is no candidate
    assert election.master_last_alive_ms is not None and election.liveness_lost_ms is not None
    assert election.liveness_lost_ms - election.master_last_alive_ms == 10_001


def test_an_election_for_a_closed_connection_and_a_brokers_request_say_why(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.close_connection("g0#1")
    [election] = h.log[-1]
    assert isinstance(election, ElectMaster) and election.candidate == 2
    assert (election.reason, election.deadline_missed_by_ms) == (ElectionReason.CONNECTION_CLOSED, None)
    assert [row[0] for row in election.candidates] == [2]
    first = h.log[-3][0]  # make_groups: the first election, asked for by broker 1
    assert isinstance(first, ElectMaster) and first.reason is ElectionReason.BROKER


def test_a_master_that_unregistered_before_it_was_lost_was_shut_down(h: ControllerHarness) -> None:
    """A stopping broker sends its NameServers 104 before its connections close: when rmqc is its
    NameServer too, the failover says the master shut down (not that it crashed). A 104 heard long
    before (SHUTDOWN_NOTICE_MS) says nothing about a later loss."""
    make_groups(h, 2)
    ask(h, 104, {"clusterName": C, "brokerName": "g0", "brokerId": 1, "brokerAddr": A})
    h.close_connection("g0#1")
    [election] = h.log[-1]
    assert isinstance(election, ElectMaster) and election.broker_name == "g0"
    assert election.reason is ElectionReason.SHUT_DOWN and election.candidate == 2
    h.close_connection("g1#1")  # no 104 from it: a crash
    [crashed] = h.log[-1]
    assert isinstance(crashed, ElectMaster) and crashed.broker_name == "g1"
    assert crashed.reason is ElectionReason.CONNECTION_CLOSED
    stopped = BrokerKey(C, "g0", 1)
    assert h.processor.namesrv.unregistered_lately(stopped, h.now_ms + SHUTDOWN_NOTICE_MS)
    assert not h.processor.namesrv.unregistered_lately(stopped, h.now_ms + SHUTDOWN_NOTICE_MS + 1)


def test_elections_due_ignores_slaves_and_respects_retry_count_zero(h: ControllerHarness) -> None:
    make_groups(h, 1)
    assert h.processor.elections_due(h.now_ms, [BrokerKey(C, "g0", 2)]) == []
    h.config.update_from_properties("electMasterMaxRetryCount=0")
    h.liveness.remove(BrokerKey(C, "g0", 1))
    assert h.processor.elections_due(h.now_ms, [BrokerKey(C, "g0", 1)]) == []


def test_controller_trigger_without_candidate_retries_and_bumps_the_epoch(h: ControllerHarness) -> None:
    make_groups(h, 1)
    assert alter_named(h, "g0", [1], 2).code == 0
    h.advance(700)
    h.close_connection("g0#1")
    group = h.state.group("g0")
    assert (group.master_id, group.master_epoch) == (None, 4)  # 3 attempts, each a 2004
    assert [c.attempt for entry in h.log[-3:] for c in entry] == [1, 2, 3]
    # every attempt dates the failover from the close, the last moment the master was known alive
    assert {c.master_last_alive_ms for entry in h.log[-3:] for c in entry} == {h.now_ms}


def test_a_closed_connection_dates_the_failover_from_the_close(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.advance(400)
    closed_at = h.now_ms
    h.close_connection("g0#1")
    [election] = h.log[-1]
    assert isinstance(election, ElectMaster) and election.candidate == 2
    assert election.master_last_alive_ms == election.liveness_lost_ms == closed_at


def test_the_last_moment_alive_is_stamped_on_the_wall_clock_as_the_other_stamps(h: ControllerHarness) -> None:
    """The liveness table runs on the monotonic clock; the command carries wall stamps: the master's
    last moment is the same distance before the decision as the table saw it."""
    make_groups(h, 1)
    closed_mono = h.now_ms + 100
    h.liveness.on_channel_closed(h._channels.pop("g0#1"), closed_mono)
    wall = 1_767_225_600_000
    [election] = h.processor.elections_due(closed_mono + 250, [BrokerKey(C, "g0", 1)], wall)
    assert (election.leader_ts_ms, election.liveness_lost_ms, election.master_last_alive_ms) == (
        wall, wall, wall - 250)


def test_a_master_never_heard_by_this_leader_has_no_known_last_moment(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.liveness.remove(BrokerKey(C, "g0", 1))  # as on a node that led only after the master died
    [election] = h.processor.inactive_master_scan(h.now_ms)
    assert election.master_last_alive_ms is None and election.liveness_lost_ms == h.now_ms


def alter_named(h: ControllerHarness, name: str, ids: list[int], sss_epoch: int) -> RemotingCommand:
    ext = {"brokerName": name, "masterBrokerId": 1, "masterEpoch": 1}
    return ask(h, 1001, ext, {"syncStateSet": ids, "syncStateSetEpoch": sss_epoch})


def test_inactive_master_scan_reelects_when_the_event_was_missed(h: ControllerHarness) -> None:
    make_groups(h, 2)
    h.liveness.remove(BrokerKey(C, "g1", 1))  # silently gone: no inactive event reached elections
    commands = h.processor.inactive_master_scan(h.now_ms)
    assert [(c.broker_name, c.candidate) for c in commands] == [("g1", 2)]


def test_expiry_by_deadline_triggers_failover(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.heartbeat(C, "g0", 2, B, timeout_ms=60_000)
    h.advance(500)
    last_heartbeat_ms = h.now_ms
    h.heartbeat(C, "g0", 1, A, timeout_ms=3000)
    h.advance(2999)
    assert h.state.group("g0").master_id == 1
    h.advance(10)
    assert h.state.group("g0").master_id == 2
    [entry] = [e for e in h.log if isinstance(e[0], ElectMaster) and e[0].trigger is Trigger.CONTROLLER]
    # noticed at the deadline, but the master was last known alive at its last heartbeat
    assert entry[0].liveness_lost_ms == last_heartbeat_ms + 3001
    assert entry[0].master_last_alive_ms == last_heartbeat_ms


def test_notifications_off_sends_nothing(h: ControllerHarness) -> None:
    h.config.update_from_properties("notifyBrokerRoleChanged=false")
    make_groups(h, 1)
    assert h.notifications == []


def test_racing_elections_cannot_both_win(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.config.update_from_properties("electMasterMaxRetryCount=0")
    h.close_connection("g0#1")
    ctx = RequestContext(h.now_ms)
    first = h.processor.handle(make_request(1002, 1, {"clusterName": C, "brokerName": "g0", "brokerId": 2,
                                                      "designateElect": False}), ctx)
    second = h.processor.handle(make_request(1002, 2, {"clusterName": C, "brokerName": "g0", "brokerId": -1,
                                                       "designateElect": False}), ctx)
    assert isinstance(first, Propose) and isinstance(second, Propose)
    win = first.finish(h.commit(list(first.commands)))
    lose = second.finish(h.commit(list(second.commands)))
    assert win.code == 0 and win.ext("masterEpoch") == "2"
    assert lose.code == 2011 and lose.ext("masterBrokerId") == "2" and lose.ext("masterEpoch") == "2"
    assert h.state.group("g0").master_epoch == 2
    assert [r.status for r in h.results[-2:]] == ["ok", "stale_master_epoch"]


def test_racing_apply_broker_id_second_gets_2014(h: ControllerHarness) -> None:
    h.register(C, N, A)
    ctx = RequestContext(h.now_ms)
    requests = [make_request(1013, i, {"clusterName": C, "brokerName": N, "appliedBrokerId": 2,
                                       "registerCheckCode": f"{addr};1"}) for i, addr in enumerate((B, D))]
    outcomes = [h.processor.handle(r, ctx) for r in requests]
    assert all(isinstance(o, Propose) for o in outcomes)
    answers = [o.finish(h.commit(list(o.commands))) for o in outcomes]
    assert [a.code for a in answers] == [0, 2014]


def test_admin_designates_a_live_in_sync_replica(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    answer = elect(h, 2, designate=True)
    assert answer.code == 0 and answer.ext("masterBrokerId") == "2" and answer.ext("masterEpoch") == "2"
    h.register(C, N, D)
    assert elect(h, 3, designate=True).code == 2012  # not in the SyncStateSet, unclean off


def test_register_with_a_new_address_updates_it(h: ControllerHarness) -> None:
    h.register(C, N, A)
    answer = ask(h, 1003, {"clusterName": C, "brokerName": N, "brokerId": 1, "brokerAddress": B})
    assert answer.code == 0 and h.state.group(N).address_of(1) == B


def test_missing_needed_header_field_is_code_1(h: ControllerHarness) -> None:
    answer = ask(h, 1003, {"clusterName": C, "brokerName": N})
    assert (answer.code, answer.remark) == (1, "the custom field <brokerId> is null")
    assert ask(h, 1001, {"brokerName": N, "masterBrokerId": 1, "masterEpoch": 1}).code == 1  # no body


def test_controller_trigger_on_a_never_elected_group_does_not_bump_the_epoch(h: ControllerHarness) -> None:
    h.register(C, N, A)
    answer = elect(h, -1)
    assert answer.code == 2004 and h.state.group(N).master_epoch == 0
    assert elect(h, 1).code == 0  # the first broker can still take it


def test_first_election_refuses_an_unregistered_requester(h: ControllerHarness) -> None:
    h.register(C, N, A)
    answer = elect(h, 7)
    assert (answer.code, answer.remark) == (2010, f"BrokerId: 7 hasn't been registered in broker-set: {N}")


def test_notifications_without_a_clock_use_table_membership(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    h.register(C, N, D)  # id 3: registered, never heartbeated
    h.register(C, N, E)  # id 4: live until removed below
    h.heartbeat(C, N, 4, E)
    assert elect(h, 2, designate=True).code == 0
    result = h.results[-1]
    assert [address for address, _ in h.processor.notifications_for(result)] == [A, B, E]
    h.liveness.remove(BrokerKey(C, N, 4))
    assert [address for address, _ in h.processor.notifications_for(result, h.now_ms)] == [A, B]


def test_the_deposed_master_is_notified_even_when_it_is_not_live(h: ControllerHarness) -> None:
    """A master hung or cut off from the controllers is deposed while it still runs: the 1008 goes
    to it too, so it steps down as soon as it reads rather than acknowledging sends alone (Java's
    controller notifies only live replicas)."""
    two_brokers_with_master(h)
    h.register(C, N, D)  # id 3: registered, never heartbeated: not notified
    h.liveness.remove(BrokerKey(C, N, 1))
    assert elect(h, 2, designate=True).code == 0
    notifications = h.processor.notifications_for(h.results[-1], h.now_ms)
    assert [address for address, _ in notifications] == [A, B]
    assert {command.ext("masterBrokerId") for _, command in notifications} == {"2"}


def test_scan_does_nothing_when_the_controller_makes_no_attempts(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.config.update_from_properties("electMasterMaxRetryCount=0")
    h.liveness.remove(BrokerKey(C, "g0", 1))
    assert h.processor.inactive_master_scan(h.now_ms) == []


def test_harness_scan_reelects_a_master_that_vanished_without_an_event(h: ControllerHarness) -> None:
    make_groups(h, 1)
    h.liveness.remove(BrokerKey(C, "g0", 1))  # no close, no expiry event
    h.advance(4999)
    assert h.state.group("g0").master_id == 1
    h.advance(1)  # scanInactiveMasterInterval (5000 ms) reached
    assert h.state.group("g0").master_id == 2


# ---- two clocks: liveness on the monotonic one, stamps from the wall one --------------------

HOUR_MS = 3_600_000


@pytest.mark.parametrize("wall_step_ms", [-HOUR_MS, HOUR_MS])
def test_a_stepped_wall_clock_only_changes_stamps_never_who_is_alive(h: ControllerHarness, wall_step_ms: int) -> None:
    make_groups(h, 2)
    h.liveness.remove(BrokerKey(C, "g1", 1))  # g0's master is alive on the monotonic clock, g1's gone
    wall = h.now_ms + wall_step_ms
    commands = h.processor.elections_due(h.now_ms, [BrokerKey(C, "g1", 1)], wall)
    commands += h.processor.inactive_master_scan(h.now_ms, wall)
    assert [(c.broker_name, c.leader_ts_ms, c.liveness_lost_ms) for c in commands] == [
        ("g1", wall, wall), ("g1", wall, wall)]  # only the dead master; the stamps are the wall's
    ext = {"clusterName": C, "brokerName": "g0", "brokerControllerIdsToClean": "1"}
    refused = h.processor.handle(make_request(1011, 9, ext), RequestContext(h.now_ms, wall_ms=wall))
    assert isinstance(refused, Reply) and "still alive" in (refused.response.remark or "")
    ext = {"brokerName": "g0", "masterBrokerId": 1, "masterEpoch": 1}
    outcome = h.processor.handle(make_request(1001, 10, ext, dumps_fastjson({"syncStateSet": [1],
                                                                            "syncStateSetEpoch": 2})),
                                 RequestContext(h.now_ms, wall_ms=wall))
    assert isinstance(outcome, Propose) and outcome.commands[0].leader_ts_ms == wall


def test_the_mass_expiry_guard_leaves_groups_with_silent_replicas_to_the_scan(h: ControllerHarness) -> None:
    two_brokers_with_master(h)
    master, slave = BrokerKey(C, N, 1), BrokerKey(C, N, 2)
    h.liveness.remove(master)
    # a replica alive: the master is failed over at once, guard or not
    (command,) = h.processor.elections_due(h.now_ms, [master], wait_if_replicas_silent=True)
    assert isinstance(command, ElectMaster) and command.candidate == 2
    # the replica silent too: nothing to gain (no candidate), so the guard waits
    h.liveness.remove(slave)
    assert h.processor.elections_due(h.now_ms, [master], wait_if_replicas_silent=True) == []
    (command,) = h.processor.elections_due(h.now_ms, [master])  # without it: Java's no-candidate election
    assert isinstance(command, ElectMaster) and command.candidate is None
    assert h.processor.masters_among([master, slave]) == 1


def test_a_retried_1003_after_a_lost_answer_changes_nothing_more(h: ControllerHarness) -> None:
    """A real broker whose 1003 answer is lost (a timeout) retries its registration round: up to
    5 attempts, then every 5 s, each 1003 with its current address (spec 7.2 step 3e); the
    simulator's brokers retry after `retry_us`. A 1003 only ever sets the address it names: a retry
    decided before the first commits proposes the same address again, one after it proposes
    nothing, and either way the state and the answer are those of one 1003."""
    two_brokers_with_master(h)
    moved = {"clusterName": C, "brokerName": N, "brokerId": 2, "brokerAddress": D}
    request = make_request(1003, 90, moved)
    ctx = RequestContext(h.now_ms, None, True, True, h.node)
    first, retry_before_commit = h.processor.handle(request, ctx), h.processor.handle(request, ctx)
    assert isinstance(first, Propose) and isinstance(retry_before_commit, Propose)
    assert first.commands == retry_before_commit.commands
    once = first.finish(h.commit(list(first.commands)))
    group_once = h.state.group(N)
    again = retry_before_commit.finish(h.commit(list(retry_before_commit.commands)))
    assert h.state.group(N) == group_once and group_once is not None and group_once.address_of(2) == D
    assert (again.code, again.ext_fields, again.body) == (once.code, once.ext_fields, once.body)
    log_length = len(h.log)
    after_commit = ask(h, 1003, moved)
    assert len(h.log) == log_length and (after_commit.code, after_commit.body) == (once.code, once.body)
