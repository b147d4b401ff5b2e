"""Frames: golden frames from Java's tests and the spec, decoder feeding patterns, malformed input."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rmqc.errors import BoundExceeded, ConfigError, ProtocolError
from rmqc.remoting import (
    ONEWAY_FLAG,
    READ_REQUESTS,
    RESPONSE_FLAG,
    FrameDecoder,
    FrameTooLarge,
    RemotingCommand,
    RemotingProtocolError,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode,
    make_request,
    make_response,
)

GOLDEN_PATH = Path(__file__).resolve().parents[1] / "spec" / "golden-frames.json"
GOLDEN = json.loads(GOLDEN_PATH.read_text())
GOLDEN_FRAMES = [entry for entry in GOLDEN if entry["part"].startswith("frame")]
GOLDEN_MARKS = [entry for entry in GOLDEN if entry["part"].startswith("header-mark")]


def fields_of(cmd: RemotingCommand) -> dict[str, object]:
    return {
        "code": cmd.code,
        "flag": cmd.flag,
        "opaque": cmd.opaque,
        "language": cmd.language,
        "version": cmd.version,
        "remark": cmd.remark,
        "extFields": cmd.ext_fields,
        "serializeType": cmd.serialize_type.name,
    }


def feed_bytewise(decoder: FrameDecoder, data: bytes) -> list[RemotingCommand]:
    commands: list[RemotingCommand] = []
    for index in range(len(data)):
        commands += decoder.feed(data[index : index + 1])
    return commands


def test_golden_file_has_the_frames_the_brief_names() -> None:
    assert len(GOLDEN) == 14
    assert len(GOLDEN_FRAMES) == 12 and len(GOLDEN_MARKS) == 2


@pytest.mark.parametrize("golden", GOLDEN_FRAMES, ids=lambda g: g["name"])
def test_golden_frame_decodes_whole(golden: dict) -> None:
    [cmd] = FrameDecoder().feed(bytes.fromhex(golden["hex"]))
    assert fields_of(cmd) == golden["decoded"]
    assert cmd.body == expected_body(golden)


@pytest.mark.parametrize("golden", GOLDEN_FRAMES, ids=lambda g: g["name"])
def test_golden_frame_decodes_one_byte_at_a_time(golden: dict) -> None:
    data = bytes.fromhex(golden["hex"])
    decoder = FrameDecoder()
    assert decoder.feed(data[:-1]) == []
    assert decoder.buffered_bytes == len(data) - 1
    [cmd] = decoder.feed(data[-1:])
    assert decoder.buffered_bytes == 0
    [again] = feed_bytewise(FrameDecoder(), data)
    assert again == cmd
    assert fields_of(again) == golden["decoded"]


@pytest.mark.parametrize("golden", GOLDEN_FRAMES, ids=lambda g: g["name"])
def test_golden_frame_with_trailing_data_leaves_the_rest_buffered(golden: dict) -> None:
    data = bytes.fromhex(golden["hex"])
    decoder = FrameDecoder()
    commands = decoder.feed(data + data + data[:7])
    assert [fields_of(c) for c in commands] == [golden["decoded"]] * 2
    assert decoder.buffered_bytes == 7
    [third] = decoder.feed(data[7:])
    assert fields_of(third) == golden["decoded"] and decoder.buffered_bytes == 0


@pytest.mark.parametrize("golden", GOLDEN_FRAMES, ids=lambda g: g["name"])
def test_golden_frame_encodes_byte_exact(golden: dict) -> None:
    data = bytes.fromhex(golden["hex"])
    [cmd] = FrameDecoder().feed(data)
    assert encode(cmd) == data
    header = data[8 : 8 + (struct.unpack(">I", data[4:8])[0] & 0xFFFFFF)]
    if "header_text" in golden:
        assert header.decode() == golden["header_text"]
    if "header_hex" in golden:
        assert header.hex() == golden["header_hex"]


def expected_body(golden: dict) -> bytes | None:
    if "body_hex" in golden:
        return bytes.fromhex(golden["body_hex"])
    if "body_text" in golden:
        return golden["body_text"].encode()
    return None


def test_golden_json_header_mark() -> None:
    [golden] = [g for g in GOLDEN_MARKS if g["decoded"]["serializeType"] == "JSON"]
    base = RemotingCommand(code=103, language="JAVA", version=2333)
    padding = golden["decoded"]["headerLength"] - (len(encode(base)) - 8) - len(',"remark":""')
    frame = encode(RemotingCommand(code=103, language="JAVA", version=2333, remark="r" * padding))
    assert frame[4:8].hex() == golden["hex"]


def test_golden_rocketmq_header_mark_with_the_largest_header() -> None:
    [golden] = [g for g in GOLDEN_MARKS if g["decoded"]["serializeType"] == "ROCKETMQ"]
    header_bytes = golden["decoded"]["headerLength"]
    remark = "r" * (header_bytes - 21)  # 21 = fixed fields + remark length + ext length
    cmd = RemotingCommand(code=1, remark=remark, serialize_type=SerializeType.ROCKETMQ, language="JAVA")
    frame = encode(cmd, max_frame_bytes=32 << 20)
    assert frame[4:8].hex() == golden["hex"]
    [decoded] = FrameDecoder(max_frame_bytes=32 << 20).feed(frame)
    assert decoded.remark == remark


def test_default_limit_refuses_the_largest_rocketmq_header() -> None:
    cmd = RemotingCommand(code=1, remark="r" * (0xFFFFFF - 21), serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(FrameTooLarge):
        encode(cmd)


def frame_with(header: bytes, serialize_type: int = 0, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


VALID = encode(RemotingCommand(code=1005, opaque=1))


@pytest.mark.parametrize(
    ("data", "what", "offset"),
    [
        (struct.pack(">I", 3) + b"\0\0\0", "frame length 3 is below 4", 0),
        (struct.pack(">II", 4, 5), "header length 5 exceeds the 0 bytes", 4),
        (struct.pack(">II", 6, (2 << 24) | 2) + b"{}", "unknown serialize type 2", 4),
        (frame_with(b'{"code":'), "not valid JSON", 8 + 8),
        (frame_with(b"[1,2]"), "JSON header is a list, not an object", 8),
        (frame_with(b'{"code":"1005"}'), "'code' is '1005', not an integer", 8),
        (frame_with(b'{"code":true}'), "'code' is True, not an integer", 8),
        (frame_with(b'{"opaque":4294967296}'), "'opaque' = 4294967296 does not fit a Java int", 8),
        (frame_with(b'{"remark":5}'), "'remark' is 5, not a string", 8),
        (frame_with(b'{"language":[]}'), "'language' is [], not a string", 8),
        (frame_with(b'{"extFields":[1]}'), "'extFields' is a list, not an object", 8),
        (frame_with(b'{"extFields":{"a":{"b":1}}}'), "extFields['a'] is dict, not a string", 8),
        (frame_with(b'{"extFields":{"a":[]}}'), "extFields['a'] is list, not a string", 8),
        (frame_with(b'{"\xff":1}'), "not valid JSON", 8),
        (frame_with(b"\0\1", 1), "fixed fields needs 13 bytes, 2 left", 8),
        (frame_with(bytes(13) + b"\0\0\0\x09", 1), "remark needs 9 bytes, 0 left", 8 + 17),
        (frame_with(bytes(13) + b"\xff\xff\xff\xff", 1), "remark length -1 is negative", 8 + 17),
        (frame_with(bytes(13) + b"\0\0\0\1\xff" + bytes(4), 1), "remark is not UTF-8", 8 + 17),
        (frame_with(bytes(17) + b"\0\0\0\3" + b"\0\5a", 1), "ext key needs 5 bytes, 1 left", 8 + 21 + 2),
        (frame_with(bytes(17) + b"\0\0\0\x08" + b"\0\1a\0\0\0\2b", 1), "ext value needs 2 bytes, 1 left", 8 + 21 + 7),
        (frame_with(bytes(17) + b"\0\0\0\5" + b"\0\1a", 1), "ext area needs 5 bytes, 3 left", 8 + 21),
        (frame_with(bytes(21) + b"xy", 1), "2 bytes after the ext area", 8 + 21),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_malformed_frames_name_what_and_where(data: bytes, what: str, offset: int) -> None:
    decoder = FrameDecoder()
    assert decoder.feed(VALID) != []  # the offset counts the whole stream, not the frame
    with pytest.raises(RemotingProtocolError) as caught:
        decoder.feed(data)
    assert what in str(caught.value)
    assert caught.value.offset == len(VALID) + offset
    assert isinstance(caught.value, ProtocolError)
    with pytest.raises(RemotingProtocolError, match="decoder closed after an earlier error"):
        decoder.feed(VALID)


def test_frame_above_the_limit_is_refused_when_its_length_arrives() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    assert decoder.feed(struct.pack(">I", 1020)[:3]) == []
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(struct.pack(">I", 1021)[3:])
    assert isinstance(caught.value, BoundExceeded) and isinstance(caught.value, RemotingProtocolError)
    assert "frame of 1025 bytes exceeds the limit of 1024" in str(caught.value)


def test_frame_exactly_at_the_limit_is_accepted() -> None:
    frame = encode(RemotingCommand(code=1, body=b"x" * 500))
    [cmd] = FrameDecoder(max_frame_bytes=len(frame)).feed(frame)
    assert cmd.body == b"x" * 500
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_bytes=len(frame) - 1).feed(frame)
    with pytest.raises(FrameTooLarge):
        encode(RemotingCommand(code=1, body=b"x" * 500), max_frame_bytes=len(frame) - 1)


def test_decoder_limit_must_hold_a_prefix() -> None:
    with pytest.raises(ConfigError):
        FrameDecoder(max_frame_bytes=7)


def test_eof_inside_a_frame_is_reported() -> None:
    decoder = FrameDecoder()
    decoder.feed(VALID)
    decoder.eof()  # between frames: fine
    decoder.feed(VALID[:5])
    with pytest.raises(RemotingProtocolError, match="connection closed inside a frame") as caught:
        decoder.eof()
    assert caught.value.offset == len(VALID)


def test_lenient_ext_values_become_java_strings() -> None:
    header = b'{"code":1,"extFields":{"n":5,"b":true,"f":false,"d":0.5,"s":"x","z":null},"flag":0}'
    [cmd] = FrameDecoder().feed(frame_with(header))
    assert cmd.ext_fields == {"n": "5", "b": "true", "f": "false", "d": "0.5", "s": "x"}


def test_missing_json_properties_take_java_defaults_and_unknown_keys_are_ignored() -> None:
    [cmd] = FrameDecoder().feed(frame_with(b'{"unknown":[1],"serializeTypeCurrentRPC":"JSON"}'))
    assert (cmd.code, cmd.flag, cmd.opaque, cmd.version, cmd.language) == (0, 0, 0, 0, "JAVA")
    assert cmd.remark is None and cmd.ext_fields is None and cmd.body is None


def test_rocketmq_header_drops_empty_ext_values_and_maps_unknown_language() -> None:
    cmd = RemotingCommand(
        code=1004, language="KLINGON", remark="", ext_fields={"a": "", "b": "2"}, serialize_type=SerializeType.ROCKETMQ
    )
    [decoded] = FrameDecoder().feed(encode(cmd))
    assert decoded.ext_fields == {"b": "2"} and decoded.remark is None and decoded.language == "OTHER"


def test_rocketmq_encode_refuses_fields_that_do_not_fit() -> None:
    with pytest.raises(RemotingProtocolError, match="cannot encode a ROCKETMQ header"):
        encode(RemotingCommand(code=40000, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(RemotingProtocolError, match="cannot encode a ROCKETMQ header"):
        encode(RemotingCommand(code=1, ext_fields={"k": "\udc00"}, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(RemotingProtocolError, match="does not fit an int16 length"):
        encode(RemotingCommand(code=1, ext_fields={"k" * 40000: "v"}, serialize_type=SerializeType.ROCKETMQ))


def test_json_encode_refuses_text_that_is_not_unicode() -> None:
    with pytest.raises(RemotingProtocolError, match="cannot encode a JSON header for code 1"):
        encode(RemotingCommand(code=1, remark="\ud800"))


def test_make_response_echoes_opaque_and_sets_the_response_flag() -> None:
    request = RemotingCommand(code=1005, opaque=42, serialize_type=SerializeType.ROCKETMQ)
    response = make_response(
        request, ResponseCode.SUCCESS, ext={"isLeader": True, "masterEpoch": 3, "absent": None}, body=b"{}"
    )
    assert response.opaque == 42 and response.flag == RESPONSE_FLAG and response.is_response
    assert response.serialize_type is SerializeType.JSON
    assert response.ext_fields == {"isLeader": "true", "masterEpoch": "3"}
    assert type(response.code) is int and response.code == 0 and response.body == b"{}"
    [decoded] = FrameDecoder().feed(encode(response))
    assert decoded == response


def test_make_request_sets_oneway_and_refuses_values_java_cannot_print() -> None:
    request = make_request(RequestCode.BROKER_HEARTBEAT, 9, {"brokerId": 1}, oneway=True)
    assert request.flag == ONEWAY_FLAG and request.is_oneway and not request.is_response
    assert request.code == 904 and request.ext_fields == {"brokerId": "1"}
    with pytest.raises(TypeError):
        make_request(1, 1, {"bad": [1]})


def test_code_tables_follow_spec_section_2() -> None:
    assert RequestCode(1005).name == "CONTROLLER_GET_METADATA_INFO"
    assert RequestCode.CONTROLLER_APPLY_BROKER_ID == 1013
    assert ResponseCode(2007).name == "CONTROLLER_NOT_LEADER"
    assert ResponseCode.CONTROLLER_BROKER_ID_INVALID == 2014
    # the controller's reads, and the NameServer role's (101, 105, 106, 206, 219, 224: docs/namesrv.md)
    assert READ_REQUESTS == {1004, 1005, 1006, 1012, 101, 105, 106, 206, 219, 224}
