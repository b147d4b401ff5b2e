"""Deterministic simulation of an rmqc controller cluster, seed by seed.

    python -m rmqc.testing.sim --seeds N [--start S] [--nodes 3|5] [--progress-every K]
    python -m rmqc.testing.sim --seed S          # replay one seed and print its trace
    python -m rmqc.testing.sim --mutant NAME ... # the same with a known bug put back (MUTANTS)
    python -m rmqc.testing.sim --list-mutants

Each seed runs 3 or 5 nodes (alternating by seed unless --nodes), each the REPLICA THAT SHIPS
(`rmqc.replica.Replica`: driver, group commit, read path, forwarding, liveness and its elections,
dead-leader takeover, notifier, with the real `ControllerState`, `ControllerProcessor` and heartbeat
table) for 1.3 s of virtual time: 1 s of load and faults, then 0.3 s with the network healed and
every node and broker up. The same seed always gives the same run (virtual time, seeded
`random.Random`s, sorted iteration; no clock, no global random).

Load (`_simbrokers`, `_simadmin`): brokers that get ids (1012/1013), register (1003), ask for
elections (1002), heartbeat every node (904), expand and shrink their SyncStateSet (1001), poll and
read their groups' metadata (1004) at every consistency level on any node, and follow 1008; as
NameServer clients they register their topic tables (103, a new DataVersion on a role change and
now and then a new topic) and read routes (105) at every consistency level on any node; admins
that designate masters (1002), clean ids (1011) and change live options (1009).

Faults (`_simnemesis`, `_simnet`, `_simreplica`): message delay, loss, duplication and reordering;
symmetric partitions, isolating the leader, one-way link cuts, a leader cut off REJECT-style (links
reset and refused, so the others take over at once while it lives on); crashes (also of the leader,
and inside an fsync: the actions emitted before it happen, nothing after); pauses (the node's clock
jumps on resume; what reached it waits, as much as each peer's outbox holds); per-node clock rates
(and a "leader slowest" skew); wall clocks apart from the monotonic ones, stepped forwards and
backwards and drifting on some nodes of every run (the replica must decide nothing on them);
leadership transfers; single-server membership changes through learners; snapshots and log
compaction; broker crashes.
Profile "members" (`_simmembers`): operators send RMQC_MEMBERS_ADD/PROMOTE/REMOVE and
RMQC_TRANSFER_LEADER through the shipped request path to grow, shrink and replace the group; new
nodes start with empty disks and `join` (catching up by snapshot once the log is compacted), removed
ones stop for good.
Profile "corruption" (`_simstorage`, `_simnemesis`): more crashes, and a crashed node's disk may come
back damaged when it restarts (the only time a real node reads its files): with probability 0.5 a
damage that real storage detects (a bit flip, torn write, truncation or zeroed region in the log
beyond a random index, or a snapshot failing its checksum), after which the node restarts as
`rmqc serve --repair` leaves it: the log before the damage with the hard state saved with it (the
term of its last entry, no vote, the commit index within it) and its membership record, or (a
damaged snapshot, or half the time anyway) nothing at all, and the repair recorded
(`begin_repair`); at most a minority of the nodes repair at once. With probability 0.2 instead the
disk lied about its fsyncs: the last 1-3 saves with entries (and every write after the first of
them) silently vanish and the node restarts normally with the shorter log (term and vote are kept:
a forgotten vote can elect two leaders in a term, which no protocol detects). Its quiet phase is
0.5 s, so that every repair can be seen ending.
Profile "disks" (`_simstorage`, `_simnemesis`): the default faults, and running nodes' disks fill up
for a while (every write refused for space: the replica's disk-full alarm, a snapshot written
meanwhile refused DISK_FULL) or fail a write (EIO: the replica stops the node, which restarts from
what is durable); one save in twenty goes on in the background for up to four election timeouts, as
`rmqc serve`'s saver leaves a slow save while the node goes on (a crash meanwhile: never written).
While its alarm is raised a node may apply an entry it could not persist once a majority of its
voters hold it (a leader with a full disk answers what its followers commit).
ACL (`_simacl`): in a quarter of the seeds of every profile, and in every seed of profile "acl",
each node reads one plain_acl.yml and runs `rmqc serve`'s ACL gate (`rmqc.acl.RequestGate`) on
every request it decodes, before the replica; brokers sign with a broker account, admins and
operators with an admin account, and an admitted request reaches the replica with its origin (key,
address, node), as on a real node. Profile "acl" adds an intruder: designated elections, cleans,
configuration changes and one-way heartbeats, unsigned, under an unknown key, with a wrong secret,
altered after signing, or signed by an account that is no admin. Checked: every answer it gets is
NO_PERMISSION with the reason its forgery earns, no command of its is ever applied, no node's
liveness table holds its broker at the end, and no node refuses an honest client's request.

Checked after every step: the Raft invariants (`_simcheck`: one leader per term, log matching,
durability, leader completeness, state-machine safety, apply after persist, commit never going
down, every node applying the same membership at each index, at most one membership change
pending on a leader, no vote or candidacy from a node after it applied its own removal) and the
controller's (`_simcontroller_check`: one master per masterEpoch, epochs never going
down, clean elections inside the SyncStateSet, stale 1001s refused); at the end: committed entries
durable on a majority, acknowledged ids kept and never shared, brokers following the newest
master, linearizable and lease reads linearizable per group, stale reads monotonic per node;
and the NameServer's (`_simroute_check`): a route lists as master only the master committed at
the index it was served at (route-fencing), linearizable and lease routes served after every
master change applied before they were sent (route-stale), the same answer on every node at one
applied index (route-divergent), and a topic the committed master registered kept in every route
until its broker name is unregistered (route-lost).

With storage faults (profile "corruption"), the checker knows which copies each fault destroyed
(undetected loss counts as destroyed; what a repair kept is intact) and which nodes are repairing
(found damaged, repair not ended: they must vote for nobody, so they protect every entry as a
copy would until they hold it again). A committed entry may be lost only once fewer than a
majority of the voters (or of all nodes) hold it intact or are repairing: at a fault, or when a
node ends its repair without it. Only then may another entry take its index (durability, leader
completeness, state-machine safety and the final durable-majority check allow it, and the run's
history forks there: those checks, and the controller's, stop at the fork; a node that then refuses
the other branch ends the run). Every other committed entry stays checked: in particular one that a
majority holds intact is never lost. Besides: a node whose storage was found damaged never grants
a vote or pre-vote, never campaigns and never leads until it ended its repair (the simulator's own
knowledge, whatever the node recorded); it ends its repair only holding again every committed entry
it lost since it was found damaged (unless that loss was allowed meanwhile); and once the network
is healed, one leader has led for 300 ms and the node has run for 300 ms, every damaged node that
is a member has ended its repair (liveness; not checked: a node re-added by id after a removal,
pitfall 17, and a node the leader is sending a snapshot or sent one less than 300 ms ago: a lost
snapshot is retried only after 5 election timeouts, the simulated network reporting no lost send).

Mutants (`--mutant NAME`) put a known bug back into shipped code for the run (MUTANTS, each in the
profile where it shows): the checkers must catch it.

Output: every failing seed with the last lines of its trace, a line of event counts, then one JSON
line {"seeds": N, "violations": V, "ops": ..., "controller": {"elections": ..., "notifications": ...,
"broker_requests": ...}, "sim_seconds": ..., "wall_seconds": ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import rmqc.controller._processor as processor_module
import rmqc.fsm._state as state_module
import rmqc.peerwire._codec as codec_module
import rmqc.raft._core as core_module
from rmqc.acl import SigningKey
from rmqc.controller._policy import _choose_within
from rmqc.fsm import BrokerGroup, NamesrvState
from rmqc.raft import Entry, EntryType, MemoryStorage, Message, RawNode, ReadState, Ready, Snapshot
from rmqc.raft._core import RaftCore
from rmqc.replica._driver import Driver
from rmqc.replica._membership import Membership
from rmqc.replica._reads import ReadPath

from ._simacl import AclKnobs
from ._simadmin import AdminKnobs
from ._simbrokers import BrokerKnobs
from ._simhistory import ControllerHistory
from ._simmembers import MembersKnobs
from ._simnemesis import NemesisKnobs
from ._simreplica import SimClock
from ._simworld import SeedResult, SimKnobs, run_seed

__all__ = [
    "MUTANTS",
    "PROFILES",
    "Mutant",
    "SeedResult",
    "SimKnobs",
    "SimSummary",
    "main",
    "mutant",
    "run_seed",
    "run_seeds",
]

# Where a kind of bug has the most chances to show. "default": the replica that ships under
# brokers, admins and every fault. "reject-partition": the leader is cut off REJECT-style (or
# crashed) again and again while brokers read with lease reads on the node they believe leads.
# "lease-drift": the leader's clock runs slow, the others' fast, the leader is isolated again and
# again, with the same lease-heavy reads.
LEASE_READERS = BrokerKnobs(read_think_max_us=2_000, read_level_weights=(1, 8, 1), read_follow_hint_p=0.9,
                            alter_us=10_000)
BUSY_ADMINS = AdminKnobs(count=3, think_min_us=5_000, think_max_us=20_000, timeout_us=50_000, weights=(1, 0, 0),
                         follow_hint_p=0.5)
PROFILES: dict[str, SimKnobs] = {
    "default": SimKnobs(),
    "reject-partition": replace(
        SimKnobs(),
        brokers=LEASE_READERS,
        admins=BUSY_ADMINS,
        nemesis=NemesisKnobs(interval_min_us=150_000, interval_max_us=300_000,
                             weights={"heal": 2, "refuse_leader": 4, "crash_leader": 1, "skew_clocks": 1},
                             broker_weights={}),
    ),
    # An operator grows, shrinks and replaces the group (new nodes join with empty disks, by
    # snapshot once the log is compacted) and moves the leadership, under every fault of the default
    # profile but the nemesis' own membership changes (it would re-add removed nodes by id).
    "members": replace(
        SimKnobs(),
        members=MembersKnobs(),
        nemesis=NemesisKnobs(weights={**NemesisKnobs().weights, "reconfigure": 0}),
    ),
    "lease-drift": replace(
        SimKnobs(),
        # +-50% clock rates, and a lease margin that covers them: the fastest follower forgets the
        # leader after 9 of its 5 ms ticks (45 ms); a lease of 3 of the leader's 15 ms ticks fits.
        max_drift=0.5,
        node=replace(SimKnobs().node, lease_drift_ticks=7),
        brokers=LEASE_READERS,
        admins=BUSY_ADMINS,
        nemesis=NemesisKnobs(interval_min_us=100_000, interval_max_us=200_000,
                             weights={"heal": 1, "isolate_leader": 3, "skew_clocks": 2}, broker_weights={}),
    ),
    # Disks that come back from a crash damaged (detected: the node repairs from the cluster) or
    # short of their last saves (undetected), under the default faults with more crashes, and a
    # longer quiet phase so that every repair can be seen ending.
    "corruption": replace(
        SimKnobs(),
        quiet_us=500_000,
        nemesis=NemesisKnobs(weights={**NemesisKnobs().weights, "crash": 4, "crash_leader": 2, "crash_mid_fsync": 2},
                             damage_p=0.5, lose_tail_p=0.2),
    ),
    # Disks of running nodes that fill up (the disk-full alarm, snapshots refused for space), fail a
    # write (the node stops and restarts from what is durable) and stall (saves left to the
    # background), under the default faults; snapshot writes take long enough for a disk to fill
    # meanwhile.
    "disks": replace(
        SimKnobs(),
        node=replace(SimKnobs().node, snapshot_write_us=30_000, background_save_p=0.05),
        nemesis=NemesisKnobs(weights={**NemesisKnobs().weights, "fill_disk": 3, "fail_write": 1}),
    ),
    # RocketMQ ACL on every node (_simacl): brokers and admins sign, each node runs rmqc serve's gate,
    # and an intruder sends forged requests (unsigned, unknown key, wrong secret, altered after
    # signing, or not an admin's) that must be refused, under the default faults.
    "acl": replace(SimKnobs(), acl=AclKnobs()),
}


@dataclass(frozen=True, slots=True)
class Mutant:
    """A known bug put back into shipped code: each (owner, attribute) is replaced for the run (by a
    broken function, or a broken table). `profile`: the profile where it shows (used unless
    --profile names another)."""

    patches: tuple[tuple[object, str, object], ...]
    profile: str = "default"


def _choose_ignoring_sync_state_set(group: BrokerGroup, *, unclean: bool, preferred: int | None,
                                    is_alive: Callable[[int], bool], live_info: Callable[[int], object]) -> int | None:
    """The election policy with every registered replica as a candidate, in or out of the set."""
    return _choose_within(group.replicas.keys(), group.master_id, preferred, is_alive, live_info)  # type: ignore[arg-type]


def _broker_addrs_as_claimed(self: NamesrvState, broker_name: str, group: BrokerGroup | None) -> dict[int, str]:
    """A route's brokerAddrs by the ids the brokers claim (Java's NameServer), without the
    controller's say: a broker that still believes it is master lists itself as brokerId 0."""
    return {r.broker_id: r.address for r in self.registrations_of(broker_name)}


