"""Health checks of one node (issue 33): what `/livez` and `/readyz` on the metrics port, the
`health` of the RMQC_NODE_STATUS answer, `rmqc status` and `rmqc admin health` report.

Liveness (`/livez`: restart the process if it fails for long) is about what only the shell has, an
event loop and a disk: `loop` (the node's event loop ran recently), `disk` (the data directory's
filesystem answers) and `writes` (no write has hung). rmqc.node._health measures them (when the loop
last published, when the saver's call began, how the last disk probe went, in seconds of its
monotonic clock) and the functions here judge them against their bounds, as of a `now_s` it passes.
Readiness (`/readyz`: send it work, count it in a rolling restart) adds what the replica
knows, each named:

- `leader`: a leader is known (a node cut off from a majority forgets its leader once its election
  timeout passes: it becomes a pre-candidate), and a leader serves (an entry of its term applied);
- `lag`: its applied index is within READY_MAX_LAG_ENTRIES of the highest commit index a leader
  told it (the commit of the appends and heartbeats it received; on the leader its own commit);
- `disk_full`, `repairing`: the alarm of that name is not raised (docs/operations.md);
- `voter`: it is a voter of the applied membership (a learner or a joining node is not ready).

Rendering follows etcd and Kubernetes: `ok` (HTTP 200) when every check not excluded passes, else
one line per check, `[+]name ok` / `[-]name failed: why`, and `readyz check failed` (HTTP 503);
`verbose` lists every check also on success; `exclude=NAME` (repeatable) leaves a check out of the
verdict (listed as `[+]name excluded: ok`); a name that matches no check is reported in a `warn:`
line, as Kubernetes does, and excludes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._alarms import DISK_FULL, REPAIRING
from ._io import ReplicaStatus

__all__ = ["DISK_PROBE_BOUND_S", "LIVENESS_CHECKS", "LOOP_BOUND_S", "READINESS_CHECKS", "READY_MAX_LAG_ENTRIES",
           "WRITE_BOUND_S", "DiskProbe", "HealthCheck", "HealthVerdict", "disk_check", "endpoint_checks",
           "health_verdict", "loop_check", "readiness_checks", "writes_check"]

LIVENESS_CHECKS = ("loop", "disk", "writes")
READINESS_CHECKS = ("leader", "lag", DISK_FULL, REPAIRING, "voter")
# Longer than any pause a healthy node makes (a 10,000-group snapshot save holds the loop ~70 ms,
# libfaketime's worst stalls 1-1.7 s: docs/chaos.md), short enough for a probe to see a hang.
LOOP_BOUND_S = 3.0
# A save takes milliseconds; a disk that holds one for seconds is broken or saturated (the node's
# writes wait for it), and says so here. The same bound as the loop's.
WRITE_BOUND_S = LOOP_BOUND_S
DISK_PROBE_BOUND_S = 2.0
# A follower this far behind the leader's commit is not ready: as far as `rmqc admin members
# promote` lets a learner trail (CATCH_UP_ENTRIES); one entry holds up to 128 requests.
READY_MAX_LAG_ENTRIES = 64


@dataclass(frozen=True, slots=True)
class HealthCheck:
    name: str
    ok: bool
    detail: str  # what was found, in words (also when it passes)

    def document(self) -> dict[str, object]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class DiskProbe:
    """One probe of the data directory's filesystem (statvfs, a read of node.json), in the shell's
    monotonic seconds."""

    started_s: float
    finished_s: float | None = None  # None: in flight
    error: str | None = None


def loop_check(published_s: float | None, now_s: float) -> HealthCheck:
    """`loop` as the HTTP threads judge it: the event loop's last publication (None: none yet)."""
    if published_s is None:
        return HealthCheck("loop", False, "the node's event loop has not published yet (starting)")
    age = now_s - published_s
    if age > LOOP_BOUND_S:
        return HealthCheck("loop", False, f"the event loop has not run for {age:.1f} s (bound {LOOP_BOUND_S:g} s): "
                                          "something holds it (a hung fsync, a pass that does not end)")
    return HealthCheck("loop", True, f"the event loop ran {age * 1000:.0f} ms ago (bound {LOOP_BOUND_S:g} s)")


def writes_check(started_s: float | None, now_s: float, data_dir: str) -> HealthCheck:
    """`writes`: when the saver's call under way began (None: no write under way)."""
    if started_s is None:
        return HealthCheck("writes", True, "no write under way")
    age = now_s - started_s
    if age > WRITE_BOUND_S:
        return HealthCheck("writes", False, f"a write to {data_dir} has been under way for {age:.1f} s "
                                            f"(bound {WRITE_BOUND_S:g} s): the disk does not complete it; the "
                                            "node's writes wait, reads and heartbeats are served")
    return HealthCheck("writes", True, f"a write under way for {age * 1000:.0f} ms (bound {WRITE_BOUND_S:g} s)")


