"""Custom header decoding (spec 1.5): Java number syntax, defaults, required fields."""

from __future__ import annotations

import pytest

from rmqc.controller import MissingHeaderField
from rmqc.controller._headers import HeaderField, HeaderSpec
from rmqc.remoting import make_request

SPEC = HeaderSpec(
    HeaderField("name", required="cf"),
    HeaderField("id", "long", required="needed"),
    HeaderField("epoch", "int", -1),
    HeaderField("flag", "bool", False),
)


def decode(ext: dict | None) -> dict:
    return SPEC.decode(make_request(1, 1, ext))


@pytest.mark.parametrize(
    ("text", "value"),
    [("5", 5), ("-5", -5), ("+5", 5), ("2147483647", 2147483647), ("2147483648", -1), ("", -1),
     (" 5", -1), ("5_0", -1), ("\u0663", -1), ("1.5", -1), ("-", -1)],
)
def test_int_fields_follow_java_syntax_and_keep_the_default_otherwise(text: str, value: int) -> None:
    assert decode({"name": "n", "id": "1", "epoch": text})["epoch"] == value


def test_long_range() -> None:
    assert decode({"name": "n", "id": "-9223372036854775808"})["id"] == -(2**63)
    with pytest.raises(MissingHeaderField, match="<id>"):
        decode({"name": "n", "id": "9223372036854775808"})  # unparsable needed field: code 1


@pytest.mark.parametrize(("text", "value"), [("true", True), ("TRUE", True), ("yes", False), ("false", False)])
def test_bool_is_java_parse_boolean(text: str, value: bool) -> None:
    assert decode({"name": "n", "id": "1", "flag": text})["flag"] is value


def test_required_rules() -> None:
    with pytest.raises(MissingHeaderField, match="<name>"):
        decode({"id": "1"})  # @CFNotNull with extFields present
    with pytest.raises(MissingHeaderField, match="<id>"):
        decode(None)  # needed even without extFields
    relaxed = HeaderSpec(HeaderField("name", required="cf"), HeaderField("epoch", "int", -1))
    assert relaxed.decode(make_request(1, 1, None)) == {"name": None, "epoch": -1}  # Java skips decoding


def test_unknown_keys_are_ignored() -> None:
    assert decode({"name": "n", "id": "1", "AccessKey": "ak", "Signature": "s"}) == {
        "name": "n", "id": 1, "epoch": -1, "flag": False}
