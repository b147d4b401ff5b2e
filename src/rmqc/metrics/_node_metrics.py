"""Prometheus metrics of one controller node: its series, their label tables, and the replica's
Observer (rmqc.replica.Observer) that feeds them. Bookkeeping on a prometheus_client registry, no I/O:
rmqc.node's exporter serves `exposition()` over HTTP.

Each node gets its own `CollectorRegistry`, so several nodes in one process (tests, the simulator)
never collide on metric names. Label values come from fixed tables (request names, response names,
election outcomes), never from client input: a client sending random request codes must not be
able to grow the number of time series without bound.

Call sites (the node's driver and server): `observe_request` once per answered request,
`oneway_timing_due` + `observe_oneway` per one-way request served inline (heartbeats: counted in
bulk, one in ONEWAY_TIMING_EVERY timed; the rest flushed by `update_gauges`),
`observe_append` once per Raft append (proposals in it), `observe_fsync` per persisted Ready,
`count_read_index_round` per ReadIndex heartbeat round, `count_elections` with the apply results of
each committed entry on the leader, `observe_detection` per failover and `observe_failover_step` per
1008 sent (leader) and per replica heard in its new role, `update_from_status` (or `update_gauges`),
`update_refusals` and `update_notifications` about once a second.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from rmqc.fsm import ApplyResult, ElectMaster
from rmqc.remoting import RMQC_PRIVATE_REQUESTS, RequestCode, ResponseCode
from rmqc.replica import DISK_FULL, FAILOVER_STEPS, KEEP_CURRENT_MASTER, REPAIRING, ReplicaStatus

from ._loop_series import LoopCounter, LoopHistogram, LoopSeries

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

# The labels of RocketMQ's own controller metrics (spec 8.1), so dashboards read alike.
NEW_MASTER_ELECTED = "new_master_elected"
NO_MASTER_ELECTED = "no_master_elected"
ELECTION_RESULTS = (NEW_MASTER_ELECTED, KEEP_CURRENT_MASTER, NO_MASTER_ELECTED)
ALARMS = (DISK_FULL, REPAIRING)
# Why connections and requests were refused (docs/security.md): the labels of rmqc_refusals.
REFUSAL_REASONS = ("peer_auth", "connection_limit", "idle_timeout", "tls", "acl_address_not_allowed",
                   "acl_unknown_access_key", "acl_bad_signature", "acl_not_admin")
# What became of the NOTIFY_BROKER_ROLE_CHANGED (1008) one-way sends (rmqc.node's notifier): the
# labels of rmqc_notifications. `superseded`: a newer epoch replaced it before it went out;
# `dropped`: more were waiting than the notifier keeps.
NOTIFICATION_RESULTS = ("sent", "failed", "superseded", "dropped")
OTHER_LABEL = "other"
ONEWAY_LABEL = "oneway"

# Controller requests answer in well under 3 s (the client timeout); the buckets span 0.1 ms .. 5 s.
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
FSYNC_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
# A failover's steps: detection by a closed connection takes milliseconds, by a missed deadline up
# to a scan interval; a 1008 leaves within milliseconds unless the broker is slow to accept.
FAILOVER_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Stretches of 10 ms or more in which the event loop did not look at its sockets (rmqc.node's
# LoopLoad): past 100 ms a broker's request visibly waits, past the 3 s client timeout it is lost.
LOOP_STRETCH_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Group commit puts everything waiting into one append; MAX_PENDING_PROPOSALS (65,536) bounds it.
PROPOSAL_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536)

# Inline one-way requests (heartbeats) are counted in bulk and one in this many is timed.
ONEWAY_TIMING_EVERY = 32
# (request code, response code) pairs whose metric children observe_request keeps at hand. Clients
# choose request codes, so the cache is bounded; pairs beyond it are still counted, just slower.
MAX_REQUEST_SERIES = 1024


def request_label(code: int) -> str:
    """The name of a request code from the protocol table; `other` for codes outside it."""
    try:
        return RequestCode(code).name
    except ValueError:
        return RMQC_PRIVATE_REQUESTS.get(code, OTHER_LABEL)


def response_label(code: int | None) -> str:
    """The name of a response code (`oneway` when there was no answer); `other` outside the table."""
    if code is None:
        return ONEWAY_LABEL
    try:
        return ResponseCode(code).name
    except ValueError:
        return OTHER_LABEL


def election_result_of(result: ApplyResult) -> str | None:
    """The outcome label of an applied command, or None when it was no election."""
    command = result.command
    if not isinstance(command, ElectMaster):
        return None
    if not result.ok:
        had_master = result.before is not None and result.before.master_id is not None
        return KEEP_CURRENT_MASTER if had_master else NO_MASTER_ELECTED
    return NO_MASTER_ELECTED if command.candidate is None else NEW_MASTER_ELECTED


class NodeMetrics:
    """Every metric of one node, in a registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        # the series every write updates are LoopSeries (no lock per observation: rmqc.metrics._loop_series)
        self.requests = LoopSeries("rmqc_requests", "remoting requests answered, by request and response code",
                                   ("request", "result"), registry=r)
        self.request_latency = LoopSeries("rmqc_request_latency_seconds", "time from request decoded to answer ready",
                                          ("request",), buckets=LATENCY_BUCKETS_S, registry=r)
        self._request_children: dict[tuple[int, int | None], tuple[LoopCounter, LoopHistogram]] = {}
        self._oneway_unflushed: dict[int, int] = {}  # inline one-way requests not yet counted
        self.term = Gauge("rmqc_raft_term", "current Raft term", registry=r)
        self.commit_index = Gauge("rmqc_raft_commit_index", "highest log index known committed", registry=r)
        self.applied_index = Gauge("rmqc_raft_applied_index", "highest log index applied to the state", registry=r)
        self.is_leader = Gauge("rmqc_is_leader", "1 while this node serves as leader", registry=r)
        self._proposals_per_append = LoopSeries("rmqc_proposals_per_append", "proposals batched into one Raft append",
                                                buckets=PROPOSAL_BUCKETS, registry=r).histogram()
        self._fsync_latency = LoopSeries("rmqc_fsync_seconds", "one persisted Ready: LMDB transaction and fsync",
                                         buckets=FSYNC_BUCKETS_S, registry=r).histogram()
        # fed by rmqc.node's LoopLoad instrument, in the loop's thread
        self.loop_busy = LoopSeries(
            "rmqc_event_loop_busy_seconds",
            "time the event loop ran tasks or waited for a CPU, not for I/O or a timer: its rate is the loop's "
            "utilisation", registry=r).counter()
        self.loop_stretches = LoopSeries(
            "rmqc_event_loop_busy_stretch_seconds", "busy stretches of 10 ms or more: the event loop looked at no "
            "socket for this long", buckets=LOOP_STRETCH_BUCKETS_S, registry=r).histogram()
        self.read_index_rounds = Counter("rmqc_read_index_rounds", "ReadIndex heartbeat rounds", registry=r)
        self.live_brokers = Gauge("rmqc_live_brokers", "brokers in this node's heartbeat table", registry=r)
        self.broker_groups = Gauge("rmqc_broker_groups", "broker groups in the replicated state", registry=r)
        self.elections = Counter("rmqc_elections", "elections applied, by outcome", ("result",), registry=r)
        for result in ELECTION_RESULTS:
            self.elections.labels(result)  # present at 0, so rate() works from the first election
        self.detection_latency = Histogram(
            "rmqc_failover_detection_seconds",
            "leader only: a dead master's last sign of life (heartbeat or connection close) -> its election proposed",
            buckets=FAILOVER_BUCKETS_S, registry=r)
        self.notification_latency = Histogram(
            "rmqc_failover_notification_seconds",
            "an election applied -> a replica sent its 1008 (step notified, leader only) or heard naming the new "
            "masterEpoch (step heartbeat)", ("step",), buckets=FAILOVER_BUCKETS_S, registry=r)
        for step in FAILOVER_STEPS:
            self.notification_latency.labels(step)
        # what `rmqc status` shows of the membership (leader only; 0 and no peer series elsewhere)
        self.learners = Gauge("rmqc_raft_learners", "learners in the applied membership", registry=r)
        self.pending_conf_change = Gauge("rmqc_raft_pending_conf_change",
                                         "1 while a membership change is in the log and not applied", registry=r)
        self.peer_lag = Gauge("rmqc_raft_peer_lag_entries", "entries a peer lacks (leader's last index - its match)",
                              ("peer",), registry=r)
        self._lag_peers: set[str] = set()
        self.alarms = Gauge("rmqc_alarm", "1 while the alarm is raised (docs/operations.md)", ("alarm",), registry=r)
        for alarm in ALARMS:
            self.alarms.labels(alarm).set(0)  # present at 0, so an alert rule sees the series
        self.refusals = Counter("rmqc_refusals", "connections and requests refused, by reason (docs/security.md)",
                                ("reason",), registry=r)
        for reason in REFUSAL_REASONS:
            self.refusals.labels(reason)
        self._refusals_seen: dict[str, int] = {}
        self.notifications = Counter("rmqc_notifications", "NOTIFY_BROKER_ROLE_CHANGED (1008) one-way sends, by result",
                                     ("result",), registry=r)
        for result in NOTIFICATION_RESULTS:
            self.notifications.labels(result)  # present at 0, so an alert rule sees the series
        self._notifications_seen: dict[str, int] = {}

    def observe_request(self, code: int, response_code: int | None, latency_s: float) -> None:
        counter, latency = self._children(code, response_code)
        counter.inc()
        latency.observe(latency_s)

    def _children(self, code: int, response_code: int | None) -> tuple[LoopCounter, LoopHistogram]:
        # a child's lookup costs label-string work; heartbeats make this the hottest metric, so
        # each (code, response code) pair keeps its two children.
        children = self._request_children.get((code, response_code))
        if children is None:
            request = request_label(code)
            children = (self.requests.counter(request, response_label(response_code)),
                        self.request_latency.histogram(request))
            if len(self._request_children) < MAX_REQUEST_SERIES:
                self._request_children[(code, response_code)] = children
        return children

    def oneway_timing_due(self, code: int) -> bool:
        """Count one inline one-way request; True when this one should be timed (and the count so
        far flushed by `observe_oneway`). Timing and counting every heartbeat in Prometheus cost
        more than handling it."""
        seen = self._oneway_unflushed.get(code, 0) + 1
        self._oneway_unflushed[code] = seen
        return seen >= ONEWAY_TIMING_EVERY

    def observe_oneway(self, code: int, latency_s: float) -> None:
        counter, latency = self._children(code, None)
        counter.inc(self._oneway_unflushed.pop(code, 0))
        latency.observe(latency_s)

    def _flush_oneway(self) -> None:
        for code, seen in list(self._oneway_unflushed.items()):
            self._children(code, None)[0].inc(seen)
        self._oneway_unflushed.clear()

    def observe_append(self, proposals: int) -> None:
        self._proposals_per_append.observe(proposals)

    def observe_fsync(self, seconds: float) -> None:
        self._fsync_latency.observe(seconds)

    def count_read_index_round(self, rounds: int = 1) -> None:
        self.read_index_rounds.inc(rounds)

    def count_election(self, result: str) -> None:
        if result not in ELECTION_RESULTS:
            raise ValueError(f"election result {result!r} is not one of {ELECTION_RESULTS}")
        self.elections.labels(result).inc()

    def count_elections(self, results: Iterable[ApplyResult]) -> None:
        for result in results:
            label = election_result_of(result)
            if label is not None:
                self.elections.labels(label).inc()

    def observe_detection(self, seconds: float) -> None:
        self.detection_latency.observe(max(0.0, seconds))  # wall clocks: a step back is no negative latency

    def observe_failover_step(self, step: str, seconds: float) -> None:
        self.notification_latency.labels(step).observe(seconds)

    def set_alarm(self, alarm: str, raised: bool) -> None:
        if alarm not in ALARMS:
            raise ValueError(f"alarm {alarm!r} is not one of {ALARMS}")
        self.alarms.labels(alarm).set(1 if raised else 0)

    def update_gauges(self, *, term: int, commit: int, applied: int, is_leader: bool,
                      live_brokers: int, broker_groups: int) -> None:
        self.term.set(term)
        self.commit_index.set(commit)
        self.applied_index.set(applied)
        self.is_leader.set(1 if is_leader else 0)
        self.live_brokers.set(live_brokers)
        self.broker_groups.set(broker_groups)
        self._flush_oneway()

    def update_from_status(self, status: ReplicaStatus) -> None:
        """Refresh the gauges from a replica's published status (rmqc.replica.ReplicaStatus)."""
        self.update_gauges(term=status.term, commit=status.commit, applied=status.applied,
                           is_leader=status.serving, live_brokers=status.live_brokers,
                           broker_groups=status.broker_groups)
        self._update_membership(status)

    def _update_membership(self, status: ReplicaStatus) -> None:
        """The same figures as `rmqc status` (rmqc.replica._status)."""
        self.learners.set(len(status.learners))
        self.pending_conf_change.set(0 if status.pending_conf_change is None else 1)
        lags = {peer: lag.lag for peer, lag in status.peers.items()}
        for gone in self._lag_peers - lags.keys():  # only a leader knows them; peers come and go
            self.peer_lag.remove(gone)
        for peer, lag in lags.items():
            self.peer_lag.labels(peer).set(lag)
        self._lag_peers = set(lags)

    def update_refusals(self, totals: dict[str, int]) -> None:
        """Bring the counters up to the server's running totals (it counts without Prometheus on the
        request path; this runs once a second)."""
        _catch_up(self.refusals, self._refusals_seen, totals, REFUSAL_REASONS, "refusal reason")

    def update_notifications(self, totals: dict[str, int]) -> None:
        """Bring the counters up to the notifier's running totals (once a second, as refusals)."""
        _catch_up(self.notifications, self._notifications_seen, totals, NOTIFICATION_RESULTS, "notification result")

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric (what the exporter serves)."""
        return generate_latest(self.registry)


def _catch_up(counter: Counter, seen: dict[str, int], totals: dict[str, int], labels: tuple[str, ...],
              what: str) -> None:
    """Increase each labelled child of `counter` by what its running total grew since last time."""
    for label, total in totals.items():
        if label not in labels:
            raise ValueError(f"{what} {label!r} is not one of {labels}")
        before = seen.get(label, 0)
        if total > before:
            counter.labels(label).inc(total - before)
            seen[label] = total
