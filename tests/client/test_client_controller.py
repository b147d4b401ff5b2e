"""ControllerClient against real Trio TCP servers on loopback (client_fake_server.FakeController)."""

from __future__ import annotations

import random
import socket
from collections.abc import AsyncIterator

import pytest
import trio
from client_fake_server import FakeController

from rmqc.client import (
    ClientClosed,
    ConnectionLost,
    ControllerClient,
    NoLeaderError,
    NotLeaderError,
    RequestTimeout,
    RetriesExhausted,
    TooManyConnections,
    TooManyInFlight,
)
from rmqc.errors import BoundExceeded, ConfigError
from rmqc.remoting import ONEWAY_FLAG, RemotingCommand, RequestCode, ResponseCode, loads_fastjson, loads_properties

SEED = 20261122  # jitter source; fixed so retry timings repeat


def make_client(addresses: list[str], **options: object) -> ControllerClient:
    options.setdefault("backoff_ms", 1)
    return ControllerClient(addresses, rng=random.Random(SEED), wall_clock_ms=lambda: 1700000000000, **options)


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[FakeController, FakeController]]:
    """Two fakes: `a` follows, `b` leads."""
    async with trio.open_nursery() as nursery:
        a = await FakeController("a").start(nursery)
        b = await FakeController("b").start(nursery)
        b.become_leader()
        a.follow(b)
        yield a, b
        nursery.cancel_scope.cancel()


async def test_leader_found_through_a_follower(cluster: tuple[FakeController, FakeController]) -> None:
    a, b = cluster
    async with make_client([a.address]) as client:
        response = await client.get_replica_info("broker-a")
        assert client.leader_address == b.address
    assert response.code == ResponseCode.SUCCESS and response.ext("servedBy") == "b"
    assert a.received_codes() == [RequestCode.CONTROLLER_GET_METADATA_INFO]
    assert b.received_codes() == [RequestCode.CONTROLLER_GET_REPLICA_INFO]
    assert b.received[0].ext_fields == {"brokerName": "broker-a"}


async def test_answers_out_of_order_are_matched_by_opaque(cluster: tuple[FakeController, FakeController]) -> None:
    _, b = cluster
    b.hold.add(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID)
    answers: dict[str, RemotingCommand] = {}
    async with make_client([b.address]) as client:

        async def ask(broker_name: str) -> None:
            answers[broker_name] = await client.get_next_broker_id("c", broker_name)

        async with trio.open_nursery() as nursery:
            for index in range(8):
                nursery.start_soon(ask, f"broker-{index}")
            await b.wait_until(lambda: len(b.held) == 8)
            await b.release_held(reverse=True)
    assert b.connections_accepted == 1  # all eight shared one connection
    assert {name: answer.ext("brokerName") for name, answer in answers.items()} == {n: n for n in answers}
    opaques = [answer.opaque for answer in answers.values()]
    assert len(set(opaques)) == 8
    assert all(answer.ext("echoOpaque") == str(answer.opaque) for answer in answers.values())


async def test_not_leader_answer_makes_the_client_rediscover(cluster: tuple[FakeController, FakeController]) -> None:
    a, b = cluster
    async with make_client([a.address, b.address]) as client:
        first = await client.elect_master("c", "broker-a", 1)
        assert first.ext("servedBy") == "b"
        a.become_leader()  # leadership moves to a; b now answers 2007
        b.follow(a)
        second = await client.elect_master("c", "broker-a", 2)
        assert client.leader_address == a.address
    assert second.code == ResponseCode.SUCCESS and second.ext("servedBy") == "a"
    assert b.received_codes().count(RequestCode.CONTROLLER_ELECT_MASTER) == 2  # one served, one refused
    assert a.received_codes()[-1] == RequestCode.CONTROLLER_ELECT_MASTER


async def test_leader_process_gone_the_client_finds_the_new_leader() -> None:
    b_scope = trio.CancelScope()

    async def run_b(task_status: trio.TaskStatus[FakeController]) -> None:
        with b_scope:
            async with trio.open_nursery() as b_nursery:
                task_status.started(await FakeController("b").start(b_nursery))
                await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        a = await FakeController("a").start(nursery)
        b = await nursery.start(run_b)
        b.become_leader()
        a.follow(b)
        async with make_client([b.address, a.address]) as client:
            assert (await client.register_broker("c", "broker-a", 1, "10.0.0.5:30911")).ext("servedBy") == "b"
            b_scope.cancel()  # b's listener and connections close, as on kill -9
            a.become_leader()
            response = await client.register_broker("c", "broker-a", 1, "10.0.0.5:30911")
            assert client.leader_address == a.address
            assert client.connected_addresses() == [a.address]
        nursery.cancel_scope.cancel()
    assert response.ext("servedBy") == "a"
    assert a.received_codes() == [1005, 1003]


async def test_explicit_address_gets_the_2007_answer_itself(cluster: tuple[FakeController, FakeController]) -> None:
    a, _ = cluster
    async with make_client([a.address]) as client:
        response = await client.get_replica_info("broker-a", address=a.address)
    assert response.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert a.received_codes() == [RequestCode.CONTROLLER_GET_REPLICA_INFO]


