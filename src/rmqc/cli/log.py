"""`rmqc log`: inspect and maintain a node's Raft log (its LMDB data directory).

Reading commands (dump, stats, verify, export) open the directory read-only and work on a running
node too (LMDB readers do not block the writer). `compact` writes, so it takes the node lock and
refuses while a node holds it.

Layout: operations (no output) first, then the one render section (all Rich output), then the
commands, which parse, call one operation and render.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rmqc import fsm, raft
from rmqc.errors import RmqcError
from rmqc.raft._types import ConfChangeType, ConfState, Entry, EntryType, Snapshot
from rmqc.storage import (
    IDENTITY_FILE_NAME,
    LmdbStorage,
    NodeIdentity,
    NodeLockedError,
    NotAStorageError,
    StorageStats,
    VerifyReport,
    acquire_node_lock,
    read_identity,
    rewrite_compactly,
)

from ._exit import ExitCode

log_app = typer.Typer(
    name="log",
    help="Inspect and maintain a node's Raft log (the LMDB data directory).",
    no_args_is_help=True,
)

DEFAULT_KEEP_ENTRIES = 1_000
# Rows per Parquet row group: bounds the export's memory whatever the log's length.
PARQUET_BATCH_ROWS = 10_000


class MissingIdentity(RmqcError):
    """An export needs labels the data directory does not record."""


class ExportFormat(StrEnum):
    JSONL = "jsonl"
    PARQUET = "parquet"


# ====================================================================================== operations

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)


def describe_entry(entry: Entry) -> list[str]:
    """The entry's commands in words (one per command; a no-op or conf change is one line)."""
    if entry.type == EntryType.CONF_CHANGE:
        return [_describe_conf_change(entry.data)]
    try:
        commands = fsm.decode_commands(entry.data)
    except RmqcError as exc:
        return [f"undecodable payload: {exc}"]
    return [fsm.describe_command(c) for c in commands] or ["no-op (leader start)"]


def _describe_conf_change(data: bytes) -> str:
    try:
        change = raft.decode_conf_change(data)
    except RmqcError as exc:
        return f"conf change, undecodable: {exc}"
    context = f" ({change.context.decode(errors='replace')})" if change.context else ""
    return f"conf change: {change.type.name.lower().replace('_', ' ')} {change.node_id}{context}"


def dump_records(storage: LmdbStorage, first: int | None, last: int | None) -> Iterator[dict[str, Any]]:
    """One record per entry in [first, last] (inclusive), clamped to what the log holds.

    Committed entries are replayed (from the snapshot when the log was compacted), so a command
    that apply refused says so and why (e.g. `REFUSED (stale_master_epoch)`): it is in the log,
    but changed nothing. Entries the replay cannot reach (behind the snapshot, not yet committed)
    are described without a verdict."""
    lo = max(first or storage.first_index(), storage.first_index())
    hi = min(last if last is not None else storage.last_index(), storage.last_index()) + 1
    exporter, replay_from = replaying_exporter(storage, "", "")
    commit = committed_range(storage)[1] - 1
    for entry in storage.iter_entries(min(lo, replay_from), max(lo, hi)):
        replayed = replay_from <= entry.index <= commit
        commands = _replayed(exporter, entry) if replayed else describe_entry(entry)
        if entry.index >= lo:
            yield {"index": entry.index, "term": entry.term, "type": entry.type.name.lower(), "commands": commands}


def _replayed(exporter: fsm.HistoryExporter, entry: Entry) -> list[str]:
    try:
        rows = exporter.rows_for_entry(entry)
    except RmqcError:
        return describe_entry(entry)  # says why it cannot be decoded
    return [row["description"] + ("" if row["result"] == "ok" else f" REFUSED ({row['result']})") for row in rows]


