"""`rmqc log` through Typer's runner on real data directories written with LmdbStorage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqc import fsm, raft
from rmqc.cli._exit import ExitCode
from rmqc.cli.main import app
from rmqc.launcher import RMQC, free_ports
from rmqc.raft._types import ConfChange, ConfChangeType, ConfState, Entry, EntryType, HardState
from rmqc.storage import (
    DATA_FILE_NAME,
    IDENTITY_FILE_NAME,
    LmdbStorage,
    NodeIdentity,
    acquire_node_lock,
    claim_identity,
)

runner = CliRunner()
LEADER_TS_MS = 1_763_000_000_000


def group_commands(broker_name: str, ts_ms: int) -> list[list[fsm.Command]]:
    """The life of one broker group, one list per log entry: two brokers register, one is
    elected, the SyncStateSet grows, then an election with a stale epoch is refused."""
    register = [
        fsm.ApplyBrokerId("DefaultCluster", broker_name, broker_id, f"10.0.0.{broker_id}:10911",
                          f"check-{broker_name}-{broker_id}", ts_ms)
        for broker_id in (1, 2)
    ]
    elect = fsm.ElectMaster("DefaultCluster", broker_name, fsm.Trigger.BROKER, candidate=1,
                            expected_master_epoch=0, expected_sync_state_set_epoch=0,
                            leader_ts_ms=ts_ms + 1, requester_id=1)
    grow = fsm.AlterSyncStateSet(broker_name, master_id=1, expected_master_epoch=1,
                                 expected_sync_state_set_epoch=1, new_sync_state_set=(1, 2),
                                 leader_ts_ms=ts_ms + 2)
    stale = fsm.ElectMaster("DefaultCluster", broker_name, fsm.Trigger.ADMIN, candidate=2,
                            expected_master_epoch=0, expected_sync_state_set_epoch=0,
                            leader_ts_ms=ts_ms + 3, requester_id=2)
    return [register, [elect], [grow], [stale]]


def controller_entries(groups: int, first_index: int = 1) -> list[Entry]:
    """A no-op then the lives of `groups` broker groups, terms rising every 10 entries."""
    payloads = [b""]
    for g in range(groups):
        payloads += [fsm.encode_commands(c) for c in group_commands(f"broker-{g}", LEADER_TS_MS + g)]
    return [
        Entry(index, 1 + index // 10, data=payload)
        for index, payload in enumerate(payloads, start=first_index)
    ]


def make_data_dir(path: Path, groups: int = 3, commit: int | None = None,
                  identity: NodeIdentity | None = None) -> list[Entry]:
    """A data directory as node `identity` (default: named as the directory, group "rmqc") leaves it."""
    entries = controller_entries(groups)
    commit = entries[-1].index if commit is None else commit
    with LmdbStorage(path, sync=False) as storage:
        storage.save(HardState(term=entries[-1].term, vote="n1", commit=commit), entries)
    claim_identity(path, identity or NodeIdentity(path.name, "rmqc"))
    return entries


def invoke(*args: str) -> object:
    return runner.invoke(app, ["log", *map(str, args)])


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "n1"
    make_data_dir(path)
    return path


# ----- dump -----


def test_dump_prints_entries_in_words(data_dir: Path) -> None:
    result = invoke("dump", data_dir)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 13
    assert lines[0].split() == ["1", "1", "normal", "no-op", "(leader", "start)"]
    assert "apply broker id broker-0 id 1 at 10.0.0.1:10911" in lines[1]
    assert "; apply broker id broker-0 id 2" in lines[1]
    assert lines[2].split()[:3] == ["3", "1", "normal"]
    assert lines[2].endswith("elect master broker-0 -> 1 (masterEpoch 1)")
    assert lines[3].endswith("alter sync state set broker-0 -> [1, 2] (syncStateSetEpoch 2)")
    # in the log, but apply refused it: it changed nothing
    assert lines[4].endswith("elect master broker-0 -> 2 (masterEpoch 1) REFUSED (stale_master_epoch)")
    assert sum("REFUSED" in line for line in lines) == 3  # one per group


def test_dump_marks_refused_commands_after_a_compaction_too(data_dir: Path) -> None:
    """Compacted at 13 (kept: 12 and 13, already in the snapshot), then a fourth group's life:
    replayed from the snapshot's state."""
    assert invoke("compact", data_dir, "--keep", "2").exit_code == 0
    later = [Entry(index, 2, data=fsm.encode_commands(commands))
             for index, commands in enumerate(group_commands("broker-3", LEADER_TS_MS + 3), start=14)]
    with LmdbStorage(data_dir, sync=False) as storage:
        storage.save(HardState(term=2, vote="n1", commit=17), later)
    lines = invoke("dump", data_dir).stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["12", "13", "14", "15", "16", "17"]
    assert not any("REFUSED" in line for line in lines[:2])  # behind the snapshot: no verdict
    assert lines[-1].endswith("REFUSED (stale_master_epoch)")
    assert not any("REFUSED" in line for line in lines[2:5])


