"""rmqc.metrics: what a node reports on its metrics port, pure (no trio, no sockets, no threads):
the Prometheus series of one node on a registry of its own (NodeMetrics, also the replica's
Observer) and their fixed label tables. rmqc.node serves them over HTTP and refreshes them from the
running node; the simulator and tests can use them without the Trio shell."""

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

__all__ = [
    "ALARMS",
    "ELECTION_RESULTS",
    "NOTIFICATION_RESULTS",
    "ONEWAY_TIMING_EVERY",
    "REFUSAL_REASONS",
    "NodeMetrics",
    "election_result_of",
    "request_label",
    "response_label",
]
