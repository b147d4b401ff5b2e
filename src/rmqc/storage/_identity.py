"""The node identity of a data directory: which node of which controller group wrote it.

`node.json` beside the LMDB files, written once when a node first starts on the directory. Tools
that read the directory later (`rmqc log export`) label their output with it instead of guessing
from the path, and a node refuses to start on another node's directory: its Raft hard state (term,
vote) and log belong to the node that wrote them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from ._errors import IdentityMismatchError, StorageDamagedError

IDENTITY_FILE_NAME = "node.json"


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    node_id: str
    group: str  # the controller group (controllerDLegerGroup)


def read_identity(data_dir: str | os.PathLike[str]) -> NodeIdentity | None:
    """The recorded identity, or None for a directory written before identities were recorded."""
    path = Path(data_dir) / IDENTITY_FILE_NAME
    try:
        document = orjson.loads(path.read_bytes())
        return NodeIdentity(str(document["node_id"]), str(document["group"]))
    except FileNotFoundError:
        return None
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise StorageDamagedError(path, f"it is not an rmqc node identity ({exc}). It names the node that owns "
                                  'this directory: write it again as {"node_id": "ID", "group": "GROUP"} with '
                                  "this node's --id and controller group (controllerDLegerGroup), then start "
                                  "the node") from None


def claim_identity(data_dir: str | os.PathLike[str], identity: NodeIdentity) -> None:
    """Record `identity` if the directory has none; refuse a directory of another node or group."""
    recorded = read_identity(data_dir)
    if recorded is None:
        _write_atomically(Path(data_dir) / IDENTITY_FILE_NAME,
                          orjson.dumps({"node_id": identity.node_id, "group": identity.group}))
    elif recorded != identity:
        raise IdentityMismatchError(
            f"data directory {data_dir} belongs to node {recorded.node_id} of controller group "
            f"{recorded.group}, not {identity.node_id} of {identity.group}: give that node's --id "
            f"and group, or another --data-dir")


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as sink:
        sink.write(data)
        sink.flush()
        os.fsync(sink.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