async def test_connection_dropped_mid_request_is_retried_on_a_new_one(
    cluster: tuple[FakeController, FakeController],
) -> None:
    _, b = cluster
    b.drop_once.add(RequestCode.CONTROLLER_REGISTER_BROKER)
    async with make_client([b.address]) as client:
        response = await client.register_broker("c", "broker-a", 1, "10.0.0.5:30911")
    assert response.code == ResponseCode.SUCCESS
    assert b.connections_accepted == 2
    # The dropped connection was the leader's, so the retry rediscovered it first.
    assert b.received_codes() == [1005, 1003, 1005, 1003]


async def test_malformed_answer_closes_the_connection_and_the_request_is_retried(
    cluster: tuple[FakeController, FakeController],
) -> None:
    _, b = cluster
    b.garbage_once.add(RequestCode.CONTROLLER_GET_REPLICA_INFO)
    async with make_client([b.address]) as client:
        response = await client.get_replica_info("broker-a")
    assert response.code == ResponseCode.SUCCESS and b.connections_accepted == 2


async def test_timeout_is_named_and_late_answers_do_not_confuse_the_next_request(
    cluster: tuple[FakeController, FakeController],
) -> None:
    _, b = cluster
    b.hold.add(RequestCode.CONTROLLER_GET_REPLICA_INFO)
    async with make_client([b.address], timeout_ms=150) as client:
        with pytest.raises(RequestTimeout, match="no answer within 150 ms"):
            await client.get_replica_info("broker-a")
        assert client.in_flight == 0
        b.hold.clear()
        await b.release_held(reverse=False)  # the late answer to the timed-out request
        response = await client.get_replica_info("broker-b")
    assert response.ext("brokerName") == "broker-b"
    assert b.connections_accepted == 1


