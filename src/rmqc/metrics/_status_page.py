"""The status page on the metrics port, pure: its files (one HTML page, its script and style,
shipped as package data in rmqc/metrics/status_page/), the paths it answers, its `/status.json`
document and the WSGI answers. rmqc.node._status_page builds the document in the node's event loop
(who builds it, and when, is said there); the exporter's HTTP threads serve it.

`/status.json` carries:
- `nodes`: every member's status, as `rmqc status --json` shows it (`{"address", "status"}` or
  `{"address", "error"}`): this node's own from its replica, the others' from their answer to
  RMQC_NODE_STATUS (60001) on their controller port (`member_view`);
- `groups`: one row per broker group (`groupColumns` names the fields): master, SyncStateSet,
  epochs, and each replica's address and the age of its last heartbeat in this node's table (the
  leader hears every broker; a follower only those connected to it, and what it forwarded);
- `failovers`: the master changes this node applied, oldest first (rmqc.replica._failovers);
- `previousBuild`: what the build before this one cost the node's event loop (BuildCost).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

import orjson

from rmqc.fsm import BrokerGroup
from rmqc.liveness import BrokerKey, HeartbeatTable
from rmqc.remoting import RemotingCommand, ResponseCode
from rmqc.replica import Failover

__all__ = ["BROKER_COLUMNS", "GROUP_COLUMNS", "PAGE_FILES", "PAGE_VERSION", "STATUS_JSON_PATH", "BuildCost",
           "PageSource", "answer_page", "failover_document", "group_rows", "group_rows_chunk", "member_view",
           "no_answer_view", "page_document", "page_paths", "read_page_files"]

PAGE_VERSION = 1
GROUP_COLUMNS = ("name", "cluster", "masterId", "masterEpoch", "syncStateSet", "syncStateSetEpoch", "brokers")
BROKER_COLUMNS = ("id", "address", "heartbeatAgeMs", "alive")
# The files under /, by request path: (package resource, content type).
PAGE_FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "/status.js": ("status.js", "text/javascript; charset=utf-8"),
    "/status.css": ("status.css", "text/css; charset=utf-8"),
}
STATUS_JSON_PATH = "/status.json"


@dataclass(frozen=True, slots=True)
class BuildCost:
    loop_ms: float  # wall time the build held the loop (the slices, the serialisation)
    max_slice_ms: float  # the longest single hold of the loop, wall time
    cpu_ms: float  # CPU time of the same holds (wall time also counts other processes' turns)
    max_slice_cpu_ms: float
    slices: int

    def document(self) -> dict[str, Any]:
        return {"loopMs": round(self.loop_ms, 2), "maxSliceMs": round(self.max_slice_ms, 2),
                "cpuMs": round(self.cpu_ms, 2), "maxSliceCpuMs": round(self.max_slice_cpu_ms, 2),
                "slices": self.slices}


def group_rows(groups: Sequence[BrokerGroup], table: HeartbeatTable, now_ms: int) -> list[list[Any]]:
    """One row per group (GROUP_COLUMNS); its brokers as BROKER_COLUMNS lists, by id."""
    rows = []
    for group in groups:
        brokers = []
        for broker_id in sorted(group.replicas):
            key = BrokerKey(group.cluster_name, group.broker_name, broker_id)
            last_ms = table.last_alive_ms(key)
            brokers.append([broker_id, group.replicas[broker_id].address,
                            None if last_ms is None else max(0, now_ms - last_ms), table.is_alive(key, now_ms)])
        rows.append([group.broker_name, group.cluster_name, group.master_id, group.master_epoch,
                     group.sorted_sync_state_set(), group.sync_state_set_epoch, brokers])
    return rows


def group_rows_chunk(groups: Sequence[BrokerGroup], table: HeartbeatTable, now_ms: int) -> bytes:
    """The rows of `groups` serialised, without the enclosing brackets: one slice of the document's
    `groups` (page_document joins the slices). Serialised at once and freed: kept as objects until
    the end, 10,000 groups' 60,000 lists made the cyclic collector run a full collection mid-build
    (60-100 ms)."""
    return orjson.dumps(group_rows(groups, table, now_ms))[1:-1]


def failover_document(failover: Failover) -> dict[str, Any]:
    return {"index": failover.index, "timeMs": failover.time_ms, "cluster": failover.cluster_name,
            "group": failover.broker_name, "oldMasterId": failover.old_master_id,
            "oldMasterAddress": failover.old_master_address, "newMasterId": failover.new_master_id,
            "newMasterAddress": failover.new_master_address, "masterEpoch": failover.master_epoch,
            "trigger": failover.trigger}


def member_view(address: str, answer: RemotingCommand) -> dict[str, Any]:
    """Another member's entry in `nodes`, from its answer to RMQC_NODE_STATUS."""
    if answer.code != ResponseCode.SUCCESS:
        return {"address": address, "error": f"answered {answer.code}: {answer.remark}"}
    try:
        return {"address": address, "status": orjson.loads(answer.body or b"{}")}
    except orjson.JSONDecodeError as error:
        return {"address": address, "error": f"an answer that is not JSON: {error}"}