def disk_check(data_dir: str, probe: DiskProbe | None, done: DiskProbe | None, now_s: float, *,
               probed: bool) -> HealthCheck:
    """`disk`: `probe` the last probe or the one in flight, `done` the last that returned; `probed`
    False when the shell runs no probes (they run with the health endpoints)."""
    if probe is not None and probe.finished_s is None and now_s - probe.started_s > DISK_PROBE_BOUND_S:
        return HealthCheck("disk", False, f"a probe of {data_dir} (statvfs, read of node.json) has not returned "
                                          f"for {now_s - probe.started_s:.1f} s (bound {DISK_PROBE_BOUND_S:g} s)")
    if not probed:
        return HealthCheck("disk", True, f"{data_dir} is not probed: the probe runs with the health endpoints "
                                         "(--metrics-port)")
    if done is None:
        return HealthCheck("disk", True, f"the first probe of {data_dir} is under way")
    if done.error is not None:
        return HealthCheck("disk", False, f"a probe of {data_dir} failed: {done.error}")
    assert done.finished_s is not None
    took_ms = (done.finished_s - done.started_s) * 1000
    return HealthCheck("disk", True, f"{data_dir} answered in {took_ms:.1f} ms, "
                                     f"{max(0.0, now_s - done.finished_s):.1f} s ago")


def endpoint_checks(kind: str, liveness: tuple[HealthCheck, ...],
                    readiness: tuple[HealthCheck, ...] | None) -> tuple[HealthCheck, ...]:
    """The checks of `kind` ("livez" or "readyz"): the liveness checks, and for readyz the readiness
    checks the loop last published (None or empty: the node is starting, each fails so)."""
    if kind == "livez":
        return liveness
    if not readiness:
        return liveness + tuple(HealthCheck(name, False, "the node is starting") for name in READINESS_CHECKS)
    return liveness + readiness


def readiness_checks(status: ReplicaStatus) -> tuple[HealthCheck, ...]:
    """The replica's readiness checks, in READINESS_CHECKS order, from its published status."""
    alarms = {str(alarm.get("alarm")): alarm for alarm in status.alarms}
    return (_leader(status), _lag(status), _alarm(DISK_FULL, alarms), _alarm(REPAIRING, alarms), _voter(status))


def _leader(status: ReplicaStatus) -> HealthCheck:
    if status.leader is None:
        return HealthCheck("leader", False, "no leader known: an election is under way, or this node cannot reach "
                                            "a majority of the voters")
    if status.leader == status.node_id:
        if not status.serving:
            return HealthCheck("leader", False, f"{status.node_id} was elected leader in term {status.term} and does "
                                                "not serve yet (no entry of its term applied)")
        return HealthCheck("leader", True, f"this node leads (term {status.term})")
    return HealthCheck("leader", True, f"leader {status.leader} (term {status.term})")


def _lag(status: ReplicaStatus) -> HealthCheck:
    leader_commit = max(status.commit, status.leader_commit)
    behind = leader_commit - status.applied
    text = f"applied {status.applied}, the leader's commit {leader_commit}"
    if behind > READY_MAX_LAG_ENTRIES:
        return HealthCheck("lag", False, f"{text}: {behind} entries behind (more than {READY_MAX_LAG_ENTRIES})")
    return HealthCheck("lag", True, f"{text} ({behind} behind, at most {READY_MAX_LAG_ENTRIES})")


def _alarm(name: str, alarms: dict[str, dict[str, object]]) -> HealthCheck:
    alarm = alarms.get(name)
    if alarm is None:
        return HealthCheck(name, True, "no alarm")
    return HealthCheck(name, False, f"alarm raised: {alarm.get('detail')}")


def _voter(status: ReplicaStatus) -> HealthCheck:
    if status.node_id in status.voters:
        return HealthCheck("voter", True, "a voter")
    if status.node_id in status.learners:
        return HealthCheck("voter", False, f"{status.node_id} is a learner (no vote): promote it once caught up "
                                           "(rmqc admin members promote)")
    return HealthCheck("voter", False, f"{status.node_id} is not a member of the applied membership (joining, or "
                                       "removed)")


@dataclass(frozen=True, slots=True)
class HealthVerdict:
    ok: bool
    text: str  # the body of the HTTP answer (ends with a newline)


def health_verdict(kind: str, checks: Sequence[HealthCheck], *, verbose: bool = False,
                   exclude: Iterable[str] = ()) -> HealthVerdict:
    """`kind` ("livez", "readyz") of `checks`: ok unless a check not excluded failed."""
    excluded = set(exclude)
    names = {check.name for check in checks}
    unknown = sorted(excluded - names)
    ok = all(check.ok or check.name in excluded for check in checks)
    lines = []
    if verbose or not ok:
        for check in checks:
            if check.name in excluded:
                lines.append(f"[+]{check.name} excluded: ok")
            elif check.ok:
                lines.append(f"[+]{check.name} ok")
            else:
                lines.append(f"[-]{check.name} failed: {check.detail}")
    if unknown:
        lines.append("warn: some health checks cannot be excluded: no matches for "
                     + ",".join(f'"{name}"' for name in unknown))
    if ok:
        lines.append(f"{kind} check passed" if verbose else "ok")
    else:
        lines.append(f"{kind} check failed")
    return HealthVerdict(ok, "\n".join(lines) + "\n")
