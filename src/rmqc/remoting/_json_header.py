"""The JSON header (serialize type 0): fastjson's serialisation of RemotingCommand (spec 1.2).

Encoding writes the keys fastjson writes, in its (alphabetical) order, compact, omitting null remark
and extFields, so our frames are byte-identical to Java's. extFields keep their insertion order, so a
decoded Java frame re-encodes to the same bytes. Decoding checks every JSON type and reports the key.
"""

from __future__ import annotations

from typing import Any

import orjson

from rmqc.remoting._command import RemotingCommand, SerializeType
from rmqc.remoting._errors import RemotingProtocolError
from rmqc.remoting._ext_fields import ONLY_STR as _ONLY_STR, ext_value_text

__all__ = ["decode_json_header", "encode_json_header"]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
# The int properties of Java's RemotingCommand; each must be a JSON integer within int32.
_DEFAULT_LANGUAGE = "JAVA"  # Java's RemotingCommand default when the property is missing
_JSON = SerializeType.JSON  # a module constant: reading an enum member costs more on every frame


def encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = cmd.language
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    try:
        return orjson.dumps(header)
    except orjson.JSONEncodeError as exc:  # e.g. a lone surrogate, or a value that is not JSON
        raise RemotingProtocolError(f"cannot encode a JSON header for code {cmd.code}: {exc}") from None


def decode_json_header(data: bytes | bytearray, offset: int) -> RemotingCommand:
    """Decode header bytes that start at stream byte `offset` (used only in error messages).

    The common header (every frame Java and rmqc write) is checked in one expression over the
    values orjson produced; anything else takes `_checked_command`, which names what is wrong.
    Both give the same command for any header the first one accepts (tests compare them).
    """
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise RemotingProtocolError(f"JSON header is not valid JSON ({exc.msg})", offset + _byte_pos(exc)) from None
    if type(header) is dict:
        get = header.get
        code, flag, opaque, version = get("code", 0), get("flag", 0), get("opaque", 0), get("version", 0)
        language, remark, ext = get("language", _DEFAULT_LANGUAGE), get("remark"), get("extFields")
        if (
            type(code) is type(flag) is type(opaque) is type(version) is int
            and INT32_MIN <= code <= INT32_MAX and INT32_MIN <= flag <= INT32_MAX
            and INT32_MIN <= opaque <= INT32_MAX and INT32_MIN <= version <= INT32_MAX
            and type(language) is str and (remark is None or type(remark) is str)
            and (ext is None or (type(ext) is dict and _ONLY_STR.issuperset(map(type, ext.values()))))
        ):
            return RemotingCommand(code, opaque, flag, language, version, remark, ext, None, _JSON)
    return _checked_command(header, offset)


def _checked_command(header: object, offset: int) -> RemotingCommand:
    """The header checked key by key: the first wrong one raises RemotingProtocolError naming it."""
    if not isinstance(header, dict):
        raise RemotingProtocolError(f"JSON header is a {type(header).__name__}, not an object", offset)
    return RemotingCommand(
        code=_int_property(header, "code", offset),
        flag=_int_property(header, "flag", offset),
        opaque=_int_property(header, "opaque", offset),
        version=_int_property(header, "version", offset),
        language=_language(header, offset),
        remark=_optional_str(header, "remark", offset),
        ext_fields=_ext_fields(header.get("extFields"), offset),
        serialize_type=SerializeType.JSON,
    )


def _byte_pos(exc: orjson.JSONDecodeError) -> int:
    # orjson reports a character index into the decoded text; callers want a byte offset.
    return len(exc.doc[: exc.pos].encode("utf-8", "surrogatepass"))


def _language(header: dict[str, Any], offset: int) -> str:
    language = _optional_str(header, "language", offset)
    return _DEFAULT_LANGUAGE if language is None else language


def _int_property(header: dict[str, Any], key: str, offset: int) -> int:
    # Java's defaults for a missing property are 0 (the opaque counter aside); keep them.
    value: object = header.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemotingProtocolError(f"JSON header {key!r} is {value!r}, not an integer", offset)
    if not INT32_MIN <= value <= INT32_MAX:
        raise RemotingProtocolError(f"JSON header {key!r} = {value} does not fit a Java int", offset)
    return value


def _optional_str(header: dict[str, Any], key: str, offset: int) -> str | None:
    value = header.get(key)
    if value is not None and not isinstance(value, str):
        raise RemotingProtocolError(f"JSON header {key!r} is {value!r}, not a string", offset)
    return value


def _ext_fields(value: object, offset: int) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RemotingProtocolError(f"JSON header 'extFields' is a {type(value).__name__}, not an object", offset)
    if _ONLY_STR.issuperset(map(type, value.values())):
        return value  # what Java sends: already strings, and the dict is ours (fresh from orjson)
    fields: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            continue  # Java's HashMap holds the null; a header field reads it as missing.
        text = ext_value_text(item)
        if text is None:
            raise RemotingProtocolError(f"extFields[{key!r}] is {type(item).__name__}, not a string", offset)
        fields[key] = text
    return fields