def no_answer_view(address: str, error: Exception) -> dict[str, Any]:
    """Another member's entry in `nodes` when it did not answer."""
    return {"address": address, "error": f"no answer: {error}"}


def page_document(*, node_id: str, generated_ms: int, nodes: Sequence[dict[str, Any]], group_chunks: Iterable[bytes],
                  failovers: Sequence[dict[str, Any]], previous_build: BuildCost | None) -> bytes:
    """`/status.json`, serialised: `group_chunks` are group_rows_chunk's slices, in order."""
    document = {"version": PAGE_VERSION, "nodeId": node_id, "generatedMs": generated_ms, "nodes": nodes,
                "groupColumns": GROUP_COLUMNS, "brokerColumns": BROKER_COLUMNS,
                "groups": orjson.Fragment(b"[" + b",".join(group_chunks) + b"]"), "failovers": failovers,
                "previousBuild": previous_build.document() if previous_build else None}
    return orjson.dumps(document)


def read_page_files() -> dict[str, tuple[bytes, str]]:
    """The page's files from the package, by request path (read once, when the port opens)."""
    folder = resources.files("rmqc.metrics").joinpath("status_page")
    return {path: (folder.joinpath(name).read_bytes(), content_type)
            for path, (name, content_type) in PAGE_FILES.items()}


class PageSource(Protocol):
    """What answers the page's paths: the latest document, and why the last build failed."""

    @property
    def failure(self) -> str | None: ...

    def document(self) -> bytes | None:
        """The latest document (None until the first is built); marks the page watched."""


# The page loads only its own files and fetches only /status.json; names that brokers chose (group
# names, addresses) are shown as text, never as markup.
_PAGE_HEADERS = [("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
                 ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store")]


def page_paths() -> frozenset[str]:
    return frozenset((*PAGE_FILES, STATUS_JSON_PATH))


def answer_page(page: PageSource, files: dict[str, tuple[bytes, str]], path: str, method: str,
                start_response: Any) -> list[bytes]:
    """The WSGI answer for one of `page_paths()` (path without its trailing slash). Read-only."""
    if method not in ("GET", "HEAD"):
        start_response("405 Method Not Allowed", [("Allow", "GET, HEAD"), *_text_headers()])
        return [b"the status page is read-only: GET or HEAD\n"]
    if path != STATUS_JSON_PATH:
        body, content_type = files[path]
        page.document()  # a page being opened: have a document ready by its first fetch
        start_response("200 OK", [("Content-Type", content_type), *_PAGE_HEADERS])
        return [body]
    document = page.document()
    if document is None and page.failure is not None:
        start_response("500 Internal Server Error", _text_headers())
        return [f"building the status document failed: {page.failure}\n".encode()]
    if document is None:
        start_response("503 Service Unavailable", [("Retry-After", "1"), *_text_headers()])
        return [b"the first status document is being built; ask again in a second\n"]
    start_response("200 OK", [("Content-Type", "application/json"), *_PAGE_HEADERS])
    return [document]


def _text_headers() -> list[tuple[str, str]]:
    return [("Content-Type", "text/plain; charset=utf-8"), *_PAGE_HEADERS]
