"""Throughput of the remoting codec (pure, in-process): frames encoded and decoded per second.

Usage: python bench/bench_remoting_codec.py [--frames N]
Prints one line per case: frames/s and MB/s for encode, decode in one feed, and decode in 4 KiB reads.
"""

from __future__ import annotations

import argparse
import time

from rmqc.remoting import (
    FrameDecoder,
    RemotingCommand,
    SerializeType,
    dumps_fastjson,
    encode,
    loads_fastjson,
    make_request,
)

HEARTBEAT_EXT = {
    "clusterName": "DefaultCluster",
    "brokerAddr": "10.0.0.5:30911",
    "brokerName": "broker-a",
    "brokerId": 1,
    "epoch": 1,
    "maxOffset": 1024,
    "confirmOffset": 1024,
    "heartbeatTimeoutMills": 10000,
    "electionPriority": 2147483647,
}
ELECT_BODY = {
    "brokerMemberGroup": {"brokerAddrs": {1: "10.0.0.5:30911", 2: "10.0.0.6:30911"}, "brokerName": "broker-a",
                          "cluster": "C"},
    "syncStateSet": [1],
}


def cases() -> dict[str, RemotingCommand]:
    return {
        "heartbeat 904, JSON header": make_request(904, 1, HEARTBEAT_EXT, oneway=True),
        "heartbeat 904, ROCKETMQ header": make_request(904, 1, HEARTBEAT_EXT, serialize_type=SerializeType.ROCKETMQ),
        "1001 with SyncStateSet body": make_request(
            1001, 1, {"brokerName": "broker-a", "masterBrokerId": 1, "masterEpoch": 3},
            b'{"syncStateSet":[1,2],"syncStateSetEpoch":4}',
        ),
    }


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>10,.0f}/s"


def bench_case(name: str, cmd: RemotingCommand, frames: int) -> None:
    start = time.perf_counter()
    for _ in range(frames):
        encode(cmd)
    encode_s = time.perf_counter() - start
    stream = encode(cmd) * frames
    start = time.perf_counter()
    decoded = FrameDecoder().feed(stream)
    whole_s = time.perf_counter() - start
    decoder, chunked = FrameDecoder(), 0
    start = time.perf_counter()
    for offset in range(0, len(stream), 4096):
        chunked += len(decoder.feed(stream[offset : offset + 4096]))
    chunked_s = time.perf_counter() - start
    assert len(decoded) == chunked == frames
    megabytes = len(stream) / 1e6
    print(
        f"{name:32s} {len(stream) // frames:4d} B/frame  encode {rate(frames, encode_s)}  "
        f"decode {rate(frames, whole_s)} ({megabytes / whole_s:6.1f} MB/s)  "
        f"decode 4 KiB reads {rate(frames, chunked_s)}"
    )


def bench_bodies(count: int) -> None:
    text = dumps_fastjson(ELECT_BODY)
    start = time.perf_counter()
    for _ in range(count):
        dumps_fastjson(ELECT_BODY)
    dumps_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(count):
        loads_fastjson(text)
    loads_s = time.perf_counter() - start
    print(f"{'ElectMaster body (fastjson)':32s} {len(text):4d} B/body   "
          f"dumps  {rate(count, dumps_s)}  loads  {rate(count, loads_s)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="remoting codec throughput")
    parser.add_argument("--frames", type=int, default=100_000)
    args = parser.parse_args()
    for case_name, command in cases().items():
        bench_case(case_name, command, args.frames)
    bench_bodies(args.frames)