_check_alter = state_module.check_alter_sync_state_set


def _check_alter_without_sss_epoch(group: BrokerGroup | None, master_id: int, master_epoch: int,
                                   sync_state_set_epoch: int, new_set: frozenset[int],
                                   is_alive: Callable[[int], bool] | None = None) -> tuple[object, int | None]:
    """1001's fencing without the syncStateSetEpoch: any epoch the master sends is taken as current."""
    current = group.sync_state_set_epoch if group is not None else sync_state_set_epoch
    return _check_alter(group, master_id, master_epoch, current, new_set, is_alive)


def _apply_then_persist(self: Driver, ready: Ready, snapshot: Snapshot | None) -> bool:
    """The Ready handled with apply (and so the answers) before the save of the same Ready."""
    if snapshot is not None:
        self._install_snapshot(snapshot)
    self._apply_committed(ready)
    if not self._persist(ready.hard_state, ready.entries, snapshot):
        return False
    self._send(ready.persist_messages)
    return True


def _take_early_with_acks(self: RawNode) -> tuple[tuple[Message, ...], tuple[ReadState, ...]]:
    """While a save goes on in the background, the acknowledgements and votes it makes true leave
    too, as if it had ended: a node that then loses power has acknowledged what it never wrote."""
    r = self.raft
    messages, read_states = (*r.msgs, *r.msgs_after_persist), tuple(r.read_states)
    r.msgs.clear()
    r.msgs_after_persist.clear()
    r.read_states.clear()
    return messages, read_states


