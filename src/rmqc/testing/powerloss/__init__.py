"""Power cuts for real processes (test-only; see docs/testing-power-loss.md).

SIGKILL keeps the page cache: a write that was never fsynced still survives it, so a kill cannot
tell whether a program syncs. This harness can. `shim.c`, built here with gcc and LD_PRELOADed into
a process, records for one watched data directory what every completed fsync/fdatasync (or
O_DSYNC/O_SYNC write) made durable: file contents per inode, and a directory's entries as they
were at its last fsync. After the process is SIGKILLed, `PowerLossDisk.power_cut` replaces the
directory with that durable image, as a machine losing power would find it on reboot.

    disk = PowerLossDisk(data_dir, shadow_dir)   # what data_dir holds now counts as durable
    process = subprocess.Popen(argv, env=disk.env())
    ...; process.kill(); process.wait()
    disk.power_cut()                             # only what was synced remains

`unsynced_name="journal"` is a mutant: fsync/fdatasync of files (or directories) of that name make
nothing durable, as if the code had skipped them (production code is untouched).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

SHIM_SOURCE = Path(__file__).with_name("shim.c")
_CFLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror")
_LIBS = ("-ldl", "-lpthread")
# a dirty log's record (struct record in shim.c): kind, then two offsets
_RECORD = struct.Struct("=QQQ")
_REC_WRITE = 1
# the shim keeps its shadow paths in 1024 bytes
_MAX_SHADOW_PATH = 1000


class ShimUnavailable(RuntimeError):
    """The shim cannot be built here (no C compiler)."""


def compiler() -> str | None:
    """The C compiler the shim is built with: $CC, else gcc on the PATH; None when there is none."""
    return os.environ.get("CC") or shutil.which("gcc")


def _cache_dir() -> Path:
    explicit = os.environ.get("RMQC_POWERLOSS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmqc-powerloss"


def build_shim() -> Path:
    """The shared library built from shim.c, in a cache directory outside the repository; built
    once per source (and flags): the file name carries their hash, and is renamed in complete."""
    cc = compiler()
    if cc is None:
        raise ShimUnavailable("no C compiler (gcc) to build the power-loss shim")
    source = SHIM_SOURCE.read_bytes()
    digest = hashlib.sha256(source + " ".join((cc, *_CFLAGS, *_LIBS)).encode()).hexdigest()[:16]
    cache = _cache_dir()
    library = cache / f"libpowerloss-{digest}.so"
    if library.exists():
        return library
    cache.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=cache, prefix=".build-", suffix=".so")
    os.close(fd)
    try:
        result = subprocess.run([cc, *_CFLAGS, "-o", temporary, str(SHIM_SOURCE), *_LIBS],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ShimUnavailable(f"building the power-loss shim failed:\n{result.stderr}")
        os.replace(temporary, library)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return library


class PowerLossDisk:
    """One watched data directory and its durable image (kept in `shadow_dir`, outside it).

    Creating it makes the directory's present contents durable (the directory itself is assumed
    durable). Processes started with `env()` record their syncs; `power_cut()` must only be called
    once every such process is dead.
    """

    def __init__(self, data_dir: str | os.PathLike[str], shadow_dir: str | os.PathLike[str], *,
                 unsynced_name: str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.data_dir.resolve()
        self.shadow_dir = Path(shadow_dir).resolve()
        if self.shadow_dir == self.data_dir or self.data_dir in self.shadow_dir.parents:
            raise ValueError(f"the shadow directory {self.shadow_dir} must be outside {self.data_dir}")
        if len(str(self.shadow_dir)) > _MAX_SHADOW_PATH:
            raise ValueError(f"the shadow directory's path is longer than {_MAX_SHADOW_PATH} bytes")
        self.unsynced_name = unsynced_name
        self.library = build_shim()
        self.cuts = 0
        self._reset()

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a process whose writes to the data directory are modelled."""
        env = dict(os.environ if base is None else base)
        preload = env.get("LD_PRELOAD", "")
        env["LD_PRELOAD"] = f"{self.library} {preload}".strip()
        env["POWERLOSS_DIR"] = str(self.data_dir)
        env["POWERLOSS_SHADOW"] = str(self.shadow_dir)
        if self.unsynced_name:
            env["POWERLOSS_UNSYNCED_NAME"] = self.unsynced_name
        else:
            env.pop("POWERLOSS_UNSYNCED_NAME", None)
        return env

    def durable_image(self) -> dict[str, bytes | None]:
        """What a power cut now would leave: relative path -> contents (None: a directory)."""
        image: dict[str, bytes | None] = {}
        self._walk_image(self._root_id(), "", image)
        return image

    def power_cut(self, torn: random.Random | None = None, page_bytes: int = 4096) -> None:
        """Replace the data directory's contents with its durable image (every process writing it
        must be dead); the result is then durable as a whole, as after a reboot.

        `torn`: the disk had also written back some of the unsynced pages: each page an unsynced
        write touched inside a durable file's durable size is kept with probability 1/2 (drawn
        from `torn`), in place, so a cut can leave half of a write or a later write without an
        earlier one (what a real disk may do), not only whole synced states."""
        if torn is not None:
            self._write_back_some(torn, page_bytes)
        image = self.durable_image()
        for child in list(self.data_dir.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        for relative, contents in sorted(image.items()):
            path = self.data_dir / relative
            if contents is None:
                path.mkdir()
            else:
                path.write_bytes(contents)
        self.cuts += 1
        self._reset()

    def _write_back_some(self, rng: random.Random, page_bytes: int) -> None:
        """Copy a random half of the pages the dirty logs name from the files (the page cache,
        as the dead process left it) into the durable images, within their durable sizes."""
        files = {path.lstat().st_ino: path for path in self.data_dir.rglob("*")
                 if path.is_file() and not path.is_symlink()}
        for log in sorted((self.shadow_dir / "dirty").iterdir()):
            ids = self.shadow_dir / "ids" / log.name
            source = files.get(int(log.name))
            if source is None or not ids.exists():
                continue  # removed, or never given a durable name or contents: nothing to keep
            image_path = self.shadow_dir / "data" / ids.read_text()
            image = bytearray(image_path.read_bytes() if image_path.exists() else b"")
            current = source.read_bytes()
            raw = log.read_bytes()
            for kind, start, end in _RECORD.iter_unpack(raw[:len(raw) - len(raw) % _RECORD.size]):
                if kind != _REC_WRITE:
                    continue
                end = min(end, len(image), len(current))
                for page in range(start - start % page_bytes, end, page_bytes):
                    if rng.random() < 0.5:
                        low, high = max(page, start), min(page + page_bytes, end)
                        image[low:high] = current[low:high]
            image_path.write_bytes(bytes(image))

    # ----- the shadow directory (its layout is documented in shim.c) -----

    def _reset(self) -> None:
        """The data directory's present contents become its whole durable image."""
        if self.shadow_dir.exists():
            shutil.rmtree(self.shadow_dir)
        for kind in ("ids", "data", "dirs", "dirty"):
            (self.shadow_dir / kind).mkdir(parents=True)
        (self.shadow_dir / "root").write_text(self._snapshot_dir(self.data_dir))

    def _new_id(self, path: Path) -> str:
        ino = path.lstat().st_ino
        identifier = f"{ino}.init.{self.cuts}"
        (self.shadow_dir / "ids" / str(ino)).write_text(identifier)
        return identifier

    def _snapshot_dir(self, directory: Path) -> str:
        identifier = self._new_id(directory)
        lines = []
        for child in sorted(directory.iterdir()):
            if "\t" in child.name or "\n" in child.name:
                continue  # the shim skips such names too
            if child.is_dir() and not child.is_symlink():
                lines.append(f"d\t{self._snapshot_dir(child)}\t{child.name}\n")
            elif child.is_file() and not child.is_symlink():
                child_id = self._new_id(child)
                shutil.copyfile(child, self.shadow_dir / "data" / child_id)
                lines.append(f"f\t{child_id}\t{child.name}\n")
        (self.shadow_dir / "dirs" / identifier).write_text("".join(lines))
        return identifier

    def _root_id(self) -> str:
        return (self.shadow_dir / "root").read_text()

    def _walk_image(self, dir_id: str, prefix: str, image: dict[str, bytes | None]) -> None:
        listing = self.shadow_dir / "dirs" / dir_id
        if not listing.exists():
            return  # a directory whose entries were never synced: empty
        for line in listing.read_text().splitlines():
            kind, identifier, name = line.split("\t", 2)
            relative = f"{prefix}{name}"
            if kind == "d":
                image[relative] = None
                self._walk_image(identifier, relative + "/", image)
            else:
                data = self.shadow_dir / "data" / identifier
                image[relative] = data.read_bytes() if data.exists() else b""
