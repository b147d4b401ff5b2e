"""The heartbeat-speed paths of the decoder give exactly what the key-by-key checks give.

`decode_json_header` accepts the common header in one expression and sends everything else to
`_checked_command`; `FrameDecoder.feed` and `iter_feed` decode complete JSON frames inline and
everything else through `_complete_frame_end`/`_decode_frame`. For random valid and invalid input, both paths must
agree: same command, or the same error with the same offset. Examples are derandomized.
"""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rmqc.remoting import FrameDecoder, FrameTooLarge, RemotingCommand, RemotingProtocolError, encode, make_request
from rmqc.remoting._ext_fields import ext_fields_from, ext_value_text
from rmqc.remoting._json_header import _checked_command, decode_json_header

FUZZ = settings(derandomize=True, max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ANY_JSON_SCALAR = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=6)
)
# Mostly what Java sends, sometimes a wrong type or an out-of-range int32.
INT_PROPERTY = st.integers(-(2**31), 2**31 - 1) | st.sampled_from([2**31, -(2**31) - 1]) | ANY_JSON_SCALAR
# JSON integers as orjson writes them (64-bit): a header is bytes a peer sent, never a bigger number
JSON_INT = st.integers(-(2**63), 2**64 - 1)
EXT_VALUE = st.text(max_size=8) | ANY_JSON_SCALAR | st.lists(JSON_INT, max_size=2)
EXT_FIELDS = (
    st.dictionaries(st.text(max_size=8), EXT_VALUE, max_size=5) | ANY_JSON_SCALAR | st.lists(st.text(), max_size=2)
)
OPTIONAL_KEYS = {
    "code": INT_PROPERTY, "flag": INT_PROPERTY, "opaque": INT_PROPERTY, "version": INT_PROPERTY,
    "language": st.text(max_size=8) | ANY_JSON_SCALAR, "remark": st.none() | st.text(max_size=8) | ANY_JSON_SCALAR,
    "extFields": st.none() | EXT_FIELDS, "serializeTypeCurrentRPC": st.just("JSON"),
}


@st.composite
def headers(draw: st.DrawFn) -> object:
    if draw(st.integers(0, 19)) == 0:
        return draw(ANY_JSON_SCALAR | st.lists(JSON_INT, max_size=3))  # not an object at all
    present = draw(st.sets(st.sampled_from(sorted(OPTIONAL_KEYS))))
    return {key: draw(OPTIONAL_KEYS[key]) for key in sorted(present)}


def outcome(decode: object, *args: object) -> RemotingCommand | tuple[str, int | None]:
    try:
        return decode(*args)  # type: ignore[operator]
    except RemotingProtocolError as exc:
        return (exc.what, exc.offset)


@FUZZ
@given(headers(), st.integers(0, 1000))
def test_the_fast_header_decode_agrees_with_the_checked_one(header: object, offset: int) -> None:
    data = orjson.dumps(header)
    assert outcome(decode_json_header, data, offset) == outcome(_checked_command, orjson.loads(data), offset)


def test_the_usual_heartbeat_header_keeps_its_extfields_as_sent() -> None:
    ext = {"clusterName": "c", "brokerAddr": "a:1", "brokerName": "b", "brokerId": "1"}
    frame = encode(make_request(904, 7, ext, oneway=True))
    [command] = FrameDecoder().feed(frame)
    assert command == make_request(904, 7, ext, oneway=True)
    assert command.language == "PYTHON" and command.body is None


@FUZZ
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8) | st.none() | st.integers() | st.booleans(),
                       max_size=5))
def test_extfields_of_text_only_are_copied_as_the_general_path_converts_them(values: dict[str, object]) -> None:
    """ext_fields_from copies an all-text mapping in one go; anything else (None left out,
    numbers and booleans as Java prints them) goes key by key: both give the same fields, and
    never the caller's own dict."""
    general = {key: ext_value_text(value) for key, value in values.items() if value is not None}
    fields = ext_fields_from(values)
    assert fields == general and list(fields) == list(general)
    assert fields is not values


