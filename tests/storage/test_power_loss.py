"""Power cuts for real processes (rmqc.testing.powerloss): after a SIGKILL the data directory is
replaced by what was made durable (fsync, fdatasync, O_DSYNC writes, directory fsyncs), so unlike a
plain SIGKILL a missing fsync loses data here. The model itself is checked first, then the storage's
crash workload (tests/storage/crash_child.py) under power cuts, then the same with the journal's
fdatasync disabled by the shim (a mutant), which the check must catch."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from test_crash_safety import CHILD as CRASH_CHILD, run_child_until_killed  # type: ignore[import-not-found]

from rmqc.client import ControllerClient
from rmqc.launcher import NodeStartFailed
from rmqc.storage import DATA_FILE_NAME, LmdbStorage, NodeIdentity, read_identity
from rmqc.testing.cluster import Cluster
from rmqc.testing.powerloss import PowerLossDisk, compiler
from rmqc.testing.writer import WriteLoad

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler (gcc) to build the power-loss shim")

MODEL_CHILD = Path(__file__).with_name("powerloss_child.py")
CUTS = 10
SEED = 20261127


def make_disk(tmp_path: Path, **options: str) -> PowerLossDisk:
    return PowerLossDisk(tmp_path / "node", tmp_path / "shadow", **options)


def test_power_cut_keeps_exactly_what_was_synced(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    data_dir.mkdir()
    # present before the process starts: durable
    (data_dir / "existing").write_bytes(b"0123456789abcdefghij")
    (data_dir / "dsync").write_bytes(b"0123456789")
    (data_dir / "replaced").write_bytes(b"old")
    (data_dir / "renamed").write_bytes(b"old contents")
    (data_dir / "unlinked").write_bytes(b"still here")
    disk = make_disk(tmp_path)
    child = subprocess.Popen([sys.executable, str(MODEL_CHILD), str(data_dir)], env=disk.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert ready == "ready\n", ready or child.communicate()[1]
        # before the cut (a SIGKILL keeps the page cache): everything written is there
        assert (data_dir / "synced").read_bytes() == b"durable part|lost part"
        assert not (data_dir / "unlinked").exists()
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    disk.power_cut()
    thread_files = {f"thread-{n}": "".join(f"thread {n} line {line}\n" for line in range(50)).encode()
                    for n in range(4)}
    assert {path.relative_to(data_dir).as_posix(): None if path.is_dir() else path.read_bytes()
            for path in data_dir.rglob("*")} == {
        "synced": b"durable part|",
        "existing": b"PWRITE6789WRITEV-two",  # the synced writes, not the later truncation
        "dsync": b"meta456789",  # the O_DSYNC write only
        "created-and-listed": b"listed",
        "sub": None,
        "sub/inner": b"inner",
        "sub/listed-empty": b"",  # its name was synced, its data never
        "replaced": b"new contents",
        "renamed": b"old contents",  # the rename was not synced: undone
        "unlinked": b"still here",  # the unlink was not synced: undone
        # not here: created-unlisted (its directory never synced after it), renamed.tmp, never-synced
        **thread_files,
    }
    # the result of a cut is durable as a whole: a second cut changes nothing
    before = {path: path.read_bytes() for path in data_dir.rglob("*") if path.is_file()}
    disk.power_cut()
    assert {path: path.read_bytes() for path in data_dir.rglob("*") if path.is_file()} == before


TORN_CHILD = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.pwrite(fd, b"N" * (8 * 4096), 0)  # never synced
print("written", flush=True)
sys.stdin.readline()
"""


