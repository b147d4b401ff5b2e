"""`rmqc log`: inspect and maintain a node's Raft log (its LMDB data directory).

Reading commands (dump, stats, verify, export) open the directory read-only and work on a running
node too (LMDB readers do not block the writer). `compact` writes, so it takes the node lock and
refuses while a node holds it.

Layout: operations (no output) first, then the one render section (all Rich output), then the
commands, which parse, call one operation and render.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rmqc import fsm
from rmqc.errors import ConfigError, CorruptionError, RmqcError
from rmqc.raft import ConfState, Entry, Snapshot
from rmqc.storage import (
    DAMAGE_ADVICE,
    IDENTITY_FILE_NAME,
    LmdbStorage,
    NodeIdentity,
    NodeLockedError,
    NotASnapshotFile,
    NotAStorageError,
    RestoreRefused,
    SnapshotFile,
    StorageStats,
    VerifyReport,
    acquire_node_lock,
    read_identity,
    read_snapshot_file,
    restore_data_dir,
    rewrite_compactly,
    verify_isolated,
)

from ._exit import ExitCode

log_app = typer.Typer(
    name="log",
    help="Inspect and maintain a node's Raft log (the LMDB data directory).",
    no_args_is_help=True,
)

DEFAULT_KEEP_ENTRIES = 1_000
DEFAULT_GROUP = "rmqc"  # `rmqc serve`'s default controller group (rmqc.config NodeConfig.group)
# Rows per Parquet row group: bounds the export's memory whatever the log's length.
PARQUET_BATCH_ROWS = 10_000


class MissingIdentity(RmqcError):
    """An export needs labels the data directory does not record."""


class ExportFormat(StrEnum):
    JSONL = "jsonl"
    PARQUET = "parquet"


# ====================================================================================== operations

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


def dump_records(storage: LmdbStorage, first: int | None, last: int | None) -> Iterator[dict[str, Any]]:
    """`fsm.describe_entry` of each entry in [first, last] (inclusive), clamped to what the log holds.

    Committed entries are replayed (from the snapshot when the log was compacted), so a command
    that apply refused says so and why (`result`, e.g. `stale_master_epoch`): it is in the log,
    but changed nothing. Entries the replay cannot reach (behind the snapshot, not yet committed)
    are described without a result."""
    lo = max(first or storage.first_index(), storage.first_index())
    hi = min(last if last is not None else storage.last_index(), storage.last_index()) + 1
    state, conf_state, replay_from = replay_start(storage)
    commit = committed_range(storage)[1] - 1
    for entry in storage.iter_entries(min(lo, replay_from), max(lo, hi)):
        results = None
        if replay_from <= entry.index <= commit:
            try:
                applied = fsm.apply_entry(state, conf_state, entry)
                results, conf_state = applied.results, applied.conf_state
            except RmqcError:
                pass  # described without a result, saying why it does not decode
        if entry.index >= lo:
            yield fsm.describe_entry(entry, results)


def replay_start(storage: LmdbStorage) -> tuple[fsm.ControllerState, ConfState, int]:
    """Where a replay of the log begins: (state, membership, first index to apply). The empty
    state at index 1 while the log holds it; else the snapshot's state and membership (entries
    kept behind the snapshot are in its state already)."""
    state = fsm.ControllerState()
    if storage.first_index() == 1:
        return state, ConfState(), 1
    snapshot = storage.snapshot()
    state.restore(snapshot.data)
    return state, snapshot.meta.conf_state, snapshot.meta.index + 1


@contextlib.contextmanager
def open_for_reading(data_dir: Path) -> Iterator[LmdbStorage]:
    """The data directory read-only, once a child process read all of it without crashing
    (storage._isolated): a damaged page that would abort LMDB is an error, not a dead command.
    Damage that leaves something readable (a bad entry, a damaged journal) lets the command show
    what is there, then fails it with the damage named."""
    report = verify_isolated(data_dir)
    with LmdbStorage(data_dir, readonly=True) as storage:
        yield storage
    if not report.ok:
        raise CorruptionError(report.first_bad_index or 0, str(report.problem))


def committed_range(storage: LmdbStorage) -> tuple[int, int]:
    """[lo, hi) of the committed entries the log still holds."""
    hard_state, _ = storage.initial_state()
    return storage.first_index(), min(hard_state.commit, storage.last_index()) + 1


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    snapshot_index: int
    snapshot_taken: bool
    first_index_before: int
    first_index_after: int
    last_index: int
    bytes_before: int
    bytes_after: int


def compact_data_dir(data_dir: Path, keep_entries: int, progress: ProgressFn) -> CompactionOutcome:
    """Snapshot the committed state if the snapshot lags, drop entries behind it keeping
    `keep_entries`, and rewrite the file compactly. Holds the node lock throughout.

    A directory without a log (or no directory) raises NotAStorageError before anything is
    written: the lock and a writable LmdbStorage would create an empty data directory there; a
    damaged one raises its damage (compacting it would write over what a repair needs)."""
    with open_for_reading(data_dir):
        pass
    with acquire_node_lock(data_dir):
        with LmdbStorage(data_dir) as storage:
            first_before = storage.first_index()
            snapshot, taken = _snapshot_of_committed_state(storage, progress)
            compact_to = snapshot.meta.index - keep_entries
            if compact_to >= storage.first_index():
                storage.compact(compact_to, progress=lambda done, total: progress("drop", done, total))
            first_after, last = storage.first_index(), storage.last_index()
        progress("rewrite", 0, 1)
        bytes_before, bytes_after = rewrite_compactly(data_dir)
        progress("rewrite", 1, 1)
    return CompactionOutcome(
        snapshot.meta.index, taken, first_before, first_after, last, bytes_before, bytes_after
    )


def _snapshot_of_committed_state(storage: LmdbStorage, progress: ProgressFn) -> tuple[Snapshot, bool]:
    """The stored snapshot if it covers every committed entry, else a new one at the commit index."""
    snapshot = storage.snapshot()
    _lo, hi = committed_range(storage)
    commit = hi - 1
    if commit <= snapshot.meta.index:
        return snapshot, False
    state, conf_state, start = replay_start(storage)
    total = commit - start + 1

    def report(entry: Entry) -> None:
        done = entry.index - start + 1
        if done % 1000 == 0 or done == total:
            progress("replay", done, total)

    conf_state = fsm.replay(storage.iter_entries(start, hi), state, conf_state, report)
    if not conf_state.voters:  # membership never went through the log: use the recorded one
        conf_state = storage.initial_state()[1]
    return storage.create_snapshot(commit, conf_state, state.snapshot()), True


@dataclass(frozen=True, slots=True)
class ExportOutcome:
    rows: int
    first_index: int  # first entry exported
    last_index: int  # last entry exported (first - 1 when none)
    snapshot_index: int  # the export started from this snapshot's state (0: from an empty state)


def export_rows(storage: LmdbStorage, exporter: Any, lo: int, hi: int) -> Iterator[dict[str, Any]]:
    for entry in storage.iter_entries(lo, max(lo, hi)):
        yield from exporter.rows_for_entry(entry)


def write_jsonl(rows: Iterator[dict[str, Any]], out: Path) -> int:
    count = 0
    with out.open("wb") as sink:
        for row in rows:
            sink.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
            count += 1
    return count


def write_parquet(rows: Iterator[dict[str, Any]], out: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema()
    count = 0
    with pq.ParquetWriter(out, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) == PARQUET_BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count, batch = count + len(batch), []
        if batch or count == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count


def parquet_schema() -> Any:
    import pyarrow as pa

    arrow_types = {
        "string": pa.string(),
        "long": pa.int64(),
        "int": pa.int32(),
        "boolean": pa.bool_(),
        "array<long>": pa.list_(pa.int64()),
    }
    return pa.schema([pa.field(name, arrow_types[kind]) for name, kind in fsm.EXPORT_COLUMNS])


_WRITERS: dict[ExportFormat, Callable[[Iterator[dict[str, Any]], Path], int]] = {
    ExportFormat.JSONL: write_jsonl,
    ExportFormat.PARQUET: write_parquet,
}


def export_identity(data_dir: Path, cluster: str | None, node_id: str | None) -> NodeIdentity:
    """The labels of the export: the directory's recorded identity, unless options replace it."""
    recorded = read_identity(data_dir) if data_dir.is_dir() else None
    if recorded is None and (cluster is None or node_id is None):
        raise MissingIdentity(
            f"{data_dir} does not record its node id and controller group (no {IDENTITY_FILE_NAME}: "
            "it was written by an rmqc older than this one, or is not a data directory); start the "
            "node on it once, or give --node-id and --cluster")
    return NodeIdentity(node_id or recorded.node_id, cluster or recorded.group)  # type: ignore[union-attr]


