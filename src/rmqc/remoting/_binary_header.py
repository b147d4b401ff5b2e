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


def _check_room(pos: int, size: int, limit: int, field: str, offset: int) -> None:
    """Raise unless `size` bytes of `field` fit between `pos` and `limit` (offsets for the message)."""
    if size < 0:
        raise RemotingProtocolError(f"ROCKETMQ header: {field} length {size} is negative", offset + pos)
    if pos + size > limit:
        raise RemotingProtocolError(
            f"ROCKETMQ header: {field} needs {size} bytes, {limit - pos} left in the header", offset + pos
        )


def _text(data: bytes, pos: int, size: int, limit: int, field: str, offset: int) -> str | None:
    _check_room(pos, size, limit, field, offset)
    if not size:
        return None
    try:
        return data[pos : pos + size].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemotingProtocolError(f"ROCKETMQ header: {field} is not UTF-8", offset + pos + exc.start) from None


def decode_binary_header(data: bytes, offset: int) -> RemotingCommand:
    """Decode header bytes that start at stream byte `offset` (used only in error messages)."""
    size = len(data)
    _check_room(0, _FIXED.size, size, "fixed fields", offset)
    code, language, version, opaque, flag = _FIXED.unpack_from(data)
    pos = _FIXED.size
    _check_room(pos, 4, size, "remarkLength", offset)
    (remark_length,) = _INT32.unpack_from(data, pos)
    remark = _text(data, pos + 4, remark_length, size, "remark", offset)
    pos += 4 + remark_length
    _check_room(pos, 4, size, "extLength", offset)
    (ext_length,) = _INT32.unpack_from(data, pos)
    pos += 4
    _check_room(pos, ext_length, size, "ext area", offset)
    ext_fields = _decode_ext(data, pos, pos + ext_length, offset) if ext_length else None
    if pos + ext_length != size:
        raise RemotingProtocolError(
            f"ROCKETMQ header: {size - pos - ext_length} bytes after the ext area", offset + pos + ext_length
        )
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


def _decode_ext(data: bytes, pos: int, end: int, offset: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    while pos < end:
        _check_room(pos, 2, end, "ext key length", offset)
        (key_length,) = _INT16.unpack_from(data, pos)
        key = _text(data, pos + 2, key_length, end, "ext key", offset)
        pos += 2 + key_length
        _check_room(pos, 4, end, "ext value length", offset)
        (value_length,) = _INT32.unpack_from(data, pos)
        value = _text(data, pos + 4, value_length, end, "ext value", offset)
        pos += 4 + value_length
        if key is not None and value is not None:
            fields[key] = value
    return fields
