"""rmqc._hot: hot records behave as frozen dataclasses wherever it shows (equality, hash, repr,
replace) and mypy refuses a write to one; enum_members hands out the enum's own members."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mypy import api as mypy_api

from rmqc._hot import enum_members, hot_record
from rmqc.raft import Entry, EntryType, Message, MessageType, Role
from rmqc.raft._core import MT, ROLE


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenEntry:
    index: int
    term: int
    data: bytes = b""


@hot_record
class HotEntry:
    index: int
    term: int
    data: bytes = b""


def test_a_hot_record_equals_hashes_and_prints_as_a_frozen_dataclass_does() -> None:
    frozen, hot = FrozenEntry(3, 2, b"x"), HotEntry(3, 2, b"x")
    assert hot == HotEntry(3, 2, b"x") and hot != HotEntry(3, 2, b"y")
    assert hash(hot) == hash(HotEntry(3, 2, b"x")) == hash(frozen)  # both hash the fields' tuple
    assert repr(hot).removeprefix("HotEntry") == repr(frozen).removeprefix("FrozenEntry")
    assert dataclasses.replace(hot, term=5) == HotEntry(3, 5, b"x") and hot.term == 2
    assert not hasattr(hot, "__dict__"), "slotted, as the frozen records were"
    assert {Entry(1, 1, EntryType.NORMAL, b"a"): 1}[Entry(1, 1, EntryType.NORMAL, b"a")] == 1


def test_mypy_refuses_a_write_to_a_hot_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYPYPATH", str(Path(__file__).resolve().parent.parent / "src"))
    source = tmp_path / "writes_a_hot_record.py"
    source.write_text("from rmqc._hot import hot_record\n\n\n@hot_record\nclass Point:\n    x: int\n\n\n"
                      "point = Point(1)\npoint.x = 2\n")
    out, _err, status = mypy_api.run([str(source), "--no-incremental", "--follow-imports=silent"])
    assert status == 1 and "writes_a_hot_record.py:10: error" in out and "read-only" in out, out


def test_enum_members_are_the_enums_own() -> None:
    members = enum_members(MessageType)
    assert all(getattr(members, member.name) is member for member in MessageType)
    assert MT.APP is MessageType.APP and ROLE.LEADER is Role.LEADER
    message = Message(MT.APP, "n1", "n0")
    assert message.type is MessageType.APP and message == Message(MessageType.APP, "n1", "n0")


def test_a_role_hashes_by_identity_and_still_keys_a_dict() -> None:
    handlers = {role: role.value for role in Role}
    assert [handlers[role] for role in Role] == [role.value for role in Role]
    assert hash(Role.LEADER) == object.__hash__(Role.LEADER)
