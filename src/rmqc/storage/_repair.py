"""`rmqc serve --repair`: open a damaged data directory for a repair from the cluster.

What is damaged is first copied (or moved) into `damaged-<UTC time>/` inside the data directory,
so nothing is lost to the investigation. Then:
- a damaged journal: the records before the damage are kept with data.mdb (a prefix of what the
  node held), the rest given up;
- anything else (data.mdb truncated, a page LMDB cannot read, a log entry or the snapshot failing
  its checksum): data.mdb and the journal are moved away and the node starts from an empty log;
  the leader sends it a snapshot and the log. `node.json` (who the node is) is kept.
Either way the storage records, durably, that the node is repairing (`begin_repair`): the Raft
core then neither votes nor campaigns until its log holds the commit index a leader gave it after
forgetting the acks it had counted for it (rmqc.raft._core, "repair"), across restarts too.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ._errors import NotAStorageError, StorageDamagedError
from ._isolated import verify_isolated
from ._journal import JOURNAL_FILE_NAME
from ._lmdb_storage import DATA_FILE_NAME, LmdbStorage, fsync_path
from ._lock import make_dirs_durably

_LMDB_FILES = (DATA_FILE_NAME, "lock.mdb", JOURNAL_FILE_NAME)


@dataclass(frozen=True, slots=True)
class RepairStart:
    reason: str  # what was found damaged
    kept: str  # what of the old storage was kept
    evidence: Path  # where the damaged files are


def open_for_repair(path: str | os.PathLike[str]) -> tuple[LmdbStorage, RepairStart | None]:
    """The storage to serve from, and what this repair started from (None: nothing was damaged,
    though a repair begun earlier may still be recorded in the storage)."""
    directory = Path(path)
    damage = _damage(directory)
    if damage is None:
        return LmdbStorage(directory), None
    evidence = directory / time.strftime("damaged-%Y%m%dT%H%M%SZ", time.gmtime())
    make_dirs_durably(evidence)
    (evidence / "reason.txt").write_text(f"rmqc serve --repair found: {damage.reason}\n")
    if damage.journal_only:
        if (directory / JOURNAL_FILE_NAME).exists():  # (it may be the missing file)
            shutil.copy2(directory / JOURNAL_FILE_NAME, evidence / JOURNAL_FILE_NAME)
        fsync_path(evidence)
        storage = LmdbStorage(directory, keep_journal_prefix=True)
        kept = (f"data.mdb and the journal's records before the damage: log "
                f"{storage.first_index()}..{storage.last_index()}")
    else:
        for name in _LMDB_FILES:
            if (directory / name).exists():
                os.replace(directory / name, evidence / name)
        fsync_path(evidence)
        fsync_path(directory)
        storage = LmdbStorage(directory)
        kept = "nothing of the log (node.json only): the leader sends a snapshot and the log"
    storage.begin_repair(damage.reason)
    return storage, RepairStart(damage.reason, kept, evidence)


@dataclass(frozen=True, slots=True)
class _Damage:
    reason: str
    journal_only: bool


def _damage(directory: Path) -> _Damage | None:
    if not (directory / DATA_FILE_NAME).exists() and not (directory / JOURNAL_FILE_NAME).exists():
        return None  # nothing stored yet
    try:
        report = verify_isolated(directory)
    except StorageDamagedError as error:
        where = "" if error.offset is None else f" at byte {error.offset}"
        return _Damage(f"{error.path} is damaged{where}: {error.what}", journal_only=False)
    except NotAStorageError as error:
        return _Damage(str(error), journal_only=False)
    if report.ok:
        return None
    return _Damage(f"index {report.first_bad_index}: {report.problem}", journal_only=report.journal_damaged)

