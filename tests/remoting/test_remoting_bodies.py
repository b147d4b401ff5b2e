"""fastjson and properties bodies: the exact texts Java writes and reads."""

from __future__ import annotations

import pytest

from rmqc.remoting import RemotingProtocolError, dumps_fastjson, dumps_properties, loads_fastjson, loads_properties

ELECT_BODY = (
    b'{"brokerMemberGroup":{"brokerAddrs":{1:"10.0.0.5:30911",2:"10.0.0.6:30911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[1]}'
)


def test_bare_numeric_keys_are_accepted() -> None:
    assert loads_fastjson(ELECT_BODY) == {
        "brokerMemberGroup": {
            "brokerAddrs": {"1": "10.0.0.5:30911", "2": "10.0.0.6:30911"},
            "brokerName": "broker-a",
            "cluster": "DefaultCluster",
        },
        "syncStateSet": [1],
    }


def test_digits_inside_strings_are_left_alone() -> None:
    body = b'{"a":"{1:2,3:4}","b\\"{5:":{ -6 : "x"}}'
    assert loads_fastjson(body) == {"a": "{1:2,3:4}", 'b"{5:': {"-6": "x"}}


def test_dumps_writes_what_fastjson_writes() -> None:
    body = {
        "syncStateSet": {1},
        "brokerMemberGroup": {
            "cluster": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerAddrs": {2: "10.0.0.6:30911", 1: "10.0.0.5:30911"},
        },
        "masterAddress": None,
    }
    assert dumps_fastjson(body) == ELECT_BODY


def test_dumps_sync_state_set_body() -> None:
    expected = b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    assert dumps_fastjson({"syncStateSetEpoch": 3, "syncStateSet": [1, 2]}) == expected


@pytest.mark.parametrize(
    ("body", "what", "offset"),
    [
        (b'{"a":1,', "not fastjson", 7),
        (b'{1:"x",2:"y",}', "not fastjson", 12),
        (b'{"a":\xff}', "not UTF-8", 5),
        (b"", "not fastjson", 0),
    ],
)
def test_bad_bodies_are_protocol_errors_with_offsets(body: bytes, what: str, offset: int) -> None:
    with pytest.raises(RemotingProtocolError, match=what) as caught:
        loads_fastjson(body)
    assert caught.value.offset == offset


@pytest.mark.parametrize(
    "value",
    [{1: "a", "b": 2}, {True: 1}, {(1,): 2}, [b"bytes"], float("nan"), {1, "a"}, object()],
    ids=["mixed keys", "bool key", "tuple key", "bytes", "nan", "unsortable set", "object"],
)
def test_dumps_refuses_what_fastjson_could_not_have_written(value: object) -> None:
    with pytest.raises(RemotingProtocolError):
        dumps_fastjson(value)


def test_dumps_bounds_nesting() -> None:
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(RemotingProtocolError, match="nests deeper"):
        dumps_fastjson(deep)


def test_properties_written_for_java_properties_load() -> None:
    text = dumps_properties({"enableElectUncleanMaster": True, "b key": "x=y:z", "c": " é#"})
    assert text == b"b\\ key=x\\=y\\:z\nc=\\ \\u00E9\\#\nenableElectUncleanMaster=true\n"


def test_properties_parsed_as_java_properties_load() -> None:
    text = (
        b"# comment\n! other comment\n\n  a = 1\nb:2\nc 3\nd=multi \\\n    line\\\\\n"
        b"e=\\u00e9\\t\\n\r\nf\\=g=h\nempty=\nkeyonly\nutf=\xc3\xa9"
    )
    assert loads_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "multi line\\",
        "e": "é\t\n",
        "f=g": "h",
        "empty": "",
        "keyonly": "",
        "utf": "é",
    }


def test_properties_bad_unicode_escape_is_a_protocol_error() -> None:
    with pytest.raises(RemotingProtocolError, match="malformed") as caught:
        loads_properties(b"a=1\nb=\\u12x4\n")
    assert caught.value.offset == 4
    with pytest.raises(RemotingProtocolError, match="not UTF-8"):
        loads_properties(b"a=\xff")
