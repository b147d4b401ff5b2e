"""Snapshot files through `rmqc log verify FILE` and `rmqc log restore` (no node runs): a good file
passes and restores into a data directory a node would open, every damaged byte is caught, and
restore refuses a used directory, a node outside --peers and a file that is not a snapshot."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rmqc import fsm
from rmqc.cli.main import app
from rmqc.raft._types import ConfState, SnapshotMeta
from rmqc.storage import LmdbStorage, encode_snapshot_file, read_identity, write_snapshot_file

PEERS = "a-127.0.0.1:1;b-127.0.0.1:2"


def log(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["log", *args])
    return result.exit_code, result.stdout + result.stderr


def snapshot_bytes() -> bytes:
    state = fsm.ControllerState()
    state.apply(fsm.ApplyBrokerId("C", "broker-a", 1, "10.0.0.1:10911", "10.0.0.1:10911;1700000000000", 0))
    meta = SnapshotMeta(index=42, term=3, conf_state=ConfState(voters=("n0", "n1", "n2")))
    return encode_snapshot_file(meta, state.snapshot(), {"group": "g1", "nodeId": "n1", "savedAtMs": 0})


def test_a_good_file_verifies_and_restores(tmp_path: Path) -> None:
    file = tmp_path / "s.snap"
    write_snapshot_file(file, snapshot_bytes())
    code, out = log("verify", str(file))
    assert code == 0 and "ok: snapshot at index 42, term 3: 1 broker groups" in out and "voters n0, n1, n2" in out
    code, out = log("restore", str(file), "--data-dir", str(tmp_path / "d"), "--id", "b", "--peers", PEERS)
    assert code == 0, out
    assert "rmqc serve --id b" in out and "--group g1" in out
    assert read_identity(tmp_path / "d").group == "g1"  # the source's group unless --group says otherwise
    with LmdbStorage(tmp_path / "d", readonly=True) as storage:
        assert storage.verify().ok
        assert storage.snapshot().meta == SnapshotMeta(42, 3, ConfState(voters=("a", "b")))  # the new membership
        assert storage.initial_state()[0].commit == 42 and storage.last_index() == 42


def test_every_damaged_byte_is_caught(tmp_path: Path) -> None:
    content = snapshot_bytes()
    file = tmp_path / "s.snap"
    for position in range(0, len(content), 7):
        damaged = bytearray(content)
        damaged[position] ^= 0x40
        file.write_bytes(bytes(damaged))
        code, out = log("verify", str(file))
        assert code in (1, 2), (position, out)
    file.write_bytes(content[:-1])
    code, out = log("verify", str(file))
    assert code == 1 and "truncated" in out, out


def test_restore_refusals(tmp_path: Path) -> None:
    file = tmp_path / "s.snap"
    write_snapshot_file(file, snapshot_bytes())
    used = tmp_path / "used"
    used.mkdir()
    (used / "data.mdb").write_text("x")
    code, out = log("restore", str(file), "--data-dir", str(used), "--id", "a", "--peers", PEERS)
    assert code == 2 and "is not empty" in out, out
    code, out = log("restore", str(file), "--data-dir", str(tmp_path / "new"), "--id", "z", "--peers", PEERS)
    assert code == 2 and "not one of the voters a, b" in out, out
    junk = tmp_path / "junk"
    junk.write_bytes(b"hello")
    code, out = log("restore", str(junk), "--data-dir", str(tmp_path / "new"), "--id", "a", "--peers", PEERS)
    assert code == 2 and "not an rmqc snapshot file" in out, out
    assert not (tmp_path / "new").exists()