def _read_entry_as_normal(reader: Any) -> Entry:
    """The peer codec's entry decoder with a broken type table: every entry arrives NORMAL."""
    index, term, _type, length = reader.struct(codec_module._ENTRY_HEAD)
    return Entry(index, term, EntryType.NORMAL, reader.take(length))


# The same broken table for the codec's plain path (_decode_plain_batch), which reads most batches.
_ENTRY_TYPES_ALL_NORMAL = dict.fromkeys((entry_type.value for entry_type in EntryType), EntryType.NORMAL)


# name -> the bug: each was really shipped once, or is the classic bug of that code path.
MUTANTS: dict[str, Mutant] = {
    "takeover-without-lease-wait": Mutant(((RaftCore, "_takeover_wait_ticks", lambda self: 0),),
                                          "reject-partition"),
    "elect-outside-sss": Mutant(((processor_module, "choose_master", _choose_ignoring_sync_state_set),)),
    # shows where masters change their SyncStateSets every 10 ms (a 1001 racing the master's previous
    # one): lease-drift's and reject-partition's brokers (first caught at seeds 0 and 2; by default's
    # 1001 every 40 ms, not before seed 58)
    "skip-sss-epoch-check": Mutant(((state_module, "check_alter_sync_state_set", _check_alter_without_sss_epoch),
                                    (processor_module, "check_alter_sync_state_set", _check_alter_without_sss_epoch)),
                                   "lease-drift"),
    "apply-before-persist": Mutant(((Driver, "_persist_then_apply", _apply_then_persist),)),
    "stale-read-as-linearizable": Mutant(((ReadPath, "_read_index_reached", lambda self, index: True),)),
    "two-pending-changes": Mutant(((RaftCore, "conf_change_pending", lambda self: False),
                                   (Membership, "_refuse_if_pending", lambda self: None)), "members"),
    "lease-ignores-drift": Mutant(
        ((core_module, "lease_duration_ticks", lambda lease_ticks, drift_ticks: lease_ticks),), "lease-drift"),
    # a replay that stops at the first bad record and serves what it read: the storage opens the
    # surviving prefix (or nothing) without recording a repair, so the node votes at once
    "repair-without-fence": Mutant(((MemoryStorage, "begin_repair", lambda self, reason: None),), "corruption"),
    # every deadline of the replica (ticks, so elections and leases; request, forward, transfer and
    # liveness deadlines) read off the wall clock, as a shell calling time.time() would: a stepped
    # or drifting wall clock stretches a leader's lease past the others' election timeout. The
    # simulated node's clock is the replica's only: its monotonic reading becomes the wall's.
    "deadlines-on-wall-clock": Mutant(((SimClock, "monotonic_ms", lambda self: self.wall_ms()),), "lease-drift"),
    # the NameServer without fencing: routes name as master whichever registration claims id 0
    "route-master-unfenced": Mutant(((NamesrvState, "broker_addrs", _broker_addrs_as_claimed),)),
    # a node's route cache kept when a broker name's registrations or controller group change
    "route-cache-never-dropped": Mutant(((NamesrvState, "forget_broker_name", lambda self, broker_name: None),)),
    # the peer codec decoding every entry's type as NORMAL (a broken enum table): a follower never
    # applies a membership change it receives (only the simulator's bytes run the codec)
    "codec-loses-entry-type": Mutant(((codec_module, "_read_entry", _read_entry_as_normal),
                                      (codec_module, "_ENTRY_TYPES", _ENTRY_TYPES_ALL_NORMAL))),
    # acknowledging appends (and granting votes) before the background save that holds them ends
    "acks-before-background-save": Mutant(((RawNode, "take_early", _take_early_with_acks),), "disks"),
    # the ACL's signature check accepting any signature: an intruder with the admin's key and a
    # wrong secret, or an altered request, gets through (only the simulator's ACL profile shows it)
    "acl-accepts-any-signature": Mutant(((SigningKey, "matches", lambda self, request: True),), "acl"),
}


