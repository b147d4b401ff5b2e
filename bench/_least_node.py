"""One node of bench/bench_cpu_floor.py's `least` variant: the floor's nodes (bench._floor_node) plus
the least logic a replicated controller write needs, written flat, for a budget: what does the
protocol's own work cost on this stack, with no layers, no metrics, no audit, no leases?
`python -m bench._least_node ROLE LOG_FILE PORT [FOLLOWER_PORT ...] [--saver-thread]`.

Steady state only (one leader in term 1, no elections, no catch-up), and per write:
- the leader decodes the client's RocketMQ frame (the 1013 APPLY_BROKER_ID of the write load:
  length, header mark, orjson header) and checks its fields;
- it makes a log record of it (term, index, crc32 of the payload, the payload: the header as it
  came), and one Raft append per batch for each follower (term, previous index and term, commit,
  the records), sent as the floor sends;
- a follower checks the append's term and previous entry, checks every record's crc32, saves the
  records (one append + fdatasync per batch, as the floor), acks (term, match index) and applies
  what the leader's commit covers (orjson decode, the broker set's ids: the state machine);
- the leader takes the acks' match indexes, commits at a majority, applies each entry the same way
  and answers each request with a RocketMQ response frame (orjson header), as rmqc answers a 1013.
A follower learns an entry is committed from the next append, as in Raft.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import zlib
from collections.abc import Coroutine
from functools import partial
from typing import Any

import orjson
import trio

from bench._floor_node import Batching, Save, parse_argv, read, send, send_answer, serve, take_frames
from rmqc.remoting import encode, make_request

TERM = 1
APPLY_BROKER_ID = 1013
SUCCESS, BROKER_ID_INVALID, INVALID_REQUEST = 0, 2014, 2005
RECORD = struct.Struct(">QQII")  # term, index, crc32 of the payload, payload length
APPEND = struct.Struct(">IQQQQI")  # frame length, term, previous index, previous term, commit, records
ACK = struct.Struct(">IQQ")  # frame length, term, match index
MARK = struct.Struct(">II")  # RocketMQ: frame length, serialize type << 24 | header length
FIELDS = ("clusterName", "brokerName", "appliedBrokerId", "registerCheckCode")


class BrokerIds:
    """The state machine: per brokerName its cluster and the ids applied (id -> registerCheckCode)."""

    def __init__(self) -> None:
        self.sets: dict[str, tuple[str, dict[int, str]]] = {}

    def apply(self, ext: dict[str, str]) -> int:
        """The answer's code for one 1013 (a repeat with the same check code is a retry: SUCCESS)."""
        cluster, name, check = ext["clusterName"], ext["brokerName"], ext["registerCheckCode"]
        broker_id = int(ext["appliedBrokerId"])
        entry = self.sets.get(name)
        if entry is None:
            entry = self.sets[name] = (cluster, {})
        if entry[0] != cluster:
            return INVALID_REQUEST
        ids = entry[1]
        if broker_id in ids:
            return SUCCESS if ids[broker_id] == check else BROKER_ID_INVALID
        ids[broker_id] = check
        return SUCCESS


def request_header(frame: bytes) -> tuple[bytes, dict[str, Any]] | None:
    """The header bytes and decoded header of a valid 1013 frame (length prefix included), else None."""
    if len(frame) < MARK.size:
        return None
    length = MARK.unpack_from(frame)[1] & 0xFFFFFF
    raw = frame[MARK.size:MARK.size + length]
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    ext = header.get("extFields") if type(header) is dict else None
    if (header.get("code") != APPLY_BROKER_ID or type(header.get("opaque")) is not int or type(ext) is not dict
            or not all(type(ext.get(field)) is str for field in FIELDS) or not ext["appliedBrokerId"].isdigit()):
        return None
    return raw, header


def answer(opaque: int, code: int, ext: dict[str, str] | None) -> bytes:
    header = orjson.dumps({"code": code, "extFields": ext, "flag": 1, "language": "JAVA", "opaque": opaque,
                           "serializeTypeCurrentRPC": "JSON", "version": 0})
    return MARK.pack(4 + len(header), len(header)) + header


def apply_entry(machine: BrokerIds, payload: bytes) -> tuple[int, int, dict[str, str]]:
    """(opaque, answer code, the answer's extFields) of one committed entry."""
    header = orjson.loads(payload)
    ext = header["extFields"]
    return header["opaque"], machine.apply(ext), {"clusterName": ext["clusterName"], "brokerName": ext["brokerName"]}


class Follower:
    def __init__(self, save: Save) -> None:
        self.save = save
        self.machine = BrokerIds()
        self.last_index = 0
        self.last_term = 0
        self.unapplied: list[bytes] = []  # payloads after the last applied index, in order
        self.applied = 0

    async def serve(self, stream: trio.SocketStream) -> None:
        fd = stream.socket.fileno()  # the stream stays referenced here: it owns the socket
        buffer = bytearray()
        while data := await read(fd):
            buffer += data
            for frame in take_frames(buffer):
                await send(fd, await self.take_append(frame))

    async def take_append(self, frame: bytes) -> bytes:
        """The ack of one append frame (match index 0 with this node's last index: refused)."""
        _, term, previous_index, previous_term, commit, count = APPEND.unpack_from(frame)
        if term != TERM or previous_index != self.last_index or previous_term != self.last_term:
            return ACK.pack(ACK.size - 4, TERM, self.last_index)
        position = APPEND.size
        for _ in range(count):
            record_term, index, crc, length = RECORD.unpack_from(frame, position)
            payload = frame[position + RECORD.size:position + RECORD.size + length]
            if index != self.last_index + 1 or zlib.crc32(payload) != crc:
                raise ValueError(f"append record {index} is damaged or out of order")
            self.unapplied.append(payload)
            self.last_index, self.last_term = index, record_term
            position += RECORD.size + length
        await self.save(frame[APPEND.size:position])
        ready = max(0, min(commit, self.last_index) - self.applied)
        for payload in self.unapplied[:ready]:
            apply_entry(self.machine, payload)
        del self.unapplied[:ready]
        self.applied += ready
        return ACK.pack(ACK.size - 4, TERM, self.last_index)


