"""The parts of the interop harness that need no Java: the parsers of mqadmin's output (on text
RocketMQ 5.5.0's mqadmin printed against rmqc), the broker configuration the launcher writes, and
the message when `make interop` was not run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqc.javapeers import (
    CLUSTER,
    Broker,
    NameServer,
    RocketMQ,
    classpath,
    parse_sync_state_set,
    rmqc_security_settings,
)
from rmqc.javapeers._processes import NAMESRV_MAIN, broker_ports
from rmqc.launcher import ProcessFailed
from rmqc.testing.acl_accounts import ADMIN, BROKER
from rmqc.testing.certs import Certs
from rmqc.testing.interop import broker_epochs, cluster_list

GET_SYNC_STATE_SET = """

#brokerName\tbroker-a
#MasterBrokerId\t2
#MasterAddr\t127.0.0.1:38225
#MasterEpoch\t2
#SyncStateSetEpoch\t6
#SyncStateSetNums\t2

InSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, brokerAddress='127.0.0.1:47297', alive=true}

InSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, brokerAddress='127.0.0.1:38225', alive=true}

NotInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=3, brokerAddress='127.0.0.1:60807', alive=false}
"""

GET_BROKER_EPOCH = """
#clusterName\trmqc-interop
#brokerName\tbroker-a
#brokerAddr\t127.0.0.1:59145
#brokerId\t2
#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=48365}
#Epoch: EpochEntry{epoch=2, startOffset=48365, endOffset=760302}

#clusterName\trmqc-interop
#brokerName\tbroker-a
#brokerAddr\t127.0.0.1:55035
#brokerId\t0
#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=48365}
#Epoch: EpochEntry{epoch=2, startOffset=48365, endOffset=762692}
"""

CLUSTER_LIST = """
#Cluster Name           #Broker Name            #BID  #Addr                  #Version              #InTPS(LOAD)                   #OutTPS(LOAD)  #Timer(Progress)        #PCWait(ms)  #Hour         #SPACE    #ACTIVATED
rmqc-interop            broker-a                0     127.0.0.1:55035        V5_5_0                 0.00(0,0ms)               0.00(0,0ms|0,0ms)  0-0(0.0w, 0.0, 0.0)               0  498832.91     0.1800          true
rmqc-interop            broker-a                2     127.0.0.1:59145        V5_5_0                 0.00(0,0ms)               0.00(0,0ms|0,0ms)  0-0(0.0w, 0.0, 0.0)               0  498832.91     0.1800         false
"""  # noqa: E501 (mqadmin's own line width)


def test_parse_sync_state_set() -> None:
    state = parse_sync_state_set(GET_SYNC_STATE_SET)
    assert (state["brokerName"], state["MasterBrokerId"], state["MasterAddr"]) == ("broker-a", 2, "127.0.0.1:38225")
    assert (state["MasterEpoch"], state["SyncStateSetEpoch"], state["SyncStateSetNums"]) == (2, 6, 2)
    assert state["in_sync"] == [(1, "127.0.0.1:47297", True), (2, "127.0.0.1:38225", True)]
    assert state["not_in_sync"] == [(3, "127.0.0.1:60807", False)]


def test_parse_broker_epochs_and_cluster_list() -> None:
    assert broker_epochs(GET_BROKER_EPOCH) == {2: [(1, 0, 48365), (2, 48365, 760302)],
                                               0: [(1, 0, 48365), (2, 48365, 762692)]}
    assert cluster_list(CLUSTER_LIST) == {0: ("127.0.0.1:55035", True), 2: ("127.0.0.1:59145", False)}


def test_without_make_interop_the_harness_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQC_INTEROP_DIR", str(tmp_path))
    with pytest.raises(ProcessFailed, match="run `make interop`"):
        classpath()


def test_broker_config_and_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker in controller mode on loopback with its own ports and store; its id is read from
    the identity file the broker writes once the controller gave it one."""
    monkeypatch.setattr("rmqc.javapeers.classpath", lambda: "unused")  # nothing is started
    rmq = RocketMQ(tmp_path)
    rmq.namesrv = NameServer("namesrv", tmp_path / "namesrv", NAMESRV_MAIN, [], "unused", port=9876)
    broker: Broker = rmq.broker(0, ["127.0.0.1:1", "127.0.0.1:2"])
    config = broker.config
    assert config["enableControllerMode"] == "true" and config["brokerId"] == -1
    assert config["controllerAddr"] == "127.0.0.1:1;127.0.0.1:2" and config["brokerClusterName"] == CLUSTER
    assert config["allAckInSyncStateSet"] == "true" and config["fetchNamesrvAddrByAddressServer"] == "false"
    assert len({broker.port, broker.port - 2, broker.ha_port}) == 3
    assert broker.broker_id() is None
    broker.store.mkdir(parents=True)
    (broker.store / "brokerIdentity").write_text(f"{CLUSTER}#broker-a#3")
    assert broker.broker_id() == 3
    port, ha_port = broker_ports()
    assert abs(port - ha_port) > 2


