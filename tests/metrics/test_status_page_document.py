"""The status page's pure side (rmqc.metrics), without a node: the members' entries, the document's
assembly from serialised slices, and the answers to the page's paths. Built in a running node's loop
and served over HTTP: tests/node/test_status_page_json.py."""

from __future__ import annotations

from typing import Any

import orjson

from rmqc.metrics import (
    BROKER_COLUMNS,
    GROUP_COLUMNS,
    PAGE_VERSION,
    STATUS_JSON_PATH,
    BuildCost,
    answer_page,
    member_view,
    no_answer_view,
    page_document,
    page_paths,
    read_page_files,
)
from rmqc.remoting import RemotingCommand, ResponseCode


def test_a_members_entry_says_why_it_has_no_status() -> None:
    answer = RemotingCommand(code=ResponseCode.SUCCESS, body=b'{"nodeId": "n1"}')
    assert member_view("h:1", answer) == {"address": "h:1", "status": {"nodeId": "n1"}}
    refused = RemotingCommand(code=ResponseCode.NO_PERMISSION, remark="not admin")
    assert member_view("h:1", refused) == {"address": "h:1", "error": "answered 16: not admin"}
    assert member_view("h:1", RemotingCommand(code=0, body=b"{"))["error"].startswith("an answer that is not JSON")
    assert no_answer_view("h:2", TimeoutError("1000 ms")) == {"address": "h:2", "error": "no answer: 1000 ms"}


def test_the_document_joins_its_slices_into_one_groups_array() -> None:
    body = page_document(node_id="n0", generated_ms=5, nodes=[{"address": "h:0"}],
                         group_chunks=[b'["a"],["b"]', b'["c"]'], failovers=[],
                         previous_build=BuildCost(1.234, 0.5, 1.0, 0.25, 3))
    assert orjson.loads(body) == {
        "version": PAGE_VERSION, "nodeId": "n0", "generatedMs": 5, "nodes": [{"address": "h:0"}],
        "groupColumns": list(GROUP_COLUMNS), "brokerColumns": list(BROKER_COLUMNS),
        "groups": [["a"], ["b"], ["c"]], "failovers": [],
        "previousBuild": {"loopMs": 1.23, "maxSliceMs": 0.5, "cpuMs": 1.0, "maxSliceCpuMs": 0.25, "slices": 3}}
    empty = page_document(node_id="n0", generated_ms=5, nodes=[], group_chunks=[], failovers=[], previous_build=None)
    assert orjson.loads(empty)["groups"] == [] and orjson.loads(empty)["previousBuild"] is None


class Page:
    def __init__(self, document: bytes | None, failure: str | None = None) -> None:
        self._document, self.failure, self.asked = document, failure, 0

    def document(self) -> bytes | None:
        self.asked += 1
        return self._document


def answer(page: Page, path: str, method: str = "GET") -> tuple[str, dict[str, str], bytes]:
    started: list[Any] = []
    body = answer_page(page, read_page_files(), path, method, lambda status, headers: started.append((status, headers)))
    (status, headers), = started
    return status, dict(headers), b"".join(body)


def test_the_paths_are_answered_read_only() -> None:
    assert page_paths() == {"", "/status.js", "/status.css", STATUS_JSON_PATH}
    status, headers, _ = answer(Page(b"{}"), STATUS_JSON_PATH, "POST")
    assert (status, headers["Allow"]) == ("405 Method Not Allowed", "GET, HEAD")
    opened = Page(None)
    status, headers, body = answer(opened, "")
    assert status == "200 OK" and headers["Content-Type"].startswith("text/html") and b"<html" in body.lower()
    assert opened.asked == 1  # opening the page marks it watched: a document is ready by its first fetch
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert answer(Page(None), STATUS_JSON_PATH)[0] == "503 Service Unavailable"
    status, _, body = answer(Page(None, "ValueError: boom"), STATUS_JSON_PATH)
    assert (status, body) == ("500 Internal Server Error", b"building the status document failed: ValueError: boom\n")
    status, headers, body = answer(Page(b'{"version": 1}'), STATUS_JSON_PATH, "HEAD")
    assert (status, headers["Content-Type"], body) == ("200 OK", "application/json", b'{"version": 1}')