def test_dump_range_and_json(data_dir: Path) -> None:
    result = invoke("dump", data_dir, "--from", 3, "--to", 5, "--json")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["index"] for r in records] == [3, 4, 5]
    assert records[0] == {
        "index": 3,
        "term": 1,
        "type": "normal",
        "commands": [{"command": "elect_master", "description": "elect master broker-0 -> 1 (masterEpoch 1)",
                      "result": "ok"}],
    }
    refused = records[2]["commands"][0]
    assert (refused["command"], refused["result"]) == ("elect_master", "stale_master_epoch")


def test_dump_range_beyond_the_log_is_clamped(data_dir: Path) -> None:
    result = invoke("dump", data_dir, "--from", 12, "--to", 99)
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["12", "13"]


def test_dump_on_a_directory_without_a_log(tmp_path: Path) -> None:
    result = invoke("dump", tmp_path)
    assert result.exit_code == ExitCode.NOT_A_DATA_DIR == 4
    assert "no rmqc log" in result.output


@pytest.mark.parametrize("command", ["verify", "dump", "stats", "compact", "export"])
@pytest.mark.parametrize("exists", [True, False], ids=["empty-directory", "no-directory"])
def test_a_directory_without_a_log_is_not_a_data_directory_and_stays_as_it_was(
        tmp_path: Path, command: str, exists: bool) -> None:
    """`log compact /nonexistent` used to create an empty data directory there and exit 0."""
    target = tmp_path / "nodir"
    if exists:
        target.mkdir()
    extra = ["--out", str(tmp_path / "out.jsonl"), "--node-id", "n0", "--cluster", "c"] if command == "export" else []
    result = invoke(command, target, *extra)
    assert result.exit_code == ExitCode.NOT_A_DATA_DIR, result.output
    assert f"no rmqc log in {target}" in result.output
    assert (list(target.iterdir()) == []) if exists else not target.exists()


@pytest.mark.parametrize("command", ["verify", "dump", "stats", "compact"])
def test_a_data_file_that_is_not_lmdb_is_not_a_data_directory(tmp_path: Path, command: str) -> None:
    (tmp_path / DATA_FILE_NAME).write_bytes(b"not lmdb at all\n" * 1000)
    result = invoke(command, tmp_path)
    assert result.exit_code == ExitCode.NOT_A_DATA_DIR, result.output
    assert f"{tmp_path} is not an rmqc data directory: its {DATA_FILE_NAME} is not an LMDB file" in result.output
    assert isinstance(result.exception, SystemExit)  # a message, no traceback


def test_verify_help_says_what_it_checks_and_what_not() -> None:
    text = " ".join(invoke("verify", "--help").output.split())  # Rich wraps the help to the terminal
    assert "every log entry" in text and "snapshot" in text
    assert "Not checked: free or unused LMDB pages" in text and "child process" in text


def test_dump_stops_at_a_corrupt_entry_naming_it(data_dir: Path) -> None:
    flip_in_data_file(data_dir, b"check-broker-1-2")
    result = invoke("dump", data_dir)
    assert result.exit_code == 1
    assert "corrupt log at index 6: entry checksum mismatch" in result.output
    assert result.stdout.splitlines()[-1].split()[0] == "5"


def test_dump_reads_a_live_node(data_dir: Path) -> None:
    with LiveNode(data_dir):
        result = invoke("dump", data_dir, "--json")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 13


# ----- stats -----


def test_stats_table(data_dir: Path) -> None:
    result = invoke("stats", data_dir)
    assert result.exit_code == 0, result.output
    rows = dict(_table_rows(result.stdout))
    assert rows["first index"] == "1"
    assert rows["last index"] == "13"
    assert rows["entries by type"] == "normal 13"
    assert rows["term range"] == "1..2"
    assert rows["snapshot index"] == "0"
    assert int(rows["bytes on disk"]) == (data_dir / DATA_FILE_NAME).stat().st_size
    assert int(rows["free pages"]) >= 0


