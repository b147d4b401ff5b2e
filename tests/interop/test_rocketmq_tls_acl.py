"""Real Apache RocketMQ (the release pinned in interop/java/pom.xml) against real `rmqc serve` nodes
with TLS enforcing (client certificates required, peers over mutual TLS, notifications over TLS)
and, in the second test, ACL on: the NameServer, the brokers and mqadmin run with RocketMQ's TLS
system properties and the test's own CA (rmqc.testing.certs), the brokers sign with an account
(broker.conf innerClientAuthenticationCredentials) and mqadmin with an admin account
(conf/tools.yml). docs/interop.md says how each Java side is configured and why."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rmqc.acl import Credentials
from rmqc.client import ClientError, ControllerClient, client_tls_context
from rmqc.javapeers import (
    CLUSTER,
    GROUP,
    RocketMQ,
    bring_up,
    mqadmin_ok,
    replica_state,
    rmqc_security_settings,
    wait_for,
)
from rmqc.testing.acl_accounts import ADMIN, BROKER, PLAIN_ACL_YML
from rmqc.testing.certs import Certs, make_certs
from rmqc.testing.cluster import Cluster
from rmqc.testing.interop import (
    broker_epochs,
    check_bring_up,
    failover,
    mqadmin_controller_commands,
    mqadmin_sync_state_set,
)

# above pytest's 300 s: the mqadmin test starts 20 JVMs one after the other (one per command),
# 3-15 s each on a loaded 2-core machine; the others took 140 s, with little to spare under load
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REFUSED_UNSIGNED = "address not allowed: unsigned requests are accepted only from whitelisted addresses"
NOT_ADMIN = "not an admin: this request needs an account with admin: true"


def client_tls(certs: Certs) -> ssl.SSLContext:
    return client_tls_context(str(certs.ca), str(certs.client_cert), str(certs.client_key))


async def plain_client_refused(cluster: Cluster) -> bool:
    """True if a plain (non-TLS) 1005 to the first node gets no answer: tls_mode enforcing."""
    try:
        async with ControllerClient(cluster.addresses[:1], max_retries=0, timeout_ms=3000) as plain:
            await plain.get_metadata(cluster.addresses[0])
    except (ClientError, BaseExceptionGroup) as error:  # the client's nursery may wrap it in a group
        if isinstance(error, BaseExceptionGroup) and error.subgroup(ClientError) is None:
            raise
        return True
    return False


def node_logs(cluster: Cluster) -> str:
    return "\n".join(node.log_path.read_text(errors="replace") for node in cluster.nodes)


@contextlib.asynccontextmanager
async def secured(tmp_path: Path, acl: bool) -> AsyncIterator[tuple[Cluster, RocketMQ, ControllerClient]]:
    """Three rmqc nodes with TLS enforcing (and ACL with `acl`), the Java side with TLS (brokers
    signing as BROKER, mqadmin as ADMIN with `acl`), and a client of the test (TLS, ADMIN); every
    process stopped on the way out, the logs printed when the test failed."""
    certs = make_certs(mkdir(tmp_path / "certs"))
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL_YML)
    cluster = Cluster.create(tmp_path, 3, rmqc_security_settings(certs, acl_file if acl else None))
    await cluster.start()
    accounts = {"broker_credentials": BROKER, "admin_credentials": ADMIN} if acl else {}
    rmq = RocketMQ(tmp_path, tls=certs, **accounts)
    try:
        async with rmq, ControllerClient(cluster.addresses, max_retries=10, ssl_context=client_tls(certs),
                                         credentials=ADMIN if acl else None) as admin:
            await cluster.wait_leader(admin)
            yield cluster, rmq, admin
    except BaseException:
        print(cluster.logs())
        print(rmq.logs())
        raise
    finally:
        await cluster.stop()


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


async def test_tls_brokers_come_up_and_fail_over_against_rmqc_enforcing_tls(tmp_path: Path) -> None:
    """TLS only: the brokers, the NameServer and mqadmin dial TLS (a plain connection to rmqc is
    refused, and no node logs one from them); ids 1-3, one master, the SyncStateSet of three
    (1001 from the master over TLS); a master SIGKILLed under the Producer fails over to a slave
    and the old master rejoins, 0 acknowledged messages lost."""
    async with secured(tmp_path, acl=False) as (cluster, rmq, admin):
        assert await plain_client_refused(cluster)
        brokers = await bring_up(rmq, cluster, admin)
        print("interop TLS bring-up:", await check_bring_up(rmq, cluster, admin, brokers))
        report = await failover(rmq, cluster, admin, brokers)
        print("interop TLS failover timeline:", report)
        assert report["lost"] == 0 and report["acknowledged"] >= 250
        # the only plain connection any node saw is the test's own probe
        assert node_logs(cluster).count("refusing plain connection") == 1, node_logs(cluster)


async def test_signed_brokers_fail_over_and_a_wrong_secret_is_refused(tmp_path: Path) -> None:
    """TLS enforcing and ACL on: brokers signing with the broker account come up (ids, master,
    SyncStateSet of three); a broker of another group signing with a wrong secret is refused
    with NO_PERMISSION 'bad signature', which it logs, gets no id and no group; the signed group's
    master SIGKILLed under the Producer then fails over, 0 lost."""
    async with secured(tmp_path, acl=True) as (cluster, rmq, admin):
        brokers = await bring_up(rmq, cluster, admin)
        await wrong_secret_broker_refused(rmq, cluster, admin)
        report = await failover(rmq, cluster, admin, brokers)
        print("interop ACL failover timeline:", report)
        assert report["lost"] == 0 and report["acknowledged"] >= 250


async def test_mqadmin_controller_commands_with_acl(tmp_path: Path) -> None:
    """TLS enforcing and ACL on. Unsigned, every controller command is refused, reads too (no
    address is whitelisted); signed with the broker account, reads work and the admin writes are
    refused 'not an admin'; nothing changed by them (the group here, the configuration in
    mqadmin_controller_commands' first check). Signed with the admin account:
    getControllerMetaData, getBrokerEpoch, getControllerConfig, updateControllerConfig,
    electMaster, getSyncStateSet, cleanBrokerMetadata work."""
    async with secured(tmp_path, acl=True) as (cluster, rmq, admin):
        brokers = await bring_up(rmq, cluster, admin)
        print("interop ACL refused:", await mqadmin_refused_without_rights(rmq, cluster, admin))
        leader = await cluster.wait_leader(admin)
        out = await mqadmin_ok(rmq, "getControllerMetaData", "-a", cluster.addresses[0])
        assert f"#ControllerLeaderAddress\t{leader}" in out, out
        assert rmq.namesrv is not None
        epochs = broker_epochs(await mqadmin_ok(rmq, "getBrokerEpoch", "-n", rmq.namesrv.address, "-b", GROUP))
        assert len(epochs) == 3, epochs
        print("interop ACL mqadmin:", await mqadmin_controller_commands(rmq, cluster, admin, brokers))


async def wrong_secret_broker_refused(rmq: RocketMQ, cluster: Cluster, admin: ControllerClient) -> None:
    """A broker of group broker-bad signing as the broker account with a wrong secret."""
    wrong = Credentials(BROKER.access_key, "wrong-secret")
    impostor = rmq.broker(0, cluster.addresses, "broker-bad", credentials=wrong)
    await impostor.start()

    async def refused_and_told() -> bool:
        refused = "bad signature" in node_logs(cluster)
        told = impostor.log_path.is_file() and "bad signature" in impostor.log_path.read_text(errors="replace")
        return refused and told

    await wait_for(refused_and_told, 60, "rmqc refusing the wrong secret and the broker logging the remark", 0.5)
    assert impostor.running and impostor.broker_id() is None, impostor.tail()
    answer = await admin.get_replica_info("broker-bad")
    assert answer.code != 0, answer  # no such group
    impostor.kill()
    await impostor.wait_exit()


async def mqadmin_refused_without_rights(rmq: RocketMQ, cluster: Cluster,
                                         admin: ControllerClient) -> dict[str, list[str]]:
    """mqadmin unsigned and with the broker (non-admin) account: what is refused, with which remark;
    afterwards the group and the configuration are as they were."""
    before = await replica_state(admin)
    master, _, in_sync = before
    slave = next(broker_id for broker_id in in_sync if broker_id != master)
    first = cluster.addresses[0]
    writes = {
        "updateControllerConfig": ("-a", first, "-k", "electMasterMaxRetryCount", "-v", "7"),
        "electMaster": ("-a", first, "-c", CLUSTER, "-bn", GROUP, "-b", str(slave)),
        "cleanBrokerMetadata": ("-a", first, "-c", CLUSTER, "-bn", GROUP, "-b", str(slave), "-l"),
    }
    refused: dict[str, list[str]] = {"unsigned": [], "broker account": []}
    for command, args in {"getControllerMetaData": ("-a", first), **writes}.items():
        _, out = await rmq.mqadmin(command, *args, credentials=False)
        assert REFUSED_UNSIGNED in out, (command, out)
        refused["unsigned"].append(command)
    state = await mqadmin_sync_state_set(rmq, first, credentials=BROKER)
    assert (state["MasterBrokerId"], sorted(i for i, _, _ in state["in_sync"])) == (master, in_sync), state
    for command, args in writes.items():
        _, out = await rmq.mqadmin(command, *args, credentials=BROKER)
        assert NOT_ADMIN in out, (command, out)
        refused["broker account"].append(command)
    assert await replica_state(admin) == before
    return refused