@contextlib.contextmanager
def mutant(name: str | None) -> Iterator[None]:
    """Run the block with the named mutant in place (None: the real code); always restored."""
    if name is None:
        yield
        return
    patches = MUTANTS[name].patches
    originals = [vars(owner)[attribute] for owner, attribute, _ in patches]
    for owner, attribute, broken in patches:
        setattr(owner, attribute, broken)
    try:
        yield
    finally:
        for (owner, attribute, _), original in zip(patches, originals, strict=True):
            setattr(owner, attribute, original)


@dataclass(slots=True)
class SimSummary:
    seeds: int = 0
    violations: int = 0
    ops: int = 0
    sim_seconds: float = 0.0
    failing: list[SeedResult] | None = None
    counts: dict[str, int] | None = None

    def as_json(self, wall_seconds: float) -> str:
        counts = self.counts or {}
        return json.dumps(
            {
                "seeds": self.seeds,
                "violations": self.violations,
                "ops": self.ops,
                "controller": {what: counts.get(f"controller_{what}", 0)
                               for what in ("elections", "notifications", "broker_requests")},
                "sim_seconds": round(self.sim_seconds, 3),
                "wall_seconds": round(wall_seconds, 3),
            }
        )


def nodes_for_seed(seed: int, nodes: int | None) -> int:
    """A fixed node count, or 3 and 5 alternating by seed."""
    return nodes if nodes is not None else (3 if seed % 2 == 0 else 5)