def test_stats_json(data_dir: Path) -> None:
    result = invoke("stats", data_dir, "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert (stats["first_index"], stats["last_index"], stats["entry_count"]) == (1, 13, 13)
    assert (stats["first_term"], stats["last_term"]) == (1, 2)
    assert stats["hard_state_commit"] == 13


# ----- verify -----


def test_verify_clean(data_dir: Path) -> None:
    result = invoke("verify", data_dir)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 13 entries checked")


def test_verify_reports_the_first_bad_index(data_dir: Path) -> None:
    flip_in_data_file(data_dir, b"check-broker-2-1")
    result = invoke("verify", data_dir)
    assert result.exit_code == 1
    assert "corrupt at index 10: entry checksum mismatch (9 entries good before it)" in result.stdout


# ----- compact -----


def test_compact_takes_a_snapshot_drops_entries_and_shrinks_the_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "n1"
    entries = make_data_dir(data_dir, groups=400, commit=1500)
    result = invoke("compact", data_dir, "--keep", 100)
    assert result.exit_code == 0, result.output
    assert "snapshot at 1500 (taken)" in result.stdout
    assert f"log 1..{len(entries)} -> 1401..{len(entries)}" in result.stdout
    before, after = (int(n.rstrip(",")) for n in result.stdout.split("bytes before ")[1].split()[::2])
    assert after < before
    assert after == (data_dir / DATA_FILE_NAME).stat().st_size
    with LmdbStorage(data_dir, sync=False) as storage:
        assert storage.verify().ok
        snapshot = storage.snapshot()
        assert snapshot.meta.index == 1500
        replayed = fsm.ControllerState()
        for entry in entries[:1500]:
            replayed.apply_all(fsm.decode_commands(entry.data))
        assert snapshot.data == replayed.snapshot()
        assert storage.entries(1401, 1403) == entries[1400:1402]


def test_compact_twice_reuses_the_snapshot(tmp_path: Path) -> None:
    data_dir = tmp_path / "n1"
    make_data_dir(data_dir, groups=10)
    assert invoke("compact", data_dir, "--keep", 5).exit_code == 0
    result = invoke("compact", data_dir, "--keep", 0)
    assert result.exit_code == 0, result.output
    assert "snapshot at 41 (already there)" in result.stdout
    assert "log 37..41 -> 42..41" in result.stdout


def test_compact_refuses_a_live_node(data_dir: Path) -> None:
    with LiveNode(data_dir) as pid:
        result = invoke("compact", data_dir)
    assert result.exit_code == ExitCode.NODE_RUNNING == 5
    assert f"in use by a running node (PID {pid}); stop the node first" in result.output
    with LmdbStorage(data_dir, sync=False) as storage:
        assert storage.first_index() == 1 and storage.snapshot().is_empty


def test_compact_refuses_while_this_process_holds_the_lock(data_dir: Path) -> None:
    with acquire_node_lock(data_dir):
        result = invoke("compact", data_dir)
    assert result.exit_code == ExitCode.NODE_RUNNING


# ----- export -----


def test_export_jsonl(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "history.jsonl"
    result = invoke("export", data_dir, "--out", out, "--cluster", "prod")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert f"exported {len(rows)} rows (entries 1..13) to" in result.stdout
    assert len(rows) == 1 + 3 * 5  # no-op, then per group: 2 registrations, elect, alter, stale
    assert all(list(r) == list(fsm.EXPORT_COLUMN_NAMES) for r in rows)
    assert {(r["controller_cluster"], r["node_id"]) for r in rows} == {("prod", "n1")}
    assert rows[0]["command"] == "noop"
    elect = rows[3]
    assert (elect["index"], elect["command"], elect["new_master_id"], elect["master_epoch"]) == (
        3, "elect_master", 1, 1)
    assert elect["description"] == "elect master broker-0 -> 1 (masterEpoch 1)"
    assert rows[5]["result"] == "stale_master_epoch"
    assert [r["seq"] for r in rows[1:3]] == [0, 1]


def test_export_labels_rows_with_the_identity_the_directory_records(tmp_path: Path) -> None:
    """Two nodes of different controller groups, both in directories named as `make serve` names
    its own: each export says whose log it is."""
    outs = []
    for group, node in (("east", "n0"), ("west", "n3")):
        data_dir = tmp_path / group / "rmqc-data"
        make_data_dir(data_dir, groups=1, identity=NodeIdentity(node, group))
        outs.append(tmp_path / f"{group}.jsonl")
        assert invoke("export", data_dir, "--out", outs[-1]).exit_code == 0
    labels = [{(r["controller_cluster"], r["node_id"]) for r in map(json.loads, out.read_text().splitlines())}
              for out in outs]
    assert labels == [{("east", "n0")}, {("west", "n3")}]


def test_export_of_a_directory_without_identity_asks_for_the_labels(tmp_path: Path) -> None:
    data_dir = tmp_path / "rmqc-data"
    make_data_dir(data_dir, groups=1)
    (data_dir / IDENTITY_FILE_NAME).unlink()  # as an older rmqc left it
    result = invoke("export", data_dir, "--out", tmp_path / "h.jsonl")
    assert result.exit_code == 2
    assert "does not record its node id and controller group" in result.output
    assert "--node-id and --cluster" in result.output
    labelled = invoke("export", data_dir, "--out", tmp_path / "h.jsonl", "--node-id", "n5", "--cluster", "c")
    assert labelled.exit_code == 0, labelled.output


def test_export_only_committed_entries(tmp_path: Path) -> None:
    data_dir = tmp_path / "n2"
    make_data_dir(data_dir, groups=2, commit=5)
    out = tmp_path / "h.jsonl"
    assert invoke("export", data_dir, "--out", out, "--node-id", "n2").exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert max(r["index"] for r in rows) == 5
    assert {r["node_id"] for r in rows} == {"n2"}


def test_export_parquet_has_the_documented_schema(data_dir: Path, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "history.parquet"
    result = invoke("export", data_dir, "--out", out, "--format", "parquet")
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.num_rows == 16
    assert table.schema.names == list(fsm.EXPORT_COLUMN_NAMES)
    assert table.schema.field("sync_state_set").type.value_type == pa.int64()
    assert table.schema.field("master_epoch").type == pa.int32()
    assert table.schema.field("elected").type == pa.bool_()
    assert table.column("sync_state_set").to_pylist()[4] == [1, 2]


def test_export_after_compaction_starts_from_the_snapshot(tmp_path: Path) -> None:
    data_dir = tmp_path / "n1"
    make_data_dir(data_dir, groups=10)
    assert invoke("compact", data_dir, "--keep", 3).exit_code == 0
    with LmdbStorage(data_dir, sync=False) as storage:
        more = controller_entries(1, first_index=41)[1:]  # broker-0 again: already registered
        storage.save(HardState(term=5, commit=45), more)
    out = tmp_path / "h.jsonl"
    result = invoke("export", data_dir, "--out", out)
    assert result.exit_code == 0, result.output
    assert "exported 5 rows (entries 42..45)" in result.stdout
    assert "history up to index 41 is only in the snapshot" in result.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in rows] == [42, 42, 43, 44, 45]
    # Replayed on the snapshot's state: broker-0 already has a master at epoch 1.
    assert rows[2]["result"] == "stale_master_epoch"


# ----- what `rmqc serve` says about a directory it cannot use -----


def serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (port,) = free_ports(1)
    command = [RMQC, "serve", "--data-dir", str(data_dir), "--peers", f"n0-127.0.0.1:{port}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_serve_checks_the_log_before_it_says_it_serves(tmp_path: Path) -> None:
    data_dir = tmp_path / "rmqc-data"
    make_data_dir(data_dir, identity=NodeIdentity("n0", "rmqc"))
    flip_in_data_file(data_dir, b"check-broker-1-2")
    result = serve(data_dir)
    assert result.returncode == ExitCode.CANNOT_SERVE
    assert "serving on" not in result.stdout
    assert "corrupt log at index 6: entry checksum mismatch" in result.stderr
    assert f"`rmqc log verify {data_dir}` finds: corrupt at index 6" in result.stderr
    assert "Exceptions from Trio nursery" not in result.stderr
    assert "corrupt at index 6" in invoke("verify", data_dir).output  # which does find it


def test_serve_refuses_the_data_directory_of_another_node(tmp_path: Path) -> None:
    data_dir = tmp_path / "rmqc-data"
    make_data_dir(data_dir, identity=NodeIdentity("n0", "east"))
    result = serve(data_dir, "--group", "west")
    assert result.returncode == ExitCode.CANNOT_SERVE and "serving on" not in result.stdout
    assert f"data directory {data_dir} belongs to node n0 of controller group east, not n0 of west" in result.stderr


def test_serve_on_a_data_dir_that_is_a_file_names_the_option(tmp_path: Path) -> None:
    a_file = tmp_path / "rmqc-data"
    a_file.write_text("")
    result = serve(a_file)
    assert result.returncode == ExitCode.USAGE
    assert f"data_dir: bad value '{a_file}' from command line: '{a_file}' is a file, not a directory" in result.stderr


# ----- membership entries -----


def test_conf_changes_in_dump_compact_and_export(tmp_path: Path) -> None:
    """Membership bootstrapped as log entries: dump describes them, compact's snapshot carries
    the membership they build, export gives them one row each."""
    data_dir = tmp_path / "n1"
    address = b"127.0.0.1:9878"
    changes = [ConfChange(ConfChangeType.ADD_VOTER, node, address) for node in ("n1", "n2", "n3")]
    changes.append(ConfChange(ConfChangeType.REMOVE_NODE, "n3"))
    membership = [
        Entry(i, 1, EntryType.CONF_CHANGE, raft.encode_conf_change(c))
        for i, c in enumerate(changes, start=1)
    ]
    entries = membership + controller_entries(1, first_index=len(membership) + 1)
    with LmdbStorage(data_dir, sync=False) as storage:
        storage.save(HardState(term=1, commit=entries[-1].index), entries)
    claim_identity(data_dir, NodeIdentity("n1", "rmqc"))

    dump_result = invoke("dump", data_dir, "--to", 5)
    assert dump_result.exit_code == 0, dump_result.output
    lines = dump_result.stdout.splitlines()
    assert lines[0].split(None, 3)[3] == "conf change: add voter n1 (127.0.0.1:9878)"
    assert lines[3].split(None, 3)[3] == "conf change: remove node n3"
    assert lines[4].split()[2:] == ["normal", "no-op", "(leader", "start)"]

    out = tmp_path / "h.jsonl"
    assert invoke("export", data_dir, "--out", out).exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["command"] for r in rows[:5]] == ["conf_change"] * 4 + ["noop"]

    compact_result = invoke("compact", data_dir, "--keep", 0)
    assert compact_result.exit_code == 0, compact_result.output
    with LmdbStorage(data_dir, sync=False) as storage:
        assert storage.snapshot().meta.conf_state == ConfState(voters=("n1", "n2"))


# ----- helpers -----


def flip_in_data_file(data_dir: Path, needle: bytes) -> None:
    data_file = data_dir / DATA_FILE_NAME
    raw = bytearray(data_file.read_bytes())
    at = raw.find(needle)
    assert at >= 0, needle
    while at >= 0:  # every copy: stale ones may sit in unused page space
        raw[at + 3] ^= 0x20
        at = raw.find(needle, at + 1)
    data_file.write_bytes(bytes(raw))


def _table_rows(text: str) -> list[tuple[str, str]]:
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0] and cells[0] != "what":
            rows.append((cells[0], cells[1]))
    return rows


class LiveNode:
    """A child process holding the node lock and the LMDB environment open, as a server does."""

    SCRIPT = (
        "import sys\n"
        "from rmqc.storage import LmdbStorage, acquire_node_lock\n"
        "lock = acquire_node_lock(sys.argv[1])\n"
        "storage = LmdbStorage(sys.argv[1])\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def __enter__(self) -> int:
        self.child = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(self.data_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.child.stdout is not None and self.child.stdout.readline() == "ready\n"
        return self.child.pid

    def __exit__(self, *exc_info: object) -> None:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.close()
        self.child.wait(timeout=30)
        self.child.stdout.close()


def test_verify_compact_and_export_answer_json(data_dir: Path, tmp_path: Path) -> None:
    result = invoke("verify", data_dir, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True
    result = invoke("compact", data_dir, "--keep", "2", "--json")
    assert result.exit_code == 0, result.output
    compacted = json.loads(result.stdout)
    assert compacted["snapshot_index"] == 13 and compacted["first_index_after"] > compacted["first_index_before"]
    out = tmp_path / "n1.jsonl"
    result = invoke("export", data_dir, "--out", out, "--node-id", "n1", "--cluster", "c", "--json")
    assert result.exit_code == 0, result.output
    exported = json.loads(result.stdout)
    assert (exported["out"], exported["nodeId"], exported["cluster"]) == (str(out), "n1", "c")
    assert exported["rows"] == len(out.read_text().splitlines())
