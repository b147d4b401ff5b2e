"""Java properties text, the body of UPDATE_CONTROLLER_CONFIG (1009) and GET_CONTROLLER_CONFIG (1010).

Java reads 1009 bodies with `Properties.load(InputStream)` (ISO-8859-1, backslash escapes), so
`dumps_properties` escapes separators, control characters and everything outside ASCII as `\\u`
followed by four hex digits.
`loads_properties` follows `Properties.load` (comments, continuation lines, the three separators,
escapes) but decodes the bytes as UTF-8, because Java writes 1010 bodies raw in UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rmqc.remoting._errors import RemotingProtocolError
from rmqc.remoting._ext_fields import ext_value_text

__all__ = ["dumps_properties", "loads_properties"]

_ESCAPES_OUT = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
_SEPARATORS_AND_COMMENTS = frozenset("=:#!")  # Properties.store escapes these in keys and values
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")  # Java ends lines at \n, \r or \r\n only
_ESCAPES_IN = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"


def dumps_properties(properties: Mapping[str, object]) -> bytes:
    """`key=value` lines, sorted by key (as Java's 1010 answer is), escaped for Properties.load."""
    lines = [
        f"{_escape(key, is_key=True)}={_escape(_java_text(value), is_key=False)}\n"
        for key, value in sorted(properties.items())
    ]
    return "".join(lines).encode("ascii")


def _java_text(value: object) -> str:
    text = ext_value_text(value)  # booleans as Java prints them: true/false
    return str(value) if text is None else text


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char in _ESCAPES_OUT:
            out.append(_ESCAPES_OUT[char])
        elif char in _SEPARATORS_AND_COMMENTS or (char == " " and (is_key or index == 0)):
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.append("".join(f"\\u{unit:04X}" for unit in _utf16_units(char)))
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    encoded = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(encoded[i : i + 2], "big") for i in range(0, len(encoded), 2)]


def loads_properties(data: bytes) -> dict[str, str]:
    """Parse properties text; RemotingProtocolError (body byte offset) on bad UTF-8 or a bad escape."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemotingProtocolError("properties text is not UTF-8", exc.start) from None
    properties: dict[str, str] = {}
    for line, start in _logical_lines(text):
        key, value = _split_entry(line)
        properties[_unescape(key, start)] = _unescape(value, start)
    return properties


def _logical_lines(text: str) -> list[tuple[str, int]]:
    """Natural lines joined across continuations (odd number of trailing backslashes), comments dropped."""
    logical: list[tuple[str, int]] = []
    pending: list[str] = []
    start = position = 0
    for match in _LINE.finditer(text):
        raw = match.group()
        if not raw:
            continue
        natural = raw.rstrip("\r\n")
        line_start = position
        position += len(raw)
        piece = natural.lstrip(_WHITESPACE)
        if not pending:
            if not piece or piece[0] in "#!":
                continue
            start = line_start
        trailing = len(piece) - len(piece.rstrip("\\"))
        if trailing % 2:
            pending.append(piece[:-1])
            continue
        pending.append(piece)
        logical.append(("".join(pending), start))
        pending = []
    if pending:
        logical.append(("".join(pending), start))
    return logical


def _split_entry(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=:" or char in _WHITESPACE:
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _unescape(text: str, line_start: int) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index >= len(text):
            out.append(char)
            continue
        escaped = text[index]
        index += 1
        if escaped != "u":
            out.append(_ESCAPES_IN.get(escaped, escaped))
            continue
        digits = text[index : index + 4]
        if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise RemotingProtocolError(f"malformed \\u escape {digits!r} in properties text", line_start)
        out.append(chr(int(digits, 16)))
        index += 4
    # \u escapes (four hex digits) are UTF-16 units: join surrogate pairs into the characters they encode.
    return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