def run_seeds(
    seeds: Iterable[int],
    nodes: int | None = None,
    knobs: SimKnobs | None = None,
    on_failure: Callable[[SeedResult], None] | None = None,
    on_progress: Callable[[SimSummary], None] | None = None,
) -> SimSummary:
    base = knobs or SimKnobs()
    summary = SimSummary(failing=[], counts={})
    for seed in seeds:
        result = _run_one(seed, replace(base, nodes=nodes_for_seed(seed, nodes)))
        summary.seeds += 1
        summary.ops += result.ops
        summary.sim_seconds += result.sim_seconds
        assert summary.counts is not None
        for what, n in result.counts.items():
            summary.counts[what] = summary.counts.get(what, 0) + n
        if not result.ok:
            summary.violations += 1
            assert summary.failing is not None
            summary.failing.append(result)
            if on_failure is not None:
                on_failure(result)
        if on_progress is not None:
            on_progress(summary)
    return summary


def _run_one(seed: int, knobs: SimKnobs) -> SeedResult:
    """One seed; an unexpected exception fails that seed (with its message) instead of the batch."""
    try:
        return run_seed(seed, knobs)
    except Exception as exc:  # reported as this seed's failure, never swallowed
        return SeedResult(seed, knobs.nodes, [f"crashed: {type(exc).__name__}: {exc}"], 0, 0.0, [],
                          ControllerHistory(), {})


