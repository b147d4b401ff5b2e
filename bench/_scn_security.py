"""What security costs (issue 15): the same loads on a plain 3-node cluster and on one with TLS
(enforcing, client certificates, peers over mutual TLS), RocketMQ ACL (every request signed and
checked) and the peer secret, in one run, rounds interleaved (off, on, off, on) so that the load
of a shared machine falls on both alike. Writes at 1 and at the profile's most clients (1013, one
Raft entry each), and heartbeats ingested (signed one-way 904s, as fast as TCP takes them)."""

from __future__ import annotations

import collections
import statistics
from pathlib import Path
from typing import Any

from rmqc.acl import Credentials
from rmqc.client import client_tls_context
from rmqc.testing.certs import make_certs

from ._heartbeats import Broker
from ._load import RemotingConn, Workload
from ._points import load_points
from ._rmqc import CLUSTER, RmqcCluster, WriteSequence
from ._scn_brokers import CONNECTIONS_PER_NODE, blast_heartbeats
from ._stats import fmt
from ._suite import Suite, say

# Interleaved rounds per mode; the figures are the medians (one round can meet a burst of other work)
ROUNDS = 3
ACCOUNT = Credentials("bench-broker", "bench-secret-123")
ACL_FILE = f"""accounts:
  - accessKey: {ACCOUNT.access_key}
    secretKey: {ACCOUNT.secret_key}
"""
MODES = ("off", "on")


class SecureSetup:
    """Certificates, the peer secret and the ACL file of the `on` cluster, made once per run."""

    def __init__(self, root: Path) -> None:
        (root / "certs").mkdir(parents=True, exist_ok=True)
        self.certs = make_certs(root / "certs")
        secret = root / "peer.secret"
        secret.write_text("bench-peer-secret-0123456789abcdef\n")
        secret.chmod(0o600)
        acl = root / "plain_acl.yml"
        acl.write_text(ACL_FILE)
        self.settings = {
            "tls_mode": "enforcing", "tls_auth_client": "true", "tls_cert_path": self.certs.node_cert,
            "tls_key_path": self.certs.node_key, "tls_trust_cert_path": self.certs.ca,
            "acl_enabled": "true", "acl_file": acl, "peer_secret_file": secret,
        }
        self.client_context = client_tls_context(str(self.certs.ca), str(self.certs.client_cert),
                                                 str(self.certs.client_key))


async def _one_round(suite: Suite, setup: SecureSetup, mode: str, round_: int) -> dict[str, Any]:
    secure = mode == "on"
    cluster = RmqcCluster(suite.work_dir("security"), 3, settings=setup.settings if secure else None,
                          name=f"security-{mode}-{round_}", ssl_context=setup.client_context if secure else None,
                          credentials=ACCOUNT if secure else None)
    await cluster.start()
    leader = await cluster.leader_id()
    refusals: collections.Counter[str] = collections.Counter()
    writes = WriteSequence(f"{mode}{round_}", refusals)

    async def open_writer(_client: int) -> RemotingConn:
        return await cluster.open_conn(leader)

    async def op(conn: RemotingConn, client: int, _seq: int) -> bool:
        return await writes.write(conn, client)

    clients = (1, max(suite.profile.write_clients))
    points = await load_points(suite, f"security {mode} 1013", Workload(open_writer, op, refusals), clients)
    brokers = [Broker(CLUSTER, f"sec-{i // 3:05d}", i % 3 + 1, f"10.2.{i // 250 % 250}.{i % 250}:10911")
               for i in range(suite.profile.heartbeat_brokers)]
    conns = [await cluster.open_conn(node) for node in cluster.ids for _ in range(CONNECTIONS_PER_NODE)]
    sent, elapsed = await blast_heartbeats(conns, brokers, suite.profile.heartbeat_s)
    for conn in conns:
        await conn.aclose()
    cpu = cluster.cpu_s()
    cluster.stop()
    say(f"   security {mode} heartbeats: {fmt(sent / elapsed, 0)}/s over {elapsed:.1f} s")
    return {"points": points, "heartbeats_per_s": round(sent / elapsed, 1), "cpu_s_per_node": cpu}


def _median_of(rounds: list[dict[str, Any]], clients: int, key: str) -> float:
    return statistics.median(p[key] for r in rounds for p in r["points"] if p["clients"] == clients)


def summarise(by_mode: dict[str, list[dict[str, Any]]], many: int) -> dict[str, Any]:
    """Medians over the rounds, and on/off ratios (throughput: on / off, so 1.0 means free)."""
    figures: dict[str, Any] = {}
    for mode, rounds in by_mode.items():
        figures[mode] = {"writes_per_s_1": round(_median_of(rounds, 1, "ops_per_s"), 1),
                         f"writes_per_s_{many}": round(_median_of(rounds, many, "ops_per_s"), 1),
                         "write_p50_ms_1": round(_median_of(rounds, 1, "p50_ms"), 3),
                         f"write_p99_ms_{many}": round(_median_of(rounds, many, "p99_ms"), 3),
                         "heartbeats_per_s": round(statistics.median(r["heartbeats_per_s"] for r in rounds), 1)}
    off, on = figures["off"], figures["on"]
    figures["ratios"] = {key: round(on[key] / off[key], 2) if off[key] else None
                         for key in ("writes_per_s_1", f"writes_per_s_{many}", "heartbeats_per_s")}
    return figures


async def security(suite: Suite) -> dict[str, Any]:
    setup = SecureSetup(suite.work_dir("security"))
    by_mode: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for round_ in range(ROUNDS):
        for mode in MODES:
            by_mode[mode].append(await _one_round(suite, setup, mode, round_))
    many = max(suite.profile.write_clients)
    figures = summarise(by_mode, many)
    ratios = figures["ratios"]
    say(f"   security on / off: writes x{ratios['writes_per_s_1']} (1 client), "
        f"x{ratios[f'writes_per_s_{many}']} ({many} clients), heartbeats x{ratios['heartbeats_per_s']}")
    conditions = suite.base_conditions(
        system="rmqc", nodes=3, rounds=ROUNDS, brokers=suite.profile.heartbeat_brokers,
        on="tls_mode=enforcing, tls_auth_client=true (peers over mutual TLS), acl_enabled=true (every request "
           "signed, HMAC-SHA1), peer_secret_file", off="defaults (plain TCP, no ACL, loopback peers without secret)",
        request="1013 APPLY_BROKER_ID of a fresh id at the leader; 904 one-way pre-encoded (signed when on), "
                "two-way 904 drain marker")
    return {"conditions": conditions, **figures, "rounds": by_mode}
