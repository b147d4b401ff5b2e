"""Configuration of one Raft node, validated on construction."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rmqc.errors import ConfigError

KIB = 1024
MIB = 1024 * KIB


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre_candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"

    # the core looks its message handlers up by role on every step: Enum's own __hash__ is Python
    # code (it hashes the name); a member is a singleton compared by identity, so its identity hash
    # agrees with equality and costs no call
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class Config:
    """Static settings of one node. Times are in ticks; sizes in bytes.

    `election_tick` is the minimum election timeout; the randomised timeout lies in
    [election_tick, 2*election_tick). `lease_ticks` (default: election_tick) is the longest a
    leader lease may last; the leader serves lease reads for lease_ticks - lease_drift_ticks
    (clock drift between nodes, thesis section 6.4.1), and a leader elected without the old
    leader's consent waits up to lease_ticks + 1 before committing (rmqc.reads._lease). A short
    lease makes that takeover fast; lease reads then need a heartbeat every few ticks.
    """

    id: str
    election_tick: int = 10
    heartbeat_tick: int = 1
    # The leader's heartbeat interval while nothing wants its lease (no write, read index or
    # lease read for election_tick ticks); 0: always heartbeat_tick. A sparser heartbeat only
    # lets the lease lapse earlier: the next read renews it through a ReadIndex round.
    idle_heartbeat_tick: int = 0
    pre_vote: bool = True
    check_quorum: bool = True
    # One append is decoded in one go by the follower (a few ms per 256 KiB in Python), and the
    # window bounds what a lagging follower is sent before it answers: catch-up goes in steps the
    # nodes can interleave with heartbeats, elections and client answers (issue 13).
    max_size_per_msg: int = 256 * KIB
    max_entries_per_msg: int = 1024
    max_inflight_msgs: int = 256
    max_inflight_bytes: int = 2 * MIB
    # A probe (one append to a follower whose log position is unknown) is the only one outstanding;
    # it is sent again only if lost: the follower answered a later heartbeat round and no answer
    # came within this many ticks (see Progress.may_resume).
    probe_retry_ticks: int = 2
    max_uncommitted_size: int = 64 * MIB
    lease_drift_ticks: int = 2
    lease_ticks: int | None = None
    applied: int = 0
    # True (etcd): the leader sends every follower an append, empty if need be, as soon as the
    # commit index moves. False: followers learn it from the next append or heartbeat (at most
    # heartbeat_tick later), which halves the messages of a lone write (issue 21); a committed
    # membership change, or the first commit of a term, is still sent at once (a removed follower
    # gets no heartbeat to learn it from).
    commit_broadcast: bool = True
    # The node's storage was found damaged and repaired (rmqc serve --repair): it may have lost
    # entries it acknowledged and the vote it cast, so it neither votes nor campaigns until its log
    # holds the commit index a leader gave it after forgetting its old acks (RaftCore, "repair").
    repairing: bool = False
    # The voters a repairing node asks for their term when its storage lost the membership too
    # (empty: use the membership it has; with neither it waits for a snapshot to bring one).
    repair_peers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for check in _CHECKS:
            check(self)

    @property
    def lease_bound_ticks(self) -> int:
        return self.election_tick if self.lease_ticks is None else self.lease_ticks


def _require(ok: bool, field: str, value: object, why: str) -> None:
    if not ok:
        raise ConfigError(f"raft config {field}={value!r}: {why}")


def _check_id(c: Config) -> None:
    _require(isinstance(c.id, str) and c.id != "", "id", c.id, "must be a non-empty string")


def _check_ticks(c: Config) -> None:
    _require(c.heartbeat_tick > 0, "heartbeat_tick", c.heartbeat_tick, "must be > 0")
    _require(
        c.election_tick > c.heartbeat_tick,
        "election_tick",
        c.election_tick,
        f"must be > heartbeat_tick ({c.heartbeat_tick})",
    )
    _require(
        c.idle_heartbeat_tick == 0 or c.heartbeat_tick <= c.idle_heartbeat_tick < c.election_tick,
        "idle_heartbeat_tick",
        c.idle_heartbeat_tick,
        f"must be 0 or in [heartbeat_tick={c.heartbeat_tick}, election_tick={c.election_tick})",
    )
    _require(
        0 < c.probe_retry_ticks < c.election_tick,
        "probe_retry_ticks",
        c.probe_retry_ticks,
        f"must be in (0, election_tick={c.election_tick})",
    )
    _require(
        0 <= c.lease_drift_ticks < c.election_tick,
        "lease_drift_ticks",
        c.lease_drift_ticks,
        f"must be in [0, election_tick={c.election_tick})",
    )
    # Above election_tick, stickiness would no longer cover the lease in a normal election.
    _require(
        c.lease_ticks is None or c.lease_drift_ticks < c.lease_ticks <= c.election_tick,
        "lease_ticks",
        c.lease_ticks,
        f"must be in (lease_drift_ticks={c.lease_drift_ticks}, election_tick={c.election_tick}]",
    )


def _check_sizes(c: Config) -> None:
    for name in (
        "max_size_per_msg",
        "max_entries_per_msg",
        "max_inflight_msgs",
        "max_inflight_bytes",
        "max_uncommitted_size",
    ):
        value = getattr(c, name)
        _require(value > 0, name, value, "must be > 0")
    _require(
        c.max_inflight_bytes >= c.max_size_per_msg,
        "max_inflight_bytes",
        c.max_inflight_bytes,
        f"must be >= max_size_per_msg ({c.max_size_per_msg}) or one message could never fit",
    )
    _require(c.applied >= 0, "applied", c.applied, "must be >= 0")


_CHECKS = (_check_id, _check_ticks, _check_sizes)