def export_data_dir(
    data_dir: Path, out: Path, fmt: ExportFormat, cluster: str, node_id: str
) -> ExportOutcome:
    """Export rows of every committed entry the log holds (docs/export-schema.md).

    When the log was compacted, the exporter starts from the snapshot's state and exports what
    follows it (entries kept behind the snapshot are in that state already, so not replayed).
    """
    with open_for_reading(data_dir) as storage:
        state, conf_state, lo = replay_start(storage)
        exporter = fsm.HistoryExporter(cluster, node_id, state, conf_state)
        hi = committed_range(storage)[1]
        count = _WRITERS[fmt](export_rows(storage, exporter, lo, hi), out)
    return ExportOutcome(count, lo, max(lo, hi) - 1, lo - 1 if lo > 1 else 0)


def checked_snapshot_file(path: Path) -> tuple[SnapshotFile, fsm.ControllerState]:
    """A snapshot file after every check: its checksums, and a state that decodes."""
    snapshot = read_snapshot_file(path)
    state = fsm.ControllerState()
    try:
        state.restore(snapshot.data)
    except RmqcError as exc:
        raise CorruptionError(snapshot.meta.index, f"snapshot state undecodable: {exc}") from None
    return snapshot, state


def restore_from_file(path: Path, data_dir: Path, node_id: str, peers: str,
                      group: str | None) -> tuple[SnapshotFile, fsm.ControllerState, NodeIdentity]:
    """A new data directory for `node_id` of the group `peers` names, starting from the file."""
    from rmqc.config import parse_peers

    try:
        voters = tuple(peer.id for peer in parse_peers(peers))
    except ValueError as exc:
        raise ConfigError(f"--peers: {exc}") from None
    snapshot, state = checked_snapshot_file(path)
    identity = NodeIdentity(node_id, group or snapshot.group or DEFAULT_GROUP)
    restore_data_dir(snapshot, data_dir, identity, voters)
    return snapshot, state, identity