def frame_of(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def general_path(data: bytes, max_frame_bytes: int) -> tuple[list[RemotingCommand], tuple[str, int | None] | None]:
    """Reference: every frame through the checking helpers only, no inline decoding. The commands
    before the first bad frame, and that frame's error (None if there is none)."""
    decoder = FrameDecoder(max_frame_bytes)
    commands: list[RemotingCommand] = []
    pos = 0
    try:
        while (end := decoder._complete_frame_end(data, pos)) is not None:
            commands.append(decoder._decode_frame(data, pos, end))
            pos = end
    except RemotingProtocolError as exc:
        return commands, (exc.what, exc.offset)
    return commands, None


def fed(data: bytes, max_frame_bytes: int, chunk_bytes: int) -> list[RemotingCommand] | tuple[str, int | None]:
    decoder = FrameDecoder(max_frame_bytes)
    commands: list[RemotingCommand] = []
    try:
        for start in range(0, len(data), chunk_bytes):
            commands += decoder.feed(data[start : start + chunk_bytes])
    except RemotingProtocolError as exc:
        return (exc.what, exc.offset)
    return commands


def streamed(data: bytes, max_frame_bytes: int, chunk_bytes: int) -> tuple[list[RemotingCommand], object]:
    """Commands as `iter_feed` hands them out, and the error it ends with (None if none)."""
    decoder = FrameDecoder(max_frame_bytes)
    commands: list[RemotingCommand] = []
    try:
        for start in range(0, len(data), chunk_bytes):
            for command in decoder.iter_feed(data[start : start + chunk_bytes]):
                commands.append(command)
    except RemotingProtocolError as exc:
        return commands, (exc.what, exc.offset)
    return commands, None


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    header = orjson.dumps(draw(headers()))
    body = draw(st.binary(max_size=6))
    kind = draw(st.sampled_from(["good", "good", "good", "type", "header_length", "short_length"]))
    if kind == "type":
        return frame_of(header, body, serialize_type=draw(st.sampled_from([1, 2, 255])))
    if kind == "header_length":  # a header length running past the frame's end
        return struct.pack(">II", 4 + len(body), len(body) + draw(st.integers(1, 9))) + body
    if kind == "short_length":
        return struct.pack(">I", draw(st.integers(0, 3)))
    return frame_of(header, body)


@settings(FUZZ, max_examples=150)
@given(st.lists(frames(), min_size=1, max_size=4), st.integers(1, 64), st.sampled_from([64, 300, 4096]))
def test_feeding_agrees_with_the_general_frame_path(parts: list[bytes], chunk_bytes: int, limit: int) -> None:
    stream = b"".join(parts)
    commands, error = general_path(stream, limit)
    assert fed(stream, limit, len(stream)) == (commands if error is None else error)
    assert fed(stream, limit, chunk_bytes) == (commands if error is None else error)
    # iter_feed hands out every command before the bad frame, then raises the same error
    assert streamed(stream, limit, len(stream)) == (commands, error)
    assert streamed(stream, limit, chunk_bytes) == (commands, error)


def test_frames_not_asked_for_stay_buffered_when_the_iterator_is_closed() -> None:
    frames = [encode(make_request(904, opaque, {"brokerId": str(opaque)}, oneway=True)) for opaque in (1, 2, 3)]
    decoder = FrameDecoder()
    commands = decoder.iter_feed(b"".join(frames) + frames[0][:7])
    assert next(commands).opaque == 1
    commands.close()
    assert decoder.buffered_bytes == len(frames[1]) + len(frames[2]) + 7
    assert [c.opaque for c in decoder.feed(frames[0][7:])] == [2, 3, 1]
    assert decoder.buffered_bytes == 0


def test_a_frame_too_large_is_refused_as_soon_as_its_length_arrives() -> None:
    decoder = FrameDecoder(max_frame_bytes=64)
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">I", 61))
    with pytest.raises(RemotingProtocolError, match="closed after an earlier error"):
        decoder.feed(frame_of(b"{}"))


def test_an_incomplete_tail_is_kept_and_completed() -> None:
    frame = encode(make_request(904, 1, {"brokerId": "1"}, body=b"xyz"))
    decoder = FrameDecoder()
    assert decoder.feed(frame + frame[:5]) == [make_request(904, 1, {"brokerId": "1"}, body=b"xyz")]
    assert decoder.buffered_bytes == 5
    assert len(decoder.feed(frame[5:] + frame)) == 2
    assert decoder.buffered_bytes == 0