class LeaderLog:
    """The leader's side without I/O: a batch's append, the followers' match indexes, the answers."""

    def __init__(self, followers: int) -> None:
        self.machine = BrokerIds()
        self.last_index = 0
        self.commit = 0
        self.matched = [0] * followers
        self.majority = (followers + 1) // 2  # followers' acks that make a majority with the leader

    def append(self, payloads: list[bytes]) -> tuple[bytes, bytes]:
        """The append frame for every follower and the records to save, of one batch."""
        previous = self.last_index
        records = []
        for payload in payloads:
            self.last_index += 1
            records.append(RECORD.pack(TERM, self.last_index, zlib.crc32(payload), len(payload)) + payload)
        body = b"".join(records)
        append = APPEND.pack(APPEND.size - 4 + len(body), TERM, previous, TERM if previous else 0,
                             self.commit, len(payloads)) + body
        return append, body

    def take_ack(self, index: int, frame: bytes) -> None:
        term, match = ACK.unpack_from(frame)[1:]
        if term != TERM:
            raise ConnectionError(f"follower {index} is in term {term}")
        self.matched[index] = max(self.matched[index], match)

    def holds_majority(self) -> bool:
        return sorted(self.matched, reverse=True)[self.majority - 1] >= self.last_index

    def answers(self, payloads: list[bytes]) -> list[bytes]:
        """The batch committed: each entry applied and its answer frame, in order."""
        self.commit = self.last_index
        return [answer(*apply_entry(self.machine, payload)) for payload in payloads]


class Leader(Batching):
    """Its pending requests are (client connection, entry payload: the request's header)."""

    def __init__(self, followers: list[trio.SocketStream], save: Save) -> None:
        super().__init__(followers, save)
        self.log = LeaderLog(len(followers))

    async def client(self, stream: trio.SocketStream) -> None:
        fd = stream.socket.fileno()
        buffer = bytearray()
        async with stream:
            with contextlib.suppress(OSError):  # a client gone: its connection only
                while data := await read(fd):
                    buffer += data
                    for frame in take_frames(buffer):
                        if (taken := request_header(frame)) is None:
                            await send(fd, answer(0, INVALID_REQUEST, None))
                            continue
                        self.pending.append((stream, taken[0]))
                    self.work.unpark()

    async def committer(self) -> None:
        while True:
            batch = await self.next_batch()
            payloads = [payload for _, payload in batch]
            append, records = self.log.append(payloads)
            for peer in self.followers:
                await send(peer.socket.fileno(), append)
            await self.save(records)
            while not self.log.holds_majority():
                await self.acks.park()
            for (stream, _), frame in zip(batch, self.log.answers(payloads), strict=True):
                await send_answer(stream, frame)

    def take_ack(self, index: int, frame: bytes) -> None:
        self.log.take_ack(index, frame)


def run_in_process(clients: int, writes: int) -> list[bytes]:
    """The same logic for `writes` 1013s, `clients` a batch, a leader and two followers in one
    process with no I/O (bench/bench_logic_instructions.py counts its instructions, as it counts
    rmqc's in bench_replicated_logic.one_run): the answer frames, in order."""
    from bench._rmqc import write_ext  # here: a node process has no use for the harness's imports

    leader, followers = LeaderLog(2), [Follower(_nothing_to_save) for _ in range(2)]
    answers: list[bytes] = []
    for first in range(0, writes, clients):
        frames = [encode(make_request(APPLY_BROKER_ID, first + client, write_ext("least", client, first // clients)))
                  for client in range(clients)]
        payloads = [taken[0] for frame in frames if (taken := request_header(frame)) is not None]
        append, _ = leader.append(payloads)
        for index, follower in enumerate(followers):
            leader.take_ack(index, _finished(follower.take_append(append)))
        if not leader.holds_majority():
            raise RuntimeError(f"writes {first}..: no majority after both followers acked")
        answers += leader.answers(payloads)
    return answers


async def _nothing_to_save(_records: bytes) -> None:
    pass


def _finished(step: Coroutine[Any, Any, bytes]) -> bytes:
    """What a coroutine that never waits returns (a follower's append, saving nothing)."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise RuntimeError("the step waited: it was expected to finish at once")


def main(argv: list[str]) -> None:
    role, log_path, port, follower_ports, flags = parse_argv(argv, {"--saver-thread"})
    trio.run(partial(serve, role, log_path, port, follower_ports, "--saver-thread" in flags, fdatasync=True,
                     follow=lambda stream, save: Follower(save).serve(stream), lead=Leader))


if __name__ == "__main__":
    main(sys.argv[1:])