def describe_failure(result: SeedResult) -> str:
    lines = [f"seed {result.seed} ({result.nodes} nodes) FAILED: {result.violations[0]}"]
    lines += [f"  {line}" for line in result.trace]
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rmqc.testing.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--nodes", type=int, choices=(3, 5), default=None,
                        help="cluster size (default: 3 and 5 alternating by seed)")
    parser.add_argument("--seed", type=int, default=None, help="replay one seed and print its trace")
    parser.add_argument("--progress-every", type=int, default=0, metavar="K",
                        help="also print the running totals to stderr every K seeds")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="faults and load of each run (default: the mutant's, else every fault on the "
                             "controller with brokers and admins)")
    parser.add_argument("--mutant", choices=sorted(MUTANTS), default=None,
                        help="put a known bug back into shipped code (the checkers must catch it)")
    parser.add_argument("--list-mutants", action="store_true", help="print the mutants' names, one a line")
    return parser.parse_args(argv)


def _replay(seed: int, nodes: int | None, knobs: SimKnobs) -> SimSummary:
    result = run_seed(seed, replace(knobs, nodes=nodes_for_seed(seed, nodes)))
    print(describe_failure(result) if not result.ok else "\n".join(result.trace))
    return SimSummary(1, 0 if result.ok else 1, result.ops, result.sim_seconds, [], result.counts)


def _expected_alarm(record: logging.LogRecord) -> bool:
    return "ALARM disk full" not in str(record.msg)


@contextlib.contextmanager
def _expected_warnings_quiet() -> Iterator[None]:
    """The replica warns about stalls and slow saves: under simulated pauses those are the point; so
    is the disk-full alarm under a simulated full disk (counted in the summary instead). Restored
    on the way out: `main` also runs inside other programs (the test suite), whose later checks of
    rmqc's warnings must still see them."""
    rmqc_log, replica_log = logging.getLogger("rmqc"), logging.getLogger("rmqc.replica")
    level = rmqc_log.level
    rmqc_log.setLevel(logging.ERROR)
    replica_log.addFilter(_expected_alarm)
    try:
        yield
    finally:
        replica_log.removeFilter(_expected_alarm)
        rmqc_log.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    with _expected_warnings_quiet():
        return _main(_parse(argv))


def _main(args: argparse.Namespace) -> int:
    if args.list_mutants:
        print("\n".join(sorted(MUTANTS)))
        return 0
    profile = PROFILES[args.profile or (MUTANTS[args.mutant].profile if args.mutant else "default")]
    from ._wallclock import wall_seconds  # the only real clock, and only in the command line

    started = wall_seconds()

    def progress(running: SimSummary) -> None:
        if args.progress_every and running.seeds % args.progress_every == 0:
            print(running.as_json(wall_seconds() - started), file=sys.stderr, flush=True)

    with mutant(args.mutant):
        if args.seed is not None:
            summary = _replay(args.seed, args.nodes, profile)
        else:
            summary = run_seeds(
                range(args.start, args.start + args.seeds),
                args.nodes,
                profile,
                on_failure=lambda result: print(describe_failure(result), flush=True),
                on_progress=progress,
            )
    if summary.counts:
        print("events: " + ", ".join(f"{what}={n}" for what, n in sorted(summary.counts.items())))
    print(summary.as_json(wall_seconds() - started), flush=True)
    return 1 if summary.violations else 0


if __name__ == "__main__":
    sys.exit(main())
