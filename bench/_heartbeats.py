"""Heartbeat (904, one-way) traffic made cheap for the load side: every broker's frame is encoded
once and the same bytes are sent again each round, so the generator costs a memcpy per heartbeat
and the figures measure the controllers, not the Python that loads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import trio

from rmqc.acl import Credentials
from rmqc.remoting import RequestCode, ResponseCode, encode, make_request

from ._load import RemotingConn

HEARTBEAT_TIMEOUT_MS = 10_000  # the Java broker's controllerHeartBeatTimeoutMills
# Frames joined into one send; big enough to make the send cheap, small enough to interleave.
FRAMES_PER_SEND = 500


@dataclass(frozen=True)
class Broker:
    cluster: str
    name: str
    broker_id: int
    address: str


def heartbeat_ext(broker: Broker, epoch: int = 1, max_offset: int = 0) -> dict[str, object]:
    return {"clusterName": broker.cluster, "brokerAddr": broker.address, "brokerName": broker.name,
            "brokerId": broker.broker_id, "epoch": epoch, "maxOffset": max_offset, "confirmOffset": max_offset,
            "heartbeatTimeoutMills": HEARTBEAT_TIMEOUT_MS, "electionPriority": 2**31 - 1}


def heartbeat_chunks(brokers: Sequence[Broker], credentials: Credentials | None = None) -> list[bytes]:
    """The frames, joined FRAMES_PER_SEND at a time; signed once each with `credentials` (an ACL
    signature covers the fields only, so the same bytes stay valid every round, as in RocketMQ)."""
    requests = [make_request(RequestCode.BROKER_HEARTBEAT, 0, heartbeat_ext(b), oneway=True) for b in brokers]
    if credentials is not None:
        for request in requests:
            credentials.sign(request)
    frames = [encode(request) for request in requests]
    return [b"".join(frames[i:i + FRAMES_PER_SEND]) for i in range(0, len(frames), FRAMES_PER_SEND)]


async def drain_marker(conn: RemotingConn, broker: Broker) -> None:
    """A two-way heartbeat: its answer means the node has read everything sent before it."""
    response = await conn.call(RequestCode.BROKER_HEARTBEAT, heartbeat_ext(broker))
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"heartbeat answered {response.code} {response.remark}")


async def send_rounds(conn: RemotingConn, chunks: list[bytes], interval_s: float) -> None:
    """Every `interval_s`, send all chunks spread evenly over the interval (1 heartbeat/s/broker),
    until the connection is closed (closing it is how a scenario makes these brokers vanish)."""
    if not chunks:
        return
    gap_s = interval_s / len(chunks)
    deadline = trio.current_time()
    try:
        while True:
            for chunk in chunks:
                await conn.stream.send_all(chunk)
                deadline += gap_s
                await trio.sleep_until(deadline)
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        return
