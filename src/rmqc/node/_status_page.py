"""The status page on the metrics port: `/` (one HTML page, its script and style, shipped as package
data in rmqc/node/status_page/) and `/status.json`, which the page fetches every second.

`/status.json` carries:
- `nodes`: every member's status, as `rmqc status --json` shows it (`{"address", "status"}` or
  `{"address", "error"}`): this node's own from its replica, the others' from their answer to
  RMQC_NODE_STATUS (60001) on their controller port, asked at once with PEER_TIMEOUT_MS each;
- `groups`: one row per broker group (`groupColumns` names the fields): master, SyncStateSet,
  epochs, and each replica's address and the age of its last heartbeat in this node's table (the
  leader hears every broker; a follower only those connected to it, and what it forwarded);
- `failovers`: the master changes this node applied, oldest first (rmqc.replica._failovers).

Who builds it, and when: the node's event loop, and only while someone watches (a request within
WATCH_S), so an unwatched page costs nothing. The rows are built GROUPS_PER_SLICE at a time with a
checkpoint between slices, so 10,000 groups never hold the loop for one long stretch; the finished
document is serialised once and replaced whole. The HTTP threads of the metrics port only read that
one reference (as they read the health snapshot): nothing of the replica is touched outside the
loop's thread. `build` in the document says what the last build cost the loop.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson
import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.fsm import BrokerGroup
from rmqc.liveness import BrokerKey, HeartbeatTable
from rmqc.remoting import RMQC_NODE_STATUS, ResponseCode
from rmqc.replica import Failover, status_document

from ._join import join_credentials
from ._ratelog import RateLimitedLog
from ._tls import peer_client_context

__all__ = ["GROUP_COLUMNS", "PAGE_FILES", "StatusPage", "group_rows"]

log = logging.getLogger("rmqc.node.status_page")

PAGE_VERSION = 1
REFRESH_S = 1.0
# While nobody watches, the loop only looks this often whether someone started to.
IDLE_CHECK_S = 0.25
# A browser tab polls every second; a page closed this long ago is no longer built.
WATCH_S = 10.0
# Rows built between two checkpoints: measured ~1 ms of loop time per 500 groups of 3 brokers.
GROUPS_PER_SLICE = 500
ERROR_LOG_EVERY_S = 60.0  # a page that fails to build says so once a minute, not every second
# A member that does not answer within this shows as not answering (the page refreshes every second).
PEER_TIMEOUT_MS = 1000
GROUP_COLUMNS = ("name", "cluster", "masterId", "masterEpoch", "syncStateSet", "syncStateSetEpoch", "brokers")
BROKER_COLUMNS = ("id", "address", "heartbeatAgeMs", "alive")
# The files under /, by request path: (package resource, content type).
PAGE_FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "/status.js": ("status.js", "text/javascript; charset=utf-8"),
    "/status.css": ("status.css", "text/css; charset=utf-8"),
}


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


def failover_document(failover: Failover) -> dict[str, Any]:
    return {"index": failover.index, "timeMs": failover.time_ms, "cluster": failover.cluster_name,
            "group": failover.broker_name, "oldMasterId": failover.old_master_id,
            "oldMasterAddress": failover.old_master_address, "newMasterId": failover.new_master_id,
            "newMasterAddress": failover.new_master_address, "masterEpoch": failover.master_epoch,
            "trigger": failover.trigger}


def read_page_files() -> dict[str, tuple[bytes, str]]:
    """The page's files from the package, by request path (read once, when the port opens)."""
    folder = resources.files("rmqc.node").joinpath("status_page")
    return {path: (folder.joinpath(name).read_bytes(), content_type)
            for path, (name, content_type) in PAGE_FILES.items()}