def open_for_reading(data_dir: Path) -> LmdbStorage:
    return LmdbStorage(data_dir, readonly=True)


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
    `keep_entries`, and rewrite the file compactly. Holds the node lock throughout."""
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
    state = fsm.ControllerState()
    conf_state = snapshot.meta.conf_state
    if not snapshot.is_empty:
        state.restore(snapshot.data)
    total = commit - snapshot.meta.index
    for done, entry in enumerate(storage.iter_entries(snapshot.meta.index + 1, hi), start=1):
        if entry.type == EntryType.CONF_CHANGE:
            conf_state = _apply_conf_change(conf_state, entry.data)
        else:
            state.apply_all(fsm.decode_commands(entry.data))
        if done % 1000 == 0 or done == total:
            progress("replay", done, total)
    if not conf_state.voters:  # membership never went through the log: use the recorded one
        conf_state = storage.initial_state()[1]
    return storage.create_snapshot(commit, conf_state, state.snapshot()), True


def _apply_conf_change(conf_state: ConfState, data: bytes) -> ConfState:
    change = raft.decode_conf_change(data)
    voters = [v for v in conf_state.voters if v != change.node_id]
    learners = [n for n in conf_state.learners if n != change.node_id]
    target = {ConfChangeType.ADD_VOTER: voters, ConfChangeType.ADD_LEARNER: learners}.get(change.type)
    if target is not None:
        target.append(change.node_id)
    return ConfState(voters=tuple(voters), learners=tuple(learners))


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
        exporter, lo = replaying_exporter(storage, cluster, node_id)
        hi = committed_range(storage)[1]
        count = _WRITERS[fmt](export_rows(storage, exporter, lo, hi), out)
    return ExportOutcome(count, lo, max(lo, hi) - 1, lo - 1 if lo > 1 else 0)


def replaying_exporter(storage: LmdbStorage, cluster: str, node_id: str) -> tuple[fsm.HistoryExporter, int]:
    """An exporter holding the state the log continues from, and the first index to feed it: the
    snapshot's state when the log was compacted (entries kept behind the snapshot are in that
    state already), else the empty state and index 1."""
    exporter = fsm.HistoryExporter(cluster, node_id)
    if storage.first_index() == 1:
        return exporter, 1
    snapshot = storage.snapshot()
    exporter.restore(snapshot.data)
    return exporter, snapshot.meta.index + 1


# ========================================================================================= render

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


def render_dump_record(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _out.out(orjson.dumps(record).decode(), highlight=False)
        return
    text = "; ".join(record["commands"])
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


def render_error(message: str) -> None:
    _err.print(f"error: {message}", markup=False)


class ProgressBar:
    """A Rich progress bar with one task per phase, fed by the operations' progress callback."""

    _LABELS = {"replay": "replaying committed entries", "drop": "dropping entries", "rewrite": "rewriting file"}

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
    except MissingIdentity as exc:
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
    """One line per entry: index, term, type and its commands in words."""

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


@log_app.command()
def verify(data_dir: DataDir) -> None:
    """Check what the node reads: exit 1 naming the first bad index.

    Checked: the hard state and membership records, the snapshot (its data against its checksum),
    and every log entry (its CRC32, consecutive indexes, terms that never fall, the commit index
    within the log). Not checked: LMDB's own pages outside those records (free or unused pages,
    B-tree internals): a flipped byte there passes until LMDB itself reads it. A directory that is
    not an rmqc data directory exits 4.
    """

    def run() -> None:
        with open_for_reading(data_dir) as storage:
            report = storage.verify()
        render_verify(report)
        if not report.ok:
            raise typer.Exit(int(ExitCode.CORRUPT))

    _guarded(run)


@log_app.command()
def compact(
    data_dir: DataDir,
    keep: Annotated[int, typer.Option(min=0, help="entries to keep behind the snapshot")] = DEFAULT_KEEP_ENTRIES,
) -> None:
    """Snapshot the committed state, drop entries behind it (keeping N), rewrite the file compactly.

    Refuses to run while a node holds the data directory."""

    def run() -> None:
        with ProgressBar() as progress:
            outcome = compact_data_dir(data_dir, keep, progress)
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
) -> None:
    """Every committed entry's commands as flat rows (docs/export-schema.md), JSON lines or Parquet.

    Rows are labelled with the node id and controller group the node recorded in its data directory
    (node.json, written when it first started)."""

    def run() -> None:
        identity = export_identity(data_dir, cluster, node_id)
        render_export(export_data_dir(data_dir, out, fmt, identity.group, identity.node_id), out)

    _guarded(run)
