"""rmqc.metrics: what a node reports on its metrics port, pure (no trio, no sockets, no threads):
the Prometheus series of one node on a registry of its own (NodeMetrics, also the replica's
Observer) and their fixed label tables; the status page's files, its `/status.json` document and
the answers to its paths. rmqc.node serves them over HTTP, refreshes the series from the running
node and builds the page's document in its event loop; the simulator and tests can use them without
the Trio shell."""

from ._loop_series import LoopCounter as LoopCounter, LoopHistogram as LoopHistogram
from ._node_metrics import (
    ALARMS as ALARMS,
    ELECTION_RESULTS as ELECTION_RESULTS,
    NOTIFICATION_RESULTS as NOTIFICATION_RESULTS,
    ONEWAY_TIMING_EVERY as ONEWAY_TIMING_EVERY,
    REFUSAL_REASONS as REFUSAL_REASONS,
    NodeMetrics as NodeMetrics,
    election_result_of as election_result_of,
    request_label as request_label,
    response_label as response_label,
)
from ._status_page import (
    BROKER_COLUMNS as BROKER_COLUMNS,
    GROUP_COLUMNS as GROUP_COLUMNS,
    PAGE_FILES as PAGE_FILES,
    PAGE_VERSION as PAGE_VERSION,
    STATUS_JSON_PATH as STATUS_JSON_PATH,
    BuildCost as BuildCost,
    PageSource as PageSource,
    answer_page as answer_page,
    failover_document as failover_document,
    group_rows as group_rows,
    group_rows_chunk as group_rows_chunk,
    member_view as member_view,
    no_answer_view as no_answer_view,
    page_document as page_document,
    page_paths as page_paths,
    read_page_files as read_page_files,
)

__all__ = [
    "ALARMS",
    "BROKER_COLUMNS",
    "ELECTION_RESULTS",
    "GROUP_COLUMNS",
    "NOTIFICATION_RESULTS",
    "ONEWAY_TIMING_EVERY",
    "PAGE_FILES",
    "PAGE_VERSION",
    "REFUSAL_REASONS",
    "STATUS_JSON_PATH",
    "BuildCost",
    "LoopCounter",
    "LoopHistogram",
    "NodeMetrics",
    "PageSource",
    "answer_page",
    "election_result_of",
    "failover_document",
    "group_rows",
    "group_rows_chunk",
    "member_view",
    "no_answer_view",
    "page_document",
    "page_paths",
    "read_page_files",
    "request_label",
    "response_label",
]