# ========================================================================================= render

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


def render_dump_record(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _out.out(orjson.dumps(record).decode(), highlight=False)
        return
    text = "; ".join(c["description"] + ("" if c.get("result", "ok") == "ok" else f" REFUSED ({c['result']})")
                     for c in record["commands"])
    _out.out(f"{record['index']:>10} {record['term']:>6} {record['type']:<11} {text}", highlight=False)


def render_stats(stats: StorageStats, as_json: bool) -> None:
    if as_json:
        _out.out(orjson.dumps(asdict(stats)).decode())
        return
    table = Table(title="rmqc log stats", show_header=True)
    table.add_column("what")
    table.add_column("value", justify="right")
    term_range = "-" if stats.first_term is None else f"{stats.first_term}..{stats.last_term}"
    by_type = ", ".join(f"{kind} {count}" for kind, count in stats.entries_by_type.items()) or "-"
    rows = [
        ("first index", stats.first_index),
        ("last index", stats.last_index),
        ("entries", stats.entry_count),
        ("entries by type", by_type),
        ("term range", term_range),
        ("snapshot index", stats.snapshot_index),
        ("snapshot term", stats.snapshot_term),
        ("hard state term", stats.hard_state_term),
        ("commit index", stats.hard_state_commit),
        ("payload bytes", stats.payload_bytes),
        ("bytes on disk", stats.bytes_on_disk),
        ("map size bytes", stats.map_size_bytes),
        ("page size bytes", stats.page_size_bytes),
        ("used pages", stats.used_pages),
        ("free pages", stats.free_pages),
    ]
    for what, value in rows:
        table.add_row(what, str(value))
    _out.print(table)


def render_verify(report: VerifyReport) -> None:
    if report.ok:
        _out.print(f"ok: {report.entries_checked} entries checked ({', '.join(report.checked)})")
    else:
        _out.print(
            f"corrupt at index {report.first_bad_index}: {report.problem} "
            f"({report.entries_checked} entries good before it)"
        )
        _err.print(f"what to do: {DAMAGE_ADVICE}")


def render_compaction(outcome: CompactionOutcome) -> None:
    if outcome.snapshot_index == 0:
        _out.print("no snapshot: nothing committed yet")
    else:
        made = "taken" if outcome.snapshot_taken else "already there"
        _out.print(f"snapshot at {outcome.snapshot_index} ({made})")
    _out.print(
        f"log {outcome.first_index_before}..{outcome.last_index} -> "
        f"{outcome.first_index_after}..{outcome.last_index}"
    )
    _out.print(f"bytes before {outcome.bytes_before}, after {outcome.bytes_after}")


def render_export(outcome: ExportOutcome, out: Path) -> None:
    entries = f"entries {outcome.first_index}..{outcome.last_index}"
    if outcome.last_index < outcome.first_index:
        entries = "no committed entries"
    _out.print(f"exported {outcome.rows} rows ({entries}) to {out}", markup=False)
    if outcome.snapshot_index:
        _out.print(f"history up to index {outcome.snapshot_index} is only in the snapshot (compacted)")


def render_snapshot_file(snapshot: SnapshotFile, state: fsm.ControllerState) -> None:
    meta = snapshot.meta
    learners = f", learners {', '.join(meta.conf_state.learners)}" if meta.conf_state.learners else ""
    _out.print(f"ok: snapshot at index {meta.index}, term {meta.term}: {len(state)} broker groups, "
               f"{len(snapshot.data)} bytes of state; voters {', '.join(meta.conf_state.voters)}{learners}; "
               f"saved from {snapshot.origin.get('nodeId', '?')} of group {snapshot.group or '?'}", markup=False)


def render_restore(snapshot: SnapshotFile, state: fsm.ControllerState, identity: NodeIdentity,
                   data_dir: Path, peers: str) -> None:
    _out.print(f"restored index {snapshot.meta.index} (term {snapshot.meta.term}, {len(state)} broker groups) "
               f"into {data_dir} as node {identity.node_id} of group {identity.group}", markup=False)
    group = "" if identity.group == DEFAULT_GROUP else f" --group {identity.group}"
    _out.print(f"start it with: rmqc serve --id {identity.node_id} --peers '{peers}' --data-dir {data_dir}{group}",
               markup=False)


def render_error(message: str) -> None:
    _err.print(f"error: {message}", markup=False)


class ProgressBar:
    """A Rich progress bar with one task per phase, fed by the operations' progress callback."""

    _LABELS: ClassVar[dict[str, str]] = {"replay": "replaying committed entries", "drop": "dropping entries",
                                         "rewrite": "rewriting file"}

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=_err,
        )
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase not in self._tasks:
            self._tasks[phase] = self._progress.add_task(self._LABELS.get(phase, phase), total=total)
        self._progress.update(self._tasks[phase], completed=done, total=total)