def test_a_torn_power_cut_keeps_some_unsynced_pages_whole(tmp_path: Path) -> None:
    data_dir = tmp_path / "node"
    data_dir.mkdir()
    (data_dir / "file").write_bytes(b"o" * (8 * 4096))
    disk = make_disk(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", TORN_CHILD, str(data_dir / "file")], env=disk.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "written\n", line or child.communicate()[1]
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    disk.power_cut(torn=random.Random(SEED))
    data = (data_dir / "file").read_bytes()
    pages = [data[n * 4096:(n + 1) * 4096] for n in range(8)]
    assert len(data) == 8 * 4096 and all(page in (b"o" * 4096, b"N" * 4096) for page in pages), data
    assert len(set(pages)) == 2  # this seed keeps some pages and drops others


def durability_violations(data_dir: Path, durable_terms: dict[int, int]) -> list[str]:
    """What a power cut broke: a log that fails verification, a reported-durable index missing
    or of another term, an entry whose payload is not the one written. Read-only: the next child
    does the recovery, under the shim."""
    from crash_child import payload  # type: ignore[import-not-found]

    problems = []
    if durable_terms and not (data_dir / DATA_FILE_NAME).exists():
        return [f"{len(durable_terms)} reported-durable indexes lost: no {DATA_FILE_NAME} at all"]
    with LmdbStorage(data_dir, readonly=True) as storage:
        report = storage.verify()
        if not report.ok:
            problems.append(f"verify: {report}")
        last = storage.last_index()
        missing = [index for index in durable_terms if index > last]
        if missing:
            problems.append(f"{len(missing)} reported-durable indexes lost, the first {min(missing)} "
                            f"(the log ends at {last}; journal replay stopped: {storage.journal_replayed.stopped})")
        for entry in storage.iter_entries():
            if entry.data != payload(entry.index, entry.term):
                problems.append(f"entry {entry.index}: not the payload written")
            if durable_terms.get(entry.index, entry.term) != entry.term:
                problems.append(f"entry {entry.index}: term {entry.term}, {durable_terms[entry.index]} reported")
    return problems


def run_with_power_cuts(disk: PowerLossDisk, kills: int, *, cut: bool = True, torn: bool = False) -> list[str]:
    """crash_child under the shim, SIGKILLed at seeded moments, each kill followed by a power cut
    (`torn`: one that keeps a random half of the unsynced pages; or no cut: a plain SIGKILL); the
    violations found after the first kill that has any (empty: none)."""
    rng = random.Random(SEED)
    pages = random.Random(SEED + 1)
    durable_terms: dict[int, int] = {}
    for kill in range(kills):
        durable_terms.update(run_child_until_killed(disk.data_dir, term=kill + 1, rng=rng, env=disk.env()))
        if cut:
            disk.power_cut(torn=pages if torn else None)
        problems = durability_violations(disk.data_dir, durable_terms)
        if problems:
            where = f"seed {SEED}, after kill {kill}{' and power cut' if cut else ''}"
            return [f"{where}: {problem}" for problem in problems]
    return []


@pytest.mark.slow
def test_power_cuts_never_lose_a_durable_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(CRASH_CHILD.parent))
    disk = make_disk(tmp_path)
    assert run_with_power_cuts(disk, CUTS) == []
    with LmdbStorage(disk.data_dir, readonly=True) as storage:
        # the cuts hit a log that kept growing, and compactions (journal moves into LMDB) happened
        assert storage.last_index() > 300 and storage.first_index() > 1, storage


@pytest.mark.slow
def test_torn_power_cuts_never_lose_a_durable_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cuts that also keep a random half of the unsynced pages (half-written journal records,
    later records without earlier ones, stray LMDB pages): recovery still finds every durable entry."""
    monkeypatch.syspath_prepend(str(CRASH_CHILD.parent))
    disk = make_disk(tmp_path)
    assert run_with_power_cuts(disk, CUTS, torn=True) == []


@pytest.mark.slow
def test_power_cut_catches_the_journals_missing_fdatasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: the journal's fdatasync makes nothing durable (as if the code skipped it). A
    plain SIGKILL cannot see that (the page cache keeps the records); a power cut must."""
    monkeypatch.syspath_prepend(str(CRASH_CHILD.parent))
    sigkill_only = PowerLossDisk(tmp_path / "killed", tmp_path / "killed-shadow", unsynced_name="journal")
    assert run_with_power_cuts(sigkill_only, CUTS, cut=False) == []  # what test_crash_safety sees
    disk = make_disk(tmp_path, unsynced_name="journal")
    problems = run_with_power_cuts(disk, CUTS)
    assert problems, "the power cuts did not catch the journal's missing fdatasync"
    assert "reported-durable indexes lost" in problems[0], problems