class StatusPage:
    """Owned by the metrics port's task; `run` in a nursery, `document()` from the HTTP threads."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self._document: bytes | None = None  # replaced whole by the loop
        self._asked_s = -math.inf  # time.monotonic() of the last request (any thread writes it)
        self.last_cost: BuildCost | None = None  # what the last build held the loop (the page shows it)
        self.failure: str | None = None  # why the last build failed
        self._errors = RateLimitedLog(log, ERROR_LOG_EVERY_S)

    def document(self) -> bytes | None:
        """Any thread: the latest document (None until the first is built); marks the page watched."""
        self._asked_s = time.monotonic()
        return self._document

    def watched(self) -> bool:
        return time.monotonic() - self._asked_s < WATCH_S

    async def run(self) -> None:
        config = self._node.config
        # Signed like a joining node when RMQC_ACCESS_KEY/RMQC_SECRET_KEY are set (an ACL'd group
        # refuses the others' status otherwise, and the page says so); TLS as to the peers.
        async with ControllerClient([config.listen_address], timeout_ms=PEER_TIMEOUT_MS, max_retries=0,
                                    credentials=join_credentials(os.environ),
                                    ssl_context=peer_client_context(config)) as client:
            while True:
                if self.watched() and self._node.replica is not None:
                    started_s = time.monotonic()
                    await self._refresh(client)
                    await trio.sleep(max(0.0, REFRESH_S - (time.monotonic() - started_s)))
                else:
                    await trio.sleep(IDLE_CHECK_S)

    async def _refresh(self, client: ControllerClient) -> None:
        # A diagnostic page must never take the controller down with it: a failure to build it is
        # logged and answered to the page (500), and the next second tries again.
        try:
            self._document, self.failure = await self.build(client), None
        except Exception as error:  # whatever it is, the node keeps serving
            self._document, self.failure = None, f"{type(error).__name__}: {error}"
            self._errors.log(logging.ERROR, "%s: building the status page failed: %s", self._node.config.node_id,
                             self.failure)

    async def build(self, client: ControllerClient) -> bytes:
        """The document as of now, built in the loop in slices (see the module's docstring)."""
        replica = self._node.replica
        others = [address for member, address in replica.conf_state.addresses if member != replica.config.node_id]
        others_views = await _ask_members(client, others)
        meter = _LoopMeter()
        with meter.hold():
            own = {"address": self._node.config.listen_address, "status": status_document(replica)}
            groups = list(replica.state.groups())  # the page sorts them
            failovers = [failover_document(failover) for failover in replica.failovers.recent()]
        # Each slice's rows are serialised at once and freed: kept as objects until the end, 10,000
        # groups' 60,000 lists made the cyclic collector run a full collection mid-build (60-100 ms).
        chunks: list[bytes] = []
        for start in range(0, len(groups), GROUPS_PER_SLICE):
            if start:
                await trio.lowlevel.checkpoint()
            with meter.hold():  # the table and the clock are read afresh after each checkpoint
                rows = group_rows(groups[start:start + GROUPS_PER_SLICE], replica.liveness.table, replica.now_ms())
                chunks.append(orjson.dumps(rows)[1:-1])
        with meter.hold():
            document = {"version": PAGE_VERSION, "nodeId": replica.config.node_id,
                        "generatedMs": replica.clock.wall_ms(), "nodes": [own, *others_views],
                        "groupColumns": GROUP_COLUMNS, "brokerColumns": BROKER_COLUMNS,
                        "groups": orjson.Fragment(b"[" + b",".join(chunks) + b"]"), "failovers": failovers,
                        "previousBuild": self.last_cost.document() if self.last_cost else None}
            body = orjson.dumps(document)
        self.last_cost = meter.cost()
        return body


async def _ask_members(client: ControllerClient, addresses: list[str]) -> list[dict[str, Any]]:
    views: dict[str, dict[str, Any]] = {}

    async def ask(address: str) -> None:
        views[address] = await _view_of(client, address)

    async with trio.open_nursery() as nursery:
        for address in addresses:
            nursery.start_soon(ask, address)
    return [views[address] for address in addresses]


async def _view_of(client: ControllerClient, address: str) -> dict[str, Any]:
    try:
        answer = await client.request(RMQC_NODE_STATUS, None, address=address)
    except ClientError as error:
        return {"address": address, "error": f"no answer: {error}"}
    assert answer is not None  # a two-way request
    if answer.code != ResponseCode.SUCCESS:
        return {"address": address, "error": f"answered {answer.code}: {answer.remark}"}
    try:
        return {"address": address, "status": orjson.loads(answer.body or b"{}")}
    except orjson.JSONDecodeError as error:
        return {"address": address, "error": f"an answer that is not JSON: {error}"}


class _LoopMeter:
    """Adds up the stretches the build holds the loop: wall time and the thread's CPU time."""

    def __init__(self) -> None:
        self._wall_s: list[float] = []
        self._cpu_s: list[float] = []

    @contextmanager
    def hold(self) -> Iterator[None]:
        wall_s, cpu_s = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self._wall_s.append(time.perf_counter() - wall_s)
            self._cpu_s.append(time.thread_time() - cpu_s)

    def cost(self) -> BuildCost:
        return BuildCost(sum(self._wall_s) * 1000, max(self._wall_s, default=0.0) * 1000, sum(self._cpu_s) * 1000,
                         max(self._cpu_s, default=0.0) * 1000, len(self._wall_s))


# The page loads only its own files and fetches only /status.json; names that brokers chose (group
# names, addresses) are shown as text, never as markup.
_PAGE_HEADERS = [("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
                 ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store")]
STATUS_JSON_PATH = "/status.json"


def page_paths() -> frozenset[str]:
    return frozenset((*PAGE_FILES, STATUS_JSON_PATH))


def answer_page(page: StatusPage, files: dict[str, tuple[bytes, str]], path: str, method: str,
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