# ======================================================================================= commands

DataDir = Annotated[
    Path, typer.Argument(help="the node's data directory", file_okay=False, dir_okay=True)
]


def _fail(message: str, code: ExitCode) -> typer.Exit:
    render_error(message)
    return typer.Exit(int(code))


def _guarded(run: Callable[[], None]) -> None:
    """Run a command body, turning our named errors into a message and an exit code."""
    try:
        run()
    except NotAStorageError as exc:
        raise _fail(str(exc), ExitCode.NOT_A_DATA_DIR) from None
    except (MissingIdentity, NotASnapshotFile, RestoreRefused, ConfigError) as exc:
        raise _fail(str(exc), ExitCode.USAGE) from None
    except NodeLockedError as exc:
        raise _fail(f"refusing to write: {exc}; stop the node first", ExitCode.NODE_RUNNING) from None
    except RmqcError as exc:
        raise _fail(str(exc), ExitCode.CORRUPT) from None


@log_app.command()
def dump(
    data_dir: DataDir,
    first: Annotated[int | None, typer.Option("--from", help="first index to print")] = None,
    last: Annotated[int | None, typer.Option("--to", help="last index to print (inclusive)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines")] = False,
) -> None:
    """One line per entry: index, term, type and its commands in words (--json: each command with
    its tag, description and result)."""

    def run() -> None:
        with open_for_reading(data_dir) as storage:
            for record in dump_records(storage, first, last):
                render_dump_record(record, as_json)

    _guarded(run)


@log_app.command()
def stats(
    data_dir: DataDir,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
) -> None:
    """First/last index, snapshot, term range, entries by type, bytes on disk, free pages."""

    def run() -> None:
        with open_for_reading(data_dir) as storage:
            render_stats(storage.stats(), as_json)

    _guarded(run)


JsonOption = Annotated[bool, typer.Option("--json", help="one JSON object")]


def render_json(document: dict[str, Any]) -> None:
    _out.out(orjson.dumps(document).decode(), highlight=False)


