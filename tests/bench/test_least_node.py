"""bench/_least_node.py, the least logic of a controller write: it decodes and checks real 1013
frames, its state machine answers as rmqc's does (a retry with the same check code succeeds, a
different one is refused), a follower refuses an append out of order and a damaged record, the
same logic in one process answers every write, and a tiny run of the real three processes answers
every one of rmqc's own 1013 writes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from bench._least_node import (
    APPEND,
    BROKER_ID_INVALID,
    INVALID_REQUEST,
    RECORD,
    SUCCESS,
    TERM,
    BrokerIds,
    Follower,
    apply_entry,
    request_header,
    run_in_process,
)
from bench._rmqc import write_ext
from bench.bench_cpu_floor import main
from rmqc.remoting import FrameDecoder, RequestCode, ResponseCode, encode, make_request


def frame_of(ext: dict[str, object], code: int = RequestCode.CONTROLLER_APPLY_BROKER_ID, opaque: int = 7) -> bytes:
    return encode(make_request(code, opaque, ext))


def test_a_1013_is_taken_and_anything_else_refused() -> None:
    taken = request_header(frame_of(write_ext("r", 0, 0)))
    assert taken is not None and taken[1]["opaque"] == 7
    assert request_header(frame_of(write_ext("r", 0, 0), code=RequestCode.CONTROLLER_GET_NEXT_BROKER_ID)) is None
    assert request_header(frame_of({"clusterName": "c", "brokerName": "b"})) is None  # fields missing
    assert request_header(frame_of({**write_ext("r", 0, 0), "appliedBrokerId": "x"})) is None
    assert request_header(b"\x00\x00\x00\x08\x00\x00\x00\x04{nope") is None
    assert request_header(b"\x00\x00") is None


def test_the_state_machine_answers_a_retry_and_refuses_a_clash() -> None:
    machine = BrokerIds()
    first = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": "1", "registerCheckCode": "a;1"}
    assert machine.apply(first) == SUCCESS
    assert machine.apply(first) == SUCCESS  # the same check code: a retry whose answer was lost
    assert machine.apply({**first, "registerCheckCode": "a;2"}) == BROKER_ID_INVALID
    assert machine.apply({**first, "clusterName": "other"}) == INVALID_REQUEST
    taken = request_header(frame_of(write_ext("r", 0, 1)))
    assert taken is not None
    opaque, code, ext = apply_entry(machine, taken[0])
    assert (opaque, code) == (7, SUCCESS) and set(ext) == {"clusterName", "brokerName"}


def append_of(payloads: list[bytes], previous: int, commit: int, first_index: int | None = None) -> bytes:
    index = previous if first_index is None else first_index - 1
    records = b"".join(RECORD.pack(TERM, index + n + 1, zlib.crc32(p), len(p)) + p for n, p in enumerate(payloads))
    return APPEND.pack(APPEND.size - 4 + len(records), TERM, previous, TERM if previous else 0, commit,
                       len(payloads)) + records


async def test_a_follower_saves_acks_applies_what_is_committed_and_refuses_damage() -> None:
    saved: list[bytes] = []

    async def save(data: bytes) -> None:
        saved.append(data)

    follower = Follower(save)
    payloads = [request_header(frame_of(write_ext("r", 0, seq)))[0] for seq in range(3)]  # type: ignore[index]
    ack = struct.Struct(">IQQ")
    assert ack.unpack(await follower.take_append(append_of(payloads[:2], 0, 0)))[2] == 2
    assert follower.applied == 0 and len(saved) == 1
    assert ack.unpack(await follower.take_append(append_of(payloads[2:], 2, 2)))[2] == 3
    assert follower.applied == 2 and len(follower.machine.sets) == 1 and len(follower.unapplied) == 1
    refused = await follower.take_append(append_of(payloads[:1], 7, 3))  # a gap: previous 7, this has 3
    assert ack.unpack(refused)[2] == 3 and len(saved) == 2
    damaged = bytearray(append_of(payloads[:1], 3, 3))
    damaged[-2] ^= 1
    with pytest.raises(ValueError, match="damaged"):
        await follower.take_append(bytes(damaged))
    assert len(saved) == 2  # nothing damaged was saved


def test_in_one_process_every_write_is_answered_success_in_order() -> None:
    answers = FrameDecoder().feed(b"".join(run_in_process(3, 10)))  # 4 batches of 3
    assert [answer.opaque for answer in answers] == list(range(12))
    assert {answer.code for answer in answers} == {ResponseCode.SUCCESS}


@pytest.mark.slow
def test_a_tiny_run_answers_rmqcs_own_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--clients", "1,3", "--rounds", "1", "--seconds", "0.3", "--least-logic", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    for clients in (1, 3):
        line = next(line for line in out.splitlines()
                    if line.startswith(f"  least-saver clients {clients:4d}:") and "servers" in line)
        assert " 0/s" not in line
    assert "errors; first" not in out  # a write refused or unanswered would count as an error
    assert "least-saver against the targets" in out
