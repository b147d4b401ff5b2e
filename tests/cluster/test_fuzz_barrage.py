"""A barrage of hostile bytes at a live 3-node cluster (real processes, peer secret and ACL on):
tens of thousands of frames, while a signed client keeps registering brokers and reading. Most are
well-formed requests of every controller code with random field values and bodies, half of them
signed (so the request processors, not only the ACL, meet them); the rest are mutated frames,
random bytes, lying lengths and truncated or forged peer handshakes. Every answer is a well-formed
response, the cluster keeps serving, no node dies or grows much, the term holds, and the state
holds only what the signed client wrote plus groups the signed fuzz frames named (all `fuzz-*`)."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import orjson
import pytest
import trio

from rmqc.acl import Credentials
from rmqc.client import ControllerClient
from rmqc.remoting import RMQC_NODE_STATUS, FrameDecoder, RemotingProtocolError, SerializeType, encode, make_request
from rmqc.testing.cluster import CLUSTER, Cluster

pytestmark = pytest.mark.slow
ACL = "accounts:\n  - accessKey: fleet-key\n    secretKey: fleet-secret\n    admin: true\n"
SIGNER = Credentials("fleet-key", "fleet-secret")
CONNECTIONS = 400
FRAMES_PER_CONNECTION = 60  # 24,000 frames in all, in bursts of 60 per connection
ATTACKERS_AT_ONCE = 16
MAX_RSS_GROWTH_MB = 60
FIELDS = ("clusterName", "brokerName", "brokerId", "brokerAddress", "brokerAddr", "masterEpoch",
          "syncStateSetEpoch", "designateElect", "appliedBrokerId", "registerCheckCode", "epoch", "maxOffset",
          "confirmOffset", "heartbeatTimeoutMills", "electionPriority", "invokeTime", "consistency",
          "brokerControllerIdsToClean", "isCleanLivingBroker", "groupNames")
# Signed fuzz may do whatever an account may, but not clean the real groups away (1011) or
# reconfigure the nodes (1009): those two go unsigned and must be refused.
SIGNED_CODES = (904, 1001, 1002, 1003, 1004, 1005, 1006, 1010, 1012, 1013, RMQC_NODE_STATUS)


def random_value(rng: random.Random) -> str:
    return rng.choice([str(rng.randint(-2**63, 2**63)), str(rng.randint(-3, 3)), "", "true", "false", "null",
                       "x" * rng.randint(1, 2000), "\u00e9\u0000\ud7ff" * 3, "127.0.0.1:1;2", "1;2;3",
                       os.urandom(8).hex(), "NaN", "1e400", "{}", "[1,2]"])


def random_body(rng: random.Random) -> bytes | None:
    return rng.choice([None, b"", os.urandom(rng.randint(1, 300)), b'["fuzz-a","fuzz-b"]', b"{",
                       b'{"brokerName":"fuzz-b","syncStateSet":[1,2]}', b"a=b\nc", b"[" * 500])


def fuzz_request(rng: random.Random) -> tuple[bytes, int | None]:
    """A frame and the opaque its answer will carry (None: one-way, no answer)."""
    code = rng.choice([*SIGNED_CODES, 1009, 1011, 1007, 1014, 0, 99999])
    ext = {name: random_value(rng) for name in rng.sample(FIELDS, rng.randint(0, len(FIELDS)))}
    ext["brokerName"] = "fuzz-" + str(rng.randrange(50))
    request = make_request(code, rng.randrange(2**31), ext, random_body(rng), oneway=rng.random() < 0.2)
    if code in SIGNED_CODES and rng.random() < 0.5:
        SIGNER.sign(request)
    return encode(request), None if request.is_oneway else request.opaque


def seed_frames() -> list[bytes]:
    """Well-formed requests of every controller code, both header types, some signed."""
    ext = {"clusterName": CLUSTER, "brokerName": "fuzz", "brokerId": "1", "brokerAddress": "127.0.0.1:1",
           "masterEpoch": "1", "designateElect": "true", "appliedBrokerId": "1", "registerCheckCode": "x;1"}
    frames = []
    for code in (904, *range(1001, 1014), RMQC_NODE_STATUS):
        for kind in SerializeType if code < 2**15 else [SerializeType.JSON]:  # ROCKETMQ codes are int16
            request = make_request(code, 7, ext, b'{"x":1}', oneway=code == 904, serialize_type=kind)
            if code % 2:
                SIGNER.sign(request)  # mutations of these carry a signature that no longer matches
            frames.append(encode(request))
    return frames


def mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    choice = rng.randrange(6)
    if choice == 0:  # bit flips
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif choice == 1:  # truncated
        del data[rng.randrange(1, len(data)):]
    elif choice == 2:  # a lying length
        struct.pack_into(">I", data, 0, rng.choice([0, 1, 4, len(data) * 2, 2**31 - 1, 0x524D5150 - 1]))
    elif choice == 3:  # random bytes spliced in
        at = rng.randrange(len(data))
        data[at:at] = os.urandom(rng.randint(1, 64))
    elif choice == 4:  # a header length beyond the frame
        struct.pack_into(">I", data, 4, (data[4] << 24) | rng.randrange(1 << 24))
    else:
        return os.urandom(rng.randint(1, 200))
    return bytes(data)


async def barrage(address: str, rng: random.Random, seeds: list[bytes]) -> int:
    """One connection: a burst of well-formed fuzz requests, every two-way one answered exactly once
    with a response; then one mutated frame, after which the node may close. The answers' count."""
    host, port = address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    try:
        frames, opaques = zip(*(fuzz_request(rng) for _ in range(FRAMES_PER_CONNECTION - 1)), strict=True)
        expected = sorted(opaque for opaque in opaques if opaque is not None)
        await stream.send_all(b"".join(frames))
        answers = await _answers(stream, len(expected))
        assert all(answer.is_response for answer in answers)
        assert sorted(answer.opaque for answer in answers) == expected
        await stream.send_all(mutate(rng, rng.choice(seeds)))
        with trio.move_on_after(1):  # whatever it answers must still be well-formed responses
            await _answers(stream, FRAMES_PER_CONNECTION)
    except (trio.BrokenResourceError, RemotingProtocolError):
        pass  # closed or reset by the node after the mutated frame
    finally:
        await stream.aclose()
    return len(expected)