@log_app.command()
def verify(data_dir: Annotated[Path, typer.Argument(help="a node's data directory, or a snapshot file")],
           as_json: JsonOption = False) -> None:
    """Check what the node reads: exit 1 naming the first bad index. Given a snapshot file
    (`rmqc admin snapshot save`), check its header, checksums and state instead.

    Checked: the hard state and membership records, the snapshot (its data against its checksum),
    and every log entry (its CRC32, consecutive indexes, terms that never fall, the commit index
    within the log), the journal (a damaged record with valid ones after it, a wrong size or a
    missing file: a crash leaves none of these), and data.mdb's length against its meta page.
    The read runs in a child process, so a page that crashes LMDB is reported, not fatal.
    Not checked: free or unused LMDB pages (no record lives on them).
    A directory that is not an rmqc data directory exits 4.
    """

    def run() -> None:
        if data_dir.is_file():
            snapshot, state = checked_snapshot_file(data_dir)
            if as_json:
                meta = snapshot.meta
                render_json({"ok": True, "snapshotFile": str(data_dir), "index": meta.index, "term": meta.term,
                             "brokerGroups": len(state), "voters": list(meta.conf_state.voters),
                             "learners": list(meta.conf_state.learners), "group": snapshot.group})
            else:
                render_snapshot_file(snapshot, state)
            return
        report = verify_isolated(data_dir)
        if as_json:
            render_json({"ok": report.ok, **asdict(report)})
        else:
            render_verify(report)
        if not report.ok:
            raise typer.Exit(int(ExitCode.CORRUPT))

    _guarded(run)


@log_app.command()
def compact(
    data_dir: DataDir,
    keep: Annotated[int, typer.Option(min=0, help="entries to keep behind the snapshot")] = DEFAULT_KEEP_ENTRIES,
    as_json: JsonOption = False,
) -> None:
    """Snapshot the committed state, drop entries behind it (keeping N), rewrite the file compactly.

    Refuses to run while a node holds the data directory."""

    def run() -> None:
        with ProgressBar() as progress:
            outcome = compact_data_dir(data_dir, keep, progress)
        if as_json:
            render_json(asdict(outcome))
        else:
            render_compaction(outcome)

    _guarded(run)


@log_app.command()
def export(
    data_dir: DataDir,
    out: Annotated[Path, typer.Option("--out", help="file to write", dir_okay=False)],
    fmt: Annotated[ExportFormat, typer.Option("--format")] = ExportFormat.JSONL,
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="controller group to write in the rows; default: the one recorded in the directory")] = None,
    node_id: Annotated[str | None, typer.Option(
        "--node-id", help="node id to write in the rows; default: the one recorded in the directory")] = None,
    as_json: JsonOption = False,
) -> None:
    """Every committed entry's commands as flat rows (docs/export-schema.md), JSON lines or Parquet.

    Rows are labelled with the node id and controller group the node recorded in its data directory
    (node.json, written when it first started)."""

    def run() -> None:
        identity = export_identity(data_dir, cluster, node_id)
        outcome = export_data_dir(data_dir, out, fmt, identity.group, identity.node_id)
        if as_json:
            render_json({**asdict(outcome), "out": str(out), "cluster": identity.group, "nodeId": identity.node_id})
        else:
            render_export(outcome, out)

    _guarded(run)


@log_app.command()
def restore(
    file: Annotated[Path, typer.Argument(help="a snapshot file (rmqc admin snapshot save)", dir_okay=False)],
    data_dir: Annotated[Path, typer.Option("--data-dir", help="the new data directory (absent or empty)",
                                           file_okay=False)],
    node_id: Annotated[str, typer.Option("--id", help="the node that will serve from it")],
    peers: Annotated[str, typer.Option("--peers", help='the new group\'s voters, "n0-host:port;n1-host:port"')],
    group: Annotated[str | None, typer.Option(
        "--group", help="controller group; default: the one the snapshot was saved from")] = None,
    as_json: JsonOption = False,
) -> None:
    """A new data directory that starts a NEW controller group from a snapshot file (as `etcdutl
    snapshot restore`): the state at the snapshot's index, an empty log after it, `--peers` as the
    membership. Restore the same file for every node of the new group, then start them."""

    def run() -> None:
        snapshot, state, identity = restore_from_file(file, data_dir, node_id, peers, group)
        if as_json:
            render_json({"index": snapshot.meta.index, "term": snapshot.meta.term, "brokerGroups": len(state),
                         "dataDir": str(data_dir), "nodeId": identity.node_id, "group": identity.group})
        else:
            render_restore(snapshot, state, identity, data_dir, peers)

    _guarded(run)
