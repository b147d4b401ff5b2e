"""The simulated brokers of the NameServer scenarios: broker b is the master (brokerId 0) of its
own broker name and registers (103) a topic table of `topics` topics; brokers come in sets of
BROKERS_PER_TOPIC that carry the same topics (as `mqadmin updateTopic -c` creates a topic on every
broker of a cluster), so a topic's route names a few brokers. The DataVersion never changes: every
registration after the first is the periodic one of a broker whose topics did not change."""

from __future__ import annotations

import functools
import zlib

from rmqc.controller._namesrv_bodies import register_body

from ._rmqc import CLUSTER

BROKERS_PER_TOPIC = 4
# MQVersion.Version.V5_5_0.ordinal(): what a 5.5.0 broker and client send as the request version. A
# Java NameServer reads a 103's body only from V3_0_11 on, answers 105 in standard JSON from V4_9_4.
ROCKETMQ_5_5_0 = 513
DATA_VERSION = (1, 1_700_000_000_000, 1)  # (stateVersion, timestamp, counter)
# Registrations stay live this long without another 103 (the header's heartbeatTimeoutMillis, read
# by both NameServers): a lookup scenario registers its brokers once and is not cut off by the
# 120 s default while it measures.
LIVENESS_MS = 3_600_000


def broker_address(broker: int) -> str:
    return f"10.{broker // 62_500 % 250}.{broker // 250 % 250}.{broker % 250}:10911"


def topic_of(broker: int, index: int) -> str:
    return f"nsb-topic-{broker // BROKERS_PER_TOPIC:05d}-{index:03d}"


@functools.lru_cache(maxsize=1)
def _table_body(topic_set: int, topics: int) -> bytes:
    """The body every broker of a set sends (encoded once per set: a 100-topic body takes ~2 ms)."""
    return register_body(DATA_VERSION, [(topic_of(topic_set * BROKERS_PER_TOPIC, index), 8, 8, 6, 0)
                                        for index in range(topics)])


def registration(broker: int, topics: int) -> tuple[dict[str, object], bytes]:
    """The 103 header and body broker `broker` sends every time it registers."""
    body = _table_body(broker // BROKERS_PER_TOPIC, topics)
    address = broker_address(broker)
    ext: dict[str, object] = {
        "brokerName": f"nsb-broker-{broker:05d}", "brokerAddr": address, "clusterName": CLUSTER,
        "haServerAddr": address, "brokerId": 0, "heartbeatTimeoutMillis": LIVENESS_MS,
        "enableActingMaster": False, "compressed": False, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    return ext, body