async def test_in_flight_bound_raises_a_named_error(cluster: tuple[FakeController, FakeController]) -> None:
    _, b = cluster
    b.hold.add(RequestCode.CONTROLLER_GET_REPLICA_INFO)
    done: list[RemotingCommand] = []
    async with make_client([b.address], max_in_flight=2) as client:

        async def ask() -> None:
            done.append(await client.get_replica_info("broker-a"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            nursery.start_soon(ask)
            await b.wait_until(lambda: len(b.held) == 2)
            assert client.in_flight == 2
            with pytest.raises(TooManyInFlight) as caught:
                await client.get_config(b.address)
            assert isinstance(caught.value, BoundExceeded)
            await b.release_held(reverse=True)
        assert client.in_flight == 0
    assert len(done) == 2


def closed_port_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


async def test_retries_are_bounded_when_nothing_listens() -> None:
    async with make_client([closed_port_address()], max_retries=2) as client:
        with pytest.raises(RetriesExhausted) as caught:
            await client.get_metadata()
    assert isinstance(caught.value.last_error, ConnectionLost)
    assert "failed 3 times" in str(caught.value)


async def test_no_leader_anywhere_is_retried_then_reported() -> None:
    async with trio.open_nursery() as nursery:
        lonely = await FakeController("lonely").start(nursery)
        async with make_client([lonely.address], max_retries=2) as client:
            with pytest.raises(RetriesExhausted) as caught:
                await client.get_next_broker_id("c", "broker-a")
        nursery.cancel_scope.cancel()
    assert isinstance(caught.value.last_error, NoLeaderError)
    assert lonely.received_codes() == [1005, 1005, 1005]


async def test_leader_that_keeps_refusing_exhausts_the_retries(cluster: tuple[FakeController, FakeController]) -> None:
    a, _ = cluster
    a.leader_address = a.address  # claims a leader that then answers 2007
    async with make_client([a.address], max_retries=1) as client:
        with pytest.raises(RetriesExhausted) as caught:
            await client.apply_broker_id("c", "broker-a", 1, "10.0.0.5:30911;1")
    assert isinstance(caught.value.last_error, NotLeaderError)
    assert a.received_codes() == [1005, 1013, 1005, 1013]


async def test_typed_calls_send_the_spec_fields(cluster: tuple[FakeController, FakeController]) -> None:
    _, b = cluster
    async with make_client([b.address]) as client:
        await client.get_next_broker_id("c", "broker-a")
        await client.apply_broker_id("c", "broker-a", 2, "10.0.0.6:30911;1700")
        await client.register_broker("c", "broker-a", 2, "10.0.0.6:30911")
        await client.elect_master("c", "broker-a", 2, designate=True)
        await client.alter_sync_state_set("broker-a", 1, 3, {2, 1}, 4)
        sync = await client.get_sync_state_data(["broker-a", "broker-b"])
        await client.clean_broker_data(None, "broker-a", [1, 2])
        config = await client.update_config(b.address, {"enableElectUncleanMaster": True})
        assert await client.heartbeat("c", "broker-a", 2, "10.0.0.6:30911", epoch=3, address=b.address) is None
        await b.wait_until(lambda: RequestCode.BROKER_HEARTBEAT in b.received_codes())
    sent = {cmd.code: cmd for cmd in b.received}
    assert sent[1012].ext_fields == {"clusterName": "c", "brokerName": "broker-a"}
    assert sent[1013].ext_fields == {
        "clusterName": "c", "brokerName": "broker-a", "appliedBrokerId": "2", "registerCheckCode": "10.0.0.6:30911;1700"
    }
    assert sent[1003].ext_fields == {
        "clusterName": "c", "brokerName": "broker-a", "brokerId": "2", "brokerAddress": "10.0.0.6:30911",
        "invokeTime": "1700000000000",
    }
    assert sent[1002].ext_fields == {
        "clusterName": "c", "brokerName": "broker-a", "brokerId": "2", "designateElect": "true",
        "invokeTime": "1700000000000",
    }
    assert sent[1001].ext_fields == {
        "brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "3", "invokeTime": "1700000000000"
    }
    assert sent[1001].body == b'{"syncStateSet":[1,2],"syncStateSetEpoch":4}'
    assert sent[1006].ext_fields is None and loads_fastjson(sent[1006].body) == ["broker-a", "broker-b"]
    assert sync.body == sent[1006].body
    assert sent[1011].ext_fields == {
        "brokerName": "broker-a", "brokerControllerIdsToClean": "1;2", "isCleanLivingBroker": "false",
        "invokeTime": "1700000000000",
    }
    assert loads_properties(sent[1009].body) == {"enableElectUncleanMaster": "true"}
    assert config.code == ResponseCode.SUCCESS
    assert sent[904].flag == ONEWAY_FLAG
    assert sent[904].ext_fields == {
        "clusterName": "c", "brokerAddr": "10.0.0.6:30911", "brokerName": "broker-a", "brokerId": "2", "epoch": "3",
        "maxOffset": "-1", "confirmOffset": "-1", "heartbeatTimeoutMills": "10000", "electionPriority": "2147483647",
    }


async def test_consistency_goes_on_reads_only(cluster: tuple[FakeController, FakeController]) -> None:
    _, b = cluster
    async with make_client([b.address], consistency="lease") as client:
        await client.get_replica_info("broker-a")
        await client.get_next_broker_id("c", "broker-a")
        await client.get_sync_state_data(["broker-a"])
        await client.register_broker("c", "broker-a", 1, "10.0.0.5:30911")
        await client.get_config(b.address)
    tagged = {cmd.code: (cmd.ext_fields or {}).get("consistency") for cmd in b.received}
    assert tagged == {1005: "lease", 1004: "lease", 1012: "lease", 1006: "lease", 1003: None, 1010: None}


async def test_two_way_heartbeat_gets_its_answer(cluster: tuple[FakeController, FakeController]) -> None:
    a, _ = cluster
    async with make_client([a.address]) as client:
        response = await client.heartbeat("c", "broker-a", 1, "10.0.0.5:30911", oneway=False)
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert a.received[0].flag == 0


async def test_client_refuses_use_outside_its_block_and_bad_options() -> None:
    client = make_client(["127.0.0.1:9878"])
    with pytest.raises(ClientClosed):
        await client.get_metadata()
    for bad in ({"consistency": "eventual"}, {"timeout_ms": 0}, {"max_in_flight": 0}, {"max_retries": -1}):
        with pytest.raises(ConfigError):
            make_client(["127.0.0.1:9878"], **bad)
    for addresses in ([], ["nohost"], ["h:0"], ["h:port"], "127.0.0.1:9878"):
        with pytest.raises(ConfigError):
            make_client(addresses)  # type: ignore[arg-type]


async def test_open_connections_are_bounded(
    cluster: tuple[FakeController, FakeController], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = cluster
    monkeypatch.setattr("rmqc.client._client.MAX_CONNECTIONS", 1)
    async with make_client([a.address]) as client:
        await client.get_config(a.address)
        with pytest.raises(TooManyConnections, match="the limit is 1; not opening"):
            await client.get_config(b.address)
        assert client.connected_addresses() == [a.address]
    assert b.connections_accepted == 0


async def test_unusable_leader_address_counts_as_no_leader(cluster: tuple[FakeController, FakeController]) -> None:
    a, _ = cluster
    a.leader_address = "not-an-address"
    async with make_client([a.address], max_retries=1) as client:
        with pytest.raises(RetriesExhausted, match="names leader 'not-an-address', which is not host:port"):
            await client.get_replica_info("broker-a")


async def test_silent_node_gets_a_share_of_the_timeout_during_discovery(
    cluster: tuple[FakeController, FakeController],
) -> None:
    a, b = cluster
    a.silent.add(RequestCode.CONTROLLER_GET_METADATA_INFO)
    async with make_client([a.address, b.address], timeout_ms=1000) as client:
        response = await client.get_replica_info("broker-a")
    assert response.ext("servedBy") == "b"
    assert a.received_codes() == [1005]