@pytest.mark.slow
def test_power_cut_catches_a_missing_fsync_of_the_data_directory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant on the directory: the fsync that makes a new data directory's files (data.mdb,
    the journal) durable names does nothing, so the first cut takes the whole log away."""
    monkeypatch.syspath_prepend(str(CRASH_CHILD.parent))
    disk = make_disk(tmp_path, unsynced_name="node")
    problems = run_with_power_cuts(disk, 1)
    assert problems and "reported-durable indexes lost" in problems[0], problems
    assert sorted(path.name for path in disk.data_dir.iterdir()) == []


CLUSTER_ROUNDS = 2
ACKS_BEFORE_CUT = 200


async def cut_whole_cluster_under_load(tmp_path: Path, unsynced_name: str | None = None) -> dict[str, tuple[int, int]]:
    """Three `rmqc serve` nodes under the shim and a writer; every node SIGKILLed at once, the power
    of all cut (every second cut torn), the cluster restarted: CLUSTER_ROUNDS times. The
    acknowledged writes the restarted cluster lacks ({group: (acked, next id)}; empty: none lost)."""
    cluster = Cluster.create(tmp_path, 3)
    options = {} if unsynced_name is None else {"unsynced_name": unsynced_name}
    disks = [PowerLossDisk(node.data_dir, tmp_path / f"{node.node_id}.shadow", **options) for node in cluster.nodes]
    for node, disk in zip(cluster.nodes, disks, strict=True):
        node.env.update(disk.env(base={}))
    loads: list[WriteLoad] = []
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=8000, max_retries=10) as admin:
            for cut in range(CLUSTER_ROUNDS):
                await cluster.wait_leader(admin)
                load = WriteLoad(cluster.addresses, prefix=f"cut{cut}")
                loads.append(load)
                async with trio.open_nursery() as nursery:
                    await nursery.start(load.run)
                    await load.wait_acks(ACKS_BEFORE_CUT, timeout_s=60)
                    for node in cluster.nodes:  # writes still in flight
                        node.kill(signal.SIGKILL)
                    nursery.cancel_scope.cancel()
                for node in cluster.nodes:
                    await node.wait_exit()
                for disk in disks:  # the second cut torn: some unsynced pages kept
                    disk.power_cut(torn=random.Random(SEED + cut) if cut % 2 else None)
                await cluster.start()
            await cluster.wait_leader(admin)
            lost: dict[str, tuple[int, int]] = {}
            for load in loads:
                lost.update(await load.lost_writes(admin))
            return lost
    finally:
        await cluster.stop()


@pytest.mark.slow
async def test_power_cut_of_a_whole_cluster_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    assert await cut_whole_cluster_under_load(tmp_path) == {}


@pytest.mark.slow
async def test_power_cut_of_a_whole_cluster_catches_the_journals_missing_fdatasync(tmp_path: Path) -> None:
    """The journal mutant on every node: at the first cut either acknowledged writes are lost, or
    (as the journal's damage check now sees it: records after a hole that no crash makes) the
    nodes refuse to serve from their journals."""
    lost: dict[str, tuple[int, int]] = {}
    refusals: list[str] = []
    try:
        lost = await cut_whole_cluster_under_load(tmp_path, unsynced_name="journal")
    except* NodeStartFailed as group:
        refusals = [str(error) for error in group.exceptions]  # nested groups would fail the check below
    assert lost != {} or (refusals and all("journal is damaged" in refusal for refusal in refusals)), refusals


NEW_NODE_CHILD = """
import sys
from rmqc.raft._types import Entry, HardState
from rmqc.storage import LmdbStorage, acquire_node_lock

with (acquire_node_lock(sys.argv[1]) if sys.argv[2] == "lock" else open("/dev/null")), \
        LmdbStorage(sys.argv[1]) as storage:
    storage.save(HardState(term=1, vote="n1", commit=0), [Entry(1, 1, data=b"first")])
    print("durable 1", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("creator", ["lock", "storage"])
def test_a_node_directory_the_node_lock_creates_survives_a_power_cut(tmp_path: Path, creator: str) -> None:
    """`rmqc serve --data-dir NEW` (and `rmqc log` tools) create the data directory when they take
    the node lock, and LmdbStorage when opened alone: the new directory's name must be synced into
    its parent, or a cut takes the whole log (and the vote) with it. The harness watches the parent."""
    disk = PowerLossDisk(tmp_path / "disk", tmp_path / "shadow")
    data_dir = disk.data_dir / "parent" / "node"
    cut_after_child_says(disk, "durable 1", NEW_NODE_CHILD, str(data_dir), creator)
    assert (data_dir / DATA_FILE_NAME).exists(), sorted(str(path) for path in disk.data_dir.rglob("*"))
    with LmdbStorage(data_dir, readonly=True) as storage:
        assert storage.last_index() == 1


def cut_after_child_says(disk: PowerLossDisk, line_wanted: str, code: str, *argv: str) -> None:
    """Run `code` under the shim until it prints `line_wanted`, SIGKILL it, cut the power."""
    child = subprocess.Popen([sys.executable, "-c", code, *argv], env=disk.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == line_wanted + "\n", line or child.communicate()[1]
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate()
    disk.power_cut()


RESTORE_CHILD = """
import sys
from rmqc.raft._types import ConfState, SnapshotMeta
from rmqc.storage import NodeIdentity, decode_snapshot_file, encode_snapshot_file, restore_data_dir

meta = SnapshotMeta(index=5, term=2, conf_state=ConfState(voters=("n0",)))
snapshot = decode_snapshot_file(encode_snapshot_file(meta, b"state", {}))
restore_data_dir(snapshot, sys.argv[1], NodeIdentity("n1", "rmqc"), ("n1",))
print("restored", flush=True)
sys.stdin.readline()
"""


def test_a_restored_data_directory_survives_a_power_cut(tmp_path: Path) -> None:
    """`rmqc restore` writes a new data directory: once it returns, a cut must not take it away."""
    disk = PowerLossDisk(tmp_path / "disk", tmp_path / "shadow")
    data_dir = disk.data_dir / "node"
    cut_after_child_says(disk, "restored", RESTORE_CHILD, str(data_dir))
    assert (data_dir / DATA_FILE_NAME).exists(), sorted(str(path) for path in disk.data_dir.rglob("*"))
    assert read_identity(data_dir) == NodeIdentity("n1", "rmqc")
    with LmdbStorage(data_dir, readonly=True) as storage:
        assert storage.snapshot_meta().index == 5
