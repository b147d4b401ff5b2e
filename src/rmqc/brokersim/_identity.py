"""The broker's identity files (spec 7.2), kept exactly as a RocketMQ broker keeps them.

`brokerIdentity-temp` holds `cluster#brokerName#brokerId#registerCheckCode` between asking for an id
(1012) and having it applied (1013); `brokerIdentity` holds `cluster#brokerName#brokerId` forever
after. A restarted broker reads them to reuse its id. Writes go through a temporary file and a rename,
so a crash never leaves half a file.
"""

from __future__ import annotations

import os
from pathlib import Path

from rmqc.brokersim._errors import IdentityMismatch

__all__ = ["FINAL_FILE", "TEMP_FILE", "IdentityStore"]

TEMP_FILE = "brokerIdentity-temp"
FINAL_FILE = "brokerIdentity"


class IdentityStore:
    """The identity files of one broker in `directory` (its storePathRootDir)."""

    def __init__(self, directory: Path, cluster: str, broker_name: str) -> None:
        self.directory = directory
        self.cluster = cluster
        self.broker_name = broker_name

    def read_final(self) -> int | None:
        """The permanent broker id, or None before registration finished."""
        fields = self._read(FINAL_FILE, 3)
        return None if fields is None else self._id_of(fields, FINAL_FILE)

    def read_temp(self) -> tuple[int, str] | None:
        """(id, registerCheckCode) of an unfinished registration, or None."""
        fields = self._read(TEMP_FILE, 4)
        return None if fields is None else (self._id_of(fields, TEMP_FILE), fields[3])

    def write_temp(self, broker_id: int, register_check_code: str) -> None:
        self._write(TEMP_FILE, f"{self.cluster}#{self.broker_name}#{broker_id}#{register_check_code}")

    def write_final(self, broker_id: int) -> None:
        self._write(FINAL_FILE, f"{self.cluster}#{self.broker_name}#{broker_id}")

    def delete_temp(self) -> None:
        (self.directory / TEMP_FILE).unlink(missing_ok=True)

    def _read(self, name: str, field_count: int) -> list[str] | None:
        path = self.directory / name
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        fields = text.split("#", field_count - 1)
        if len(fields) != field_count or not fields[2].isdigit():
            expected = "#".join(["cluster", "brokerName", "brokerId", "code"][:field_count])
            raise IdentityMismatch(f"{path}: {text!r} is not {expected}")
        return fields

    def _id_of(self, fields: list[str], name: str) -> int:
        if (fields[0], fields[1]) != (self.cluster, self.broker_name):
            raise IdentityMismatch(
                f"{self.directory / name} is for {fields[0]}/{fields[1]}, "
                f"this broker is {self.cluster}/{self.broker_name}"
            )
        return int(fields[2])

    def _write(self, name: str, text: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self.directory / f".{name}.partial"
        partial.write_text(text + "\n", encoding="utf-8")
        os.replace(partial, self.directory / name)
