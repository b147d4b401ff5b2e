"""Custom headers <-> extFields (spec 1.5), declared as tables of fields per request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmqc.errors import ProtocolError
from rmqc.remoting import RemotingCommand

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class MissingHeaderField(ProtocolError):
    """A required header field is absent; answered with code 1 like Java's decoder error."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the custom field <{name}> is null")
        self.name = name


class BadRequestBody(ProtocolError):
    """A request body that is absent or not what the request needs (answered with code 1)."""


def _parse_integer(low: int, high: int) -> Callable[[str, object], object]:
    def parse(text: str, default: object) -> object:
        # Java Long/Integer.parseLong syntax only (optional sign, ASCII digits): Python's int()
        # would also take spaces, underscores and non-ASCII digits. Java keeps the field's
        # default when a value fails to parse (it only logs).
        digits = text[1:] if text[:1] in ("+", "-") else text
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
            return default
        value = int(text)
        return value if low <= value <= high else default

    return parse


def _parse_bool(text: str, default: object) -> object:
    return text.lower() == "true"  # Java Boolean.parseBoolean


# by HeaderField.kind; None: the value is the text itself (taken without a call: most fields)
_PARSERS: dict[str, Callable[[str, object], object] | None] = {
    "str": None,
    "int": _parse_integer(INT_MIN, INT_MAX),
    "long": _parse_integer(LONG_MIN, LONG_MAX),
    "bool": _parse_bool,
}


# name -> value of the type its HeaderField.kind says (str, int or bool; the default when absent):
# a per-request table, which a type checker cannot follow, hence Any
DecodedHeader = dict[str, Any]


@dataclass(frozen=True, slots=True)
class HeaderField:
    name: str
    kind: str = "str"  # str | int | long | bool
    default: object = None
    # "cf": Java @CFNotNull, checked only when the request has extFields (spec 1.5).
    # "needed": Java would fail with a NullPointerException (code 1) without it; rmqc answers the
    # same code with a clear remark, whether or not extFields are present.
    required: str | None = None


class HeaderSpec:
    """The fields of one request header, compiled once into (name, parser, default, rule) rows."""

    def __init__(self, *fields: HeaderField) -> None:
        self.fields = fields
        self._rows = tuple((f.name, _PARSERS[f.kind], f.default, f.required) for f in fields)

    def decode(self, request: RemotingCommand) -> DecodedHeader:
        ext = request.ext_fields
        if ext is None:
            for name, _, _, required in self._rows:
                if required == "needed":
                    raise MissingHeaderField(name)
            return {name: default for name, _, default, _ in self._rows}
        values: DecodedHeader = {}
        for name, parse, default, required in self._rows:
            text = ext.get(name)
            if text is None:
                if required is not None:
                    raise MissingHeaderField(name)
                values[name] = default
                continue
            if parse is None:
                values[name] = text
                continue
            value = parse(text, default)
            if value is None and required == "needed":
                raise MissingHeaderField(name)  # unparsable: Java keeps null, then fails (code 1)
            values[name] = value
        return values
