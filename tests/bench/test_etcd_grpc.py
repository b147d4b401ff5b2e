"""The etcd anchor's gRPC client (bench._etcd_grpc): its hand-encoded PutRequest byte for byte (no
etcd needed), and, when etcd is installed, short points of bench_cpu_per_write's gRPC path (1
client: a thread blocking in its calls; 17: grpc.aio)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench._etcd_grpc import THREADED_UP_TO, PutLoad, PutRequest, encode_put_request, put_answered, varint
from bench._loadworker import Share


def test_varint_is_protobufs_base_128_little_endian_groups() -> None:
    assert varint(0) == b"\x00"
    assert varint(1) == b"\x01"
    assert varint(127) == b"\x7f"
    assert varint(128) == b"\x80\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(16384) == b"\x80\x80\x01"
    with pytest.raises(ValueError):
        varint(-1)


def test_a_put_request_is_key_field_1_and_value_field_2_length_delimited() -> None:
    # etcdserverpb.PutRequest{key: "foo", value: "bar"}, as protoc's encoders write it
    assert encode_put_request(PutRequest(b"foo", b"bar")) == bytes.fromhex("0a03666f6f" "1203626172")
    # the anchor's size: a value past 127 bytes takes a two-byte length
    value = b"v" * 973
    encoded = encode_put_request(PutRequest(b"bench/3/17", value))
    assert encoded == b"\x0a\x0abench/3/17" + b"\x12\xcd\x07" + value
    # proto3 leaves empty fields out
    assert encode_put_request(PutRequest(b"k", b"")) == b"\x0a\x01k"


def test_a_put_response_is_answered_when_it_starts_with_its_header() -> None:
    # PutResponse{header: {cluster_id: 1, member_id: 2, revision: 3, raft_term: 4}}
    assert put_answered(bytes.fromhex("0a08" "0801" "1002" "1803" "2004")) is True
    assert put_answered(b"") is False


def test_the_load_goes_to_the_worker_process_and_back_as_json() -> None:
    load = PutLoad("127.0.0.1:2379", 973)
    share = Share(load.spec(), 0, 4, 0.5, 8.0, "/tmp/x.json")
    assert PutLoad.from_spec(Share.from_json(share.to_json()).spec) == load


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd is not installed (apt-get install etcd-server)")
async def test_puts_to_a_three_member_etcd_over_grpc_from_threads_and_from_grpc_aio(tmp_path: Path) -> None:
    from bench.bench_cpu_per_write import etcd_grpc_points

    counts = [1, THREADED_UP_TO + 1]
    points = await etcd_grpc_points(tmp_path, counts, 1.0)
    assert [point.clients for point in points] == counts
    for point in points:
        assert point.ops_per_s > 0 and point.p50_ms > 0
        # the leader's CPU and the followers' went into the writes, and the generator process's was read
        assert point.leader_us > 0 and point.follower_us > 0 and point.generator_us > 0
        assert point.servers_us == pytest.approx(point.leader_us + 2 * point.follower_us)