def test_tls_and_acl_settings_of_the_java_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With tls and accounts: every broker and the NameServer run with RocketMQ's TLS system
    properties, a broker signs as its account (ACL 2.0 inner credentials, with the local metadata
    provider it needs to start) unless told otherwise, and the rmqc side enforces TLS with ACL."""
    monkeypatch.setattr("rmqc.javapeers.classpath", lambda: "unused")  # nothing is started
    certs = Certs(*(tmp_path / name for name in ("ca.pem", "node.pem", "node.key", "client.pem", "client.key",
                                                 "other.pem")))
    rmq = RocketMQ(tmp_path, tls=certs, broker_credentials=BROKER, admin_credentials=ADMIN)
    rmq.namesrv_addr = "127.0.0.1:9876"
    signed, unsigned = rmq.broker(0, ["127.0.0.1:1"]), rmq.broker(1, ["127.0.0.1:1"], credentials=False)
    assert json.loads(str(signed.config["innerClientAuthenticationCredentials"])) == \
        {"accessKey": BROKER.access_key, "secretKey": BROKER.secret_key}
    assert str(signed.config["authenticationMetadataProvider"]).endswith("LocalAuthenticationMetadataProvider")
    assert "innerClientAuthenticationCredentials" not in unsigned.config
    for flags in (signed.jvm_flags, rmq.mqadmin.jvm_flags):
        assert {"-Dtls.enable=true", "-Dtls.test.mode.enable=false", "-Dtls.client.authServer=true",
                f"-Dtls.client.trustCertPath={certs.ca}", f"-Dtls.client.certPath={certs.client_cert}"} <= set(flags)
    assert rmq.mqadmin.credentials == ADMIN
    settings = rmqc_security_settings(certs, tmp_path / "plain_acl.yml")
    assert {"tls_mode=enforcing", "tls_auth_client=true", "acl_enabled=true"} <= set(settings)
    assert "acl_enabled=true" not in rmqc_security_settings(certs)
    plain = RocketMQ(tmp_path)
    plain.namesrv_addr = "127.0.0.1:9876"
    assert "-Dtls.enable=true" not in plain.broker(2, ["127.0.0.1:1"]).jvm_flags


def test_two_masters_are_caught_by_the_parsers() -> None:
    """Two rows with BID 0 (two brokers registered as master) must fail, not collapse into one."""
    rows = CLUSTER_LIST.splitlines()
    with pytest.raises(AssertionError, match="two brokers registered as BID 0"):
        cluster_list("\n".join([*rows, rows[2].replace("55035", "55036")]))
    with pytest.raises(AssertionError, match="two brokers answered as brokerId 0"):
        broker_epochs(GET_BROKER_EPOCH + GET_BROKER_EPOCH.split("\n\n")[1])
