"""The ROCKETMQ binary header (serialize type 1, spec 1.4).

Layout (big-endian): code int16, language int8, version int16, opaque int32, flag int32,
remarkLength int32 + remark, extLength int32 + entries (keyLength int16, key, valueLength int32, value).
Java writes an empty string as length 0 and reads length 0 back as null, so an empty remark decodes
to None and an ext entry with an empty key or value decodes as missing (spec 1.4 consequence).
"""

from __future__ import annotations

import struct

from rmqc.remoting._codes import LanguageCode
from rmqc.remoting._command import RemotingCommand, SerializeType
from rmqc.remoting._errors import RemotingProtocolError

__all__ = ["decode_binary_header", "encode_binary_header"]

_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_LANGUAGE_BY_NUMBER = {code.value: code.name for code in LanguageCode}
# Java's LanguageCode.valueOf(byte) yields null for an unknown number and carries on; we name it OTHER.
_UNKNOWN_LANGUAGE = LanguageCode.OTHER.name


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    language = LanguageCode.__members__.get(cmd.language, LanguageCode.OTHER)
    try:
        fixed = _FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag)
        remark = (cmd.remark or "").encode("utf-8")
        ext = _encode_ext(cmd.ext_fields or {})
    except (struct.error, UnicodeEncodeError) as exc:  # int16 code/version, int32 fields, lone surrogates
        raise RemotingProtocolError(f"cannot encode a ROCKETMQ header for code {cmd.code}: {exc}") from None
    return b"".join((fixed, _INT32.pack(len(remark)), remark, _INT32.pack(len(ext)), ext))


def _encode_ext(fields: dict[str, str]) -> bytes:
    parts: list[bytes] = []
    for key, value in fields.items():
        key_bytes, value_bytes = key.encode("utf-8"), value.encode("utf-8")
        if len(key_bytes) > 0x7FFF:
            raise RemotingProtocolError(f"extFields key of {len(key_bytes)} bytes does not fit an int16 length")
        parts += (_INT16.pack(len(key_bytes)), key_bytes, _INT32.pack(len(value_bytes)), value_bytes)
    return b"".join(parts)


class _Reader:
    """Reads fields from one header, naming the field and stream offset when the bytes run out."""

    def __init__(self, data: bytes, stream_offset: int) -> None:
        self.data = data
        self.pos = 0
        self.stream_offset = stream_offset

    def error(self, what: str) -> RemotingProtocolError:
        return RemotingProtocolError(f"ROCKETMQ header: {what}", self.stream_offset + self.pos)

    def take(self, size: int, field: str) -> bytes:
        if size < 0:
            raise self.error(f"{field} length {size} is negative")
        if self.pos + size > len(self.data):
            raise self.error(f"{field} needs {size} bytes, {len(self.data) - self.pos} left in the header")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, layout: struct.Struct, field: str) -> tuple[int, ...]:
        return layout.unpack(self.take(layout.size, field))

    def text(self, size: int, field: str) -> str | None:
        raw = self.take(size, field)
        if not raw:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemotingProtocolError(
                f"ROCKETMQ header: {field} is not UTF-8", self.stream_offset + self.pos - size + exc.start
            ) from None


def decode_binary_header(data: bytes, offset: int) -> RemotingCommand:
    """Decode header bytes that start at stream byte `offset` (used only in error messages)."""
    reader = _Reader(data, offset)
    code, language, version, opaque, flag = reader.unpack(_FIXED, "fixed fields")
    (remark_length,) = reader.unpack(_INT32, "remarkLength")
    remark = reader.text(remark_length, "remark")
    (ext_length,) = reader.unpack(_INT32, "extLength")
    ext_area = _Reader(reader.take(ext_length, "ext area"), offset + reader.pos - max(ext_length, 0))
    ext_fields = _decode_ext(ext_area) if ext_length else None
    if reader.pos != len(data):
        raise reader.error(f"{len(data) - reader.pos} bytes after the ext area")
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_LANGUAGE_BY_NUMBER.get(language, _UNKNOWN_LANGUAGE),
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _decode_ext(reader: _Reader) -> dict[str, str]:
    fields: dict[str, str] = {}
    while reader.pos < len(reader.data):
        (key_length,) = reader.unpack(_INT16, "ext key length")
        key = reader.text(key_length, "ext key")
        (value_length,) = reader.unpack(_INT32, "ext value length")
        value = reader.text(value_length, "ext value")
        if key is not None and value is not None:
            fields[key] = value
    return fields