async def _answers(stream: trio.SocketStream, count: int) -> list:  # type: ignore[type-arg]
    decoder = FrameDecoder()
    answers = []
    with trio.fail_after(15):
        while len(answers) < count:
            data = await stream.receive_some(65536)
            if not data:
                break
            answers.extend(decoder.feed(data))
    assert all(answer.is_response for answer in answers)
    return answers


async def peer_garbage(address: str, rng: random.Random) -> None:
    """Truncated, oversize and forged peer handshakes."""
    host, port = address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    try:
        hello = b"RMQP\x00\x02" + bytes([2]) + b"n1" + bytes([4]) + b"rmqc" + bytes([2]) + b"n0" + os.urandom(32)
        garbage = rng.choice([hello[:rng.randrange(4, len(hello))], b"RMQP" + os.urandom(2000),
                              hello + os.urandom(132)])
        await stream.send_all(garbage)
        with trio.move_on_after(1):
            while await stream.receive_some(4096):
                pass
    except trio.BrokenResourceError:
        pass
    finally:
        await stream.aclose()


async def writer(client: ControllerClient, written: list[str], stop: trio.Event) -> None:
    """The signed client: a new broker group every round, read back at once."""
    index = 0
    while not stop.is_set():
        name = f"real-{index}"
        answer = await client.apply_broker_id(CLUSTER, name, 1, f"127.0.0.1:{20000 + index};1")
        assert answer.code == 0, answer.remark
        written.append(name)
        assert (await client.get_next_broker_id(CLUSTER, name)).ext("nextBrokerId") == "2"
        index += 1


async def status(client: ControllerClient, address: str) -> dict:
    answer = await client.request(RMQC_NODE_STATUS, address=address)
    assert answer is not None and answer.code == 0
    return orjson.loads(answer.body)


async def attack_all(cluster: Cluster) -> int:
    """Every connection's burst, ATTACKERS_AT_ONCE at a time; the number of answers."""
    rng = random.Random(15)
    seeds = seed_frames()
    answered = 0
    limit = trio.CapacityLimiter(ATTACKERS_AT_ONCE)

    async def attack(index: int, seed: int) -> None:
        nonlocal answered
        async with limit:
            address = cluster.addresses[index % len(cluster.addresses)]
            got = await barrage(address, random.Random(seed), seeds)
            answered += got  # not `answered += await ...`: that reads `answered` before the await
            if index % 10 == 0:
                await peer_garbage(address, random.Random(seed))

    async with trio.open_nursery() as nursery:
        for index in range(CONNECTIONS):
            nursery.start_soon(attack, index, rng.getrandbits(64))
    return answered


async def test_hostile_bytes_change_nothing_and_the_cluster_keeps_serving(tmp_path: Path) -> None:
    (tmp_path / "peer.secret").write_text("barrage-peer-secret-0123456789\n")
    (tmp_path / "plain_acl.yml").write_text(ACL)
    cluster = Cluster.create(tmp_path, 3, settings=(
        f"peer_secret_file={tmp_path / 'peer.secret'}", "acl_enabled=true", f"acl_file={tmp_path / 'plain_acl.yml'}"))
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, max_retries=10, credentials=SIGNER) as client:
            await cluster.wait_leader(client)
            before = [await status(client, node.address) for node in cluster.nodes]
            rss_before = [node.process.rss_mb() or 0.0 for node in cluster.nodes if node.process is not None]
            written: list[str] = []
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(writer, client, written, stop)
                answered = await attack_all(cluster)
                stop.set()
            after = [await status(client, node.address) for node in cluster.nodes]
            rss_after = [node.process.rss_mb() or 0.0 for node in cluster.nodes if node.process is not None]
            assert answered > CONNECTIONS * FRAMES_PER_CONNECTION // 2  # each two-way fuzz request was answered
            assert written, "the signed client wrote nothing during the barrage"
            assert [s["term"] for s in after] == [s["term"] for s in before]
            assert [s["leader"] for s in after] == [s["leader"] for s in before]
            assert all(node.running for node in cluster.nodes)
            assert all(grown - was < MAX_RSS_GROWTH_MB for grown, was in zip(rss_after, rss_before, strict=True))
            answer = await client.request(RMQC_NODE_STATUS, {"groupNames": "true"})
            assert answer is not None
            names = set(orjson.loads(answer.body)["groupNames"])
            assert set(written) <= names
            assert all(name.startswith("fuzz-") for name in names - set(written))  # nothing else got in
            for node in cluster.nodes:  # every hostile input met a named error, never a crash
                assert node.process is not None and "Traceback" not in node.process.log_text(), node.log_tail()
    finally:
        await cluster.stop()
