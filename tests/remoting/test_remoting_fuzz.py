"""Property tests: garbage only ever yields commands or RemotingProtocolError; valid values round-trip.

Examples are derandomized so every run checks the same inputs; hypothesis prints the failing one.
"""

from __future__ import annotations

import json
import struct

from hypothesis import HealthCheck, given, settings, strategies as st

from rmqc.remoting import (
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    RemotingProtocolError,
    SerializeType,
    dumps_fastjson,
    dumps_properties,
    encode,
    loads_fastjson,
    loads_properties,
)

FUZZ = settings(derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Cases that build whole streams of frames cost more per example; fewer of them cover the same paths.
FUZZ_HEAVY = settings(FUZZ, max_examples=80)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
LANGUAGES = st.sampled_from([code.name for code in LanguageCode])


def decode_all(data: bytes, chunk_bytes: int) -> list[RemotingCommand] | RemotingProtocolError:
    """Commands from `data` fed in chunks, or the protocol error; any other exception fails the test."""
    decoder = FrameDecoder(max_frame_bytes=4096)
    commands: list[RemotingCommand] = []
    try:
        for start in range(0, len(data), chunk_bytes):
            commands += decoder.feed(data[start : start + chunk_bytes])
    except RemotingProtocolError as exc:
        return exc
    return commands


def same_outcome(whole: object, pieces: object) -> bool:
    if isinstance(whole, RemotingProtocolError) or isinstance(pieces, RemotingProtocolError):
        return isinstance(whole, RemotingProtocolError) and isinstance(pieces, RemotingProtocolError)
    return whole == pieces


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_commands_or_the_protocol_error(data: bytes) -> None:
    whole = decode_all(data, max(len(data), 1))
    assert same_outcome(whole, decode_all(data, 1))


@st.composite
def framed_garbage(draw: st.DrawFn) -> bytes:
    """A plausible prefix around arbitrary header bytes, to reach the header decoders."""
    serialize_type = draw(st.sampled_from([0, 1, 2, 255]))
    header = draw(
        st.one_of(
            st.binary(max_size=120),
            st.builds(_json_bytes, st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=6)),
        )
    )
    body = draw(st.binary(max_size=20))
    declared = draw(st.one_of(st.just(len(header)), st.integers(0, 0xFFFFFF)))
    return struct.pack(">II", 4 + len(header) + len(body), (serialize_type << 24) | declared) + header + body


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)


def _json_bytes(fields: dict) -> bytes:
    return json.dumps(fields).encode()


@FUZZ_HEAVY
@given(framed_garbage())
def test_framed_garbage_gives_commands_or_the_protocol_error(data: bytes) -> None:
    assert same_outcome(decode_all(data, len(data)), decode_all(data, 3))


EXT_TEXT = st.text(max_size=12)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize_type = draw(st.sampled_from(list(SerializeType)))
    binary = serialize_type is SerializeType.ROCKETMQ
    return RemotingCommand(
        code=draw(INT16 if binary else INT32),
        opaque=draw(INT32),
        flag=draw(INT32),
        language=draw(LANGUAGES),
        version=draw(INT16 if binary else INT32),
        remark=draw(st.none() | st.text(max_size=20)),
        ext_fields=draw(st.none() | st.dictionaries(EXT_TEXT, EXT_TEXT, max_size=5)),
        body=draw(st.none() | st.binary(min_size=1, max_size=30)),
        serialize_type=serialize_type,
    )


def as_received(cmd: RemotingCommand) -> RemotingCommand:
    """What the peer decodes: the ROCKETMQ header reads empty strings back as null (spec 1.4)."""
    if cmd.serialize_type is SerializeType.JSON:
        return cmd
    ext = {k: v for k, v in (cmd.ext_fields or {}).items() if k and v}
    return RemotingCommand(
        code=cmd.code,
        opaque=cmd.opaque,
        flag=cmd.flag,
        language=cmd.language,
        version=cmd.version,
        remark=cmd.remark or None,
        ext_fields=ext if cmd.ext_fields else None,
        body=cmd.body,
        serialize_type=cmd.serialize_type,
    )


@FUZZ_HEAVY
@given(st.lists(commands(), min_size=1, max_size=4), st.integers(1, 40))
def test_commands_round_trip_in_any_chunking(sent: list[RemotingCommand], chunk_bytes: int) -> None:
    stream = b"".join(encode(cmd) for cmd in sent)
    decoder = FrameDecoder()
    received: list[RemotingCommand] = []
    for start in range(0, len(stream), chunk_bytes):
        received += decoder.feed(stream[start : start + chunk_bytes])
    assert received == [as_received(cmd) for cmd in sent]
    assert decoder.buffered_bytes == 0


FASTJSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10)
FASTJSON_VALUES = st.recursive(
    FASTJSON_SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=6), children, max_size=3)
        | st.dictionaries(st.integers(-1000, 10**12), children, max_size=3)
    ),
    max_leaves=10,
)


def as_parsed(value: object) -> object:
    """What loads_fastjson returns for what dumps_fastjson wrote: numeric keys arrive as strings."""
    if isinstance(value, dict):
        return {str(key): as_parsed(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [as_parsed(item) for item in value]
    return value


@FUZZ
@given(FASTJSON_VALUES)
def test_fastjson_round_trip(value: object) -> None:
    assert loads_fastjson(dumps_fastjson(value)) == as_parsed(value)


@FUZZ
@given(st.binary(max_size=80) | st.text(alphabet='{}[]":,0123456789 -abtruefalsn\\', max_size=40).map(str.encode))
def test_fastjson_garbage_gives_a_value_or_the_protocol_error(data: bytes) -> None:
    try:
        loads_fastjson(data)
    except RemotingProtocolError as exc:
        assert exc.offset is not None and 0 <= exc.offset <= len(data)


@FUZZ
@given(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=6))
def test_properties_round_trip(properties: dict[str, str]) -> None:
    assert loads_properties(dumps_properties(properties)) == properties


@FUZZ
@given(st.binary(max_size=60) | st.text(alphabet="ab=: \\u0\n\r#!\t", max_size=30).map(str.encode))
def test_properties_garbage_gives_a_mapping_or_the_protocol_error(data: bytes) -> None:
    try:
        parsed = loads_properties(data)
    except RemotingProtocolError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items())
