"""Controller-level invariants, on top of the Raft ones of `_simcheck`.

The nodes report every applied entry's `ApplyResult`s (`on_apply`). State-machine safety
(`_simcheck`) already proves that every node applies the same commands and reaches the same state
at each index, so the first apply of each index, in index order, is THE committed history of the
controller: the checks below read that stream, with the virtual time each index was first applied
(a lower bound of when its effect was visible to anyone).

After every apply:
- at most one master per broker group per masterEpoch (a group removed and created again starts a
  new generation, whose epochs start again);
- masterEpoch and syncStateSetEpoch never go down;
- an elected master is in the SyncStateSet it was elected from, unless the election was unclean
  (or it is the group's first election, which takes the requested id as is, spec 3.7 step 2);
- a 1001 whose masterBrokerId, masterEpoch or syncStateSetEpoch is not the group's is never applied.

At the end, against the history of the brokers and admins (`_simhistory`):
- every acknowledged 1013 id is still the broker's (unless an admin cleaned it) and no id was given
  to two brokers; every acknowledged 1001 got exactly the epoch after the one it sent;
- every running broker holds the group's master at the end if it polled its group (1004,
  linearizable) since that master was elected, and never a masterEpoch below the newest 1008 it
  received (since it last started);
- linearizable and lease reads: a read never returns a group state older than one first applied
  (anywhere) before the read was sent; stale reads never go back in time on one node, in the order
  it served them (within one incarnation: a restarted node replays from its snapshot).

The NameServer's commands (routes) change no broker group: they go to `_simroute_check`, which
checks the route answers (105) against the same stream.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rmqc.fsm import AlterSyncStateSet, ApplyResult, BrokerGroup, CleanBrokerData, ElectMaster, NamesrvCommand

from ._simhistory import LEASE, LINEARIZABLE, STALE, ControllerHistory, GroupView, ReadRecord
from ._simroute_check import RouteChecker


def view_of(group: BrokerGroup) -> GroupView:
    return (group.master_id, group.master_epoch, group.sync_state_set_epoch, tuple(sorted(group.sync_state_set)))


@dataclass(slots=True)
class _GroupLine:
    """One group's committed states in order, with the first-apply time of each."""

    views: list[GroupView] = field(default_factory=list)
    at_us: list[int] = field(default_factory=list)
    generation: int = 0  # the index that created the group (last time)

    def add(self, view: GroupView, at_us: int) -> None:
        if not self.views or self.views[-1] != view:
            self.views.append(view)
            self.at_us.append(at_us)


@dataclass(slots=True)
class ControllerChecker:
    violations: list[str] = field(default_factory=list)
    applied_index: int = 0  # the committed stream: highest index seen applied anywhere
    groups: dict[str, BrokerGroup] = field(default_factory=dict)  # the committed state at applied_index
    lines: dict[str, _GroupLine] = field(default_factory=dict)
    master_of_epoch: dict[tuple[str, int, int], int] = field(default_factory=dict)
    cleaned: set[tuple[str, int]] = field(default_factory=set)
    elections: int = 0
    last_election_us: dict[str, int] = field(default_factory=dict)
    brokers_checked: int = 0  # running brokers the end check compared with their group's master
    routes: RouteChecker | None = None
    # with ACL on: where the intruders send from; no command of theirs may ever be applied
    refused_addresses: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.routes = RouteChecker(self.violations)

    def fail(self, what: str) -> None:
        self.violations.append(what)

    @property
    def ok(self) -> bool:
        return not self.violations

    # -- the committed stream ---------------------------------------------------------------------
    def on_apply(self, index: int, results: Sequence[ApplyResult], now_us: int) -> None:
        """A node applied entry `index` with these results (only the first apply of an index counts)."""
        if index <= self.applied_index:
            return
        self.applied_index = index
        assert self.routes is not None
        for result in results:
            name = result.command.broker_name
            if self.refused_addresses:
                self._check_origin(index, result)
            if isinstance(result.command, NamesrvCommand):
                self.routes.on_namesrv(index, result, self.groups.get(name) if name is not None else None)
                continue
            self._check_result(index, result, now_us)
            if result.ok and name is not None:  # None: a 1009, no broker group
                self._record(index, name, result, now_us)
                self.routes.on_group(index, name, self.groups.get(name), now_us)

    def _check_origin(self, index: int, result: ApplyResult) -> None:
        origin = result.command.origin
        if origin is not None and origin.address in self.refused_addresses:
            self.fail(f"acl: index {index} applied {type(result.command).__name__} ({result.status.name}) from "
                      f"{origin.address} (key {origin.access_key}), an intruder whose every request the ACL "
                      f"must refuse")

    def _record(self, index: int, name: str, result: ApplyResult, now_us: int) -> None:
        line = self.lines.setdefault(name, _GroupLine())
        if result.before is None and result.after is not None:
            line.generation = index
        if isinstance(result.command, CleanBrokerData):  # a group cleaned of its last id goes too
            for broker_id in result.command.broker_ids or tuple(result.before.replicas if result.before else ()):
                self.cleaned.add((name, broker_id))
        if result.after is None:
            self.groups.pop(name, None)
            return
        self.groups[name] = result.after
        line.add(view_of(result.after), now_us)

    def _check_result(self, index: int, result: ApplyResult, now_us: int) -> None:
        before, after, command = result.before, result.after, result.command
        if not result.ok or after is None:
            return
        name = command.broker_name
        if name is None:
            return
        if before is not None and (after.master_epoch < before.master_epoch
                                   or after.sync_state_set_epoch < before.sync_state_set_epoch):
            self.fail(f"epochs went down in {name} at index {index}: {view_of(before)} -> {view_of(after)}")
        if after.master_id is not None:
            generation = index if before is None else self.lines.get(name, _GroupLine()).generation
            key = (name, generation, after.master_epoch)
            holder = self.master_of_epoch.setdefault(key, after.master_id)
            if holder != after.master_id:
                self.fail(f"two masters of {name} in masterEpoch {after.master_epoch}: {holder} and "
                          f"{after.master_id} (index {index})")
        if isinstance(command, ElectMaster):
            self._check_election(index, command, before, after, now_us)
        elif isinstance(command, AlterSyncStateSet) and before is not None:
            fenced = (before.master_id, before.master_epoch, before.sync_state_set_epoch)
            sent = (command.master_id, command.expected_master_epoch, command.expected_sync_state_set_epoch)
            if fenced != sent:
                self.fail(f"stale 1001 applied to {name} at index {index}: sent (master, masterEpoch, "
                          f"syncStateSetEpoch) {sent}, the group had {fenced}")

    def _check_election(self, index: int, command: ElectMaster, before: BrokerGroup | None, after: BrokerGroup,
                        now_us: int) -> None:
        if command.candidate is None or before is None:
            return
        self.elections += 1
        self.last_election_us[command.broker_name] = now_us
        first = before.master_epoch == 0 and command.requester_id is not None  # spec 3.7 step 2
        if not (first or command.unclean or command.candidate in before.sync_state_set):
            self.fail(f"{command.broker_name}: {command.trigger} election at index {index} made {command.candidate} "
                      f"master, outside the SyncStateSet {sorted(before.sync_state_set)} (clean election)")

    # -- the end of a seed --------------------------------------------------------------------------
    def finish(self, history: ControllerHistory, brokers: Iterable[BrokerBelief]) -> None:
        self._check_ids(history)
        self._check_alters(history)
        self._check_reads(history.reads)
        self._check_brokers(history, brokers)
        if self.ok:
            assert self.routes is not None
            self.routes.finish(history.routes)

    def _check_ids(self, history: ControllerHistory) -> None:
        owners: dict[tuple[str, int], str] = {}
        for grant in history.grants:
            key = (grant.group, grant.broker_id)
            if key in self.cleaned:
                continue
            other = owners.setdefault(key, grant.check_code)
            if other != grant.check_code:
                self.fail(f"id {grant.broker_id} of {grant.group} given to two brokers: {other} and {grant.check_code}")
                return
            group = self.groups.get(grant.group)
            replica = None if group is None else group.replicas.get(grant.broker_id)
            if replica is None or replica.register_check_code != grant.check_code:
                self.fail(f"acknowledged id {grant.broker_id} of {grant.group} ({grant.check_code}) is lost: "
                          f"the committed state has {replica}")
                return

    def _check_alters(self, history: ControllerHistory) -> None:
        for ack in history.alters:
            if ack.new_sync_state_set_epoch != ack.sync_state_set_epoch + 1:
                self.fail(f"1001 of {ack.group} sent syncStateSetEpoch {ack.sync_state_set_epoch} and was "
                          f"acknowledged with {ack.new_sync_state_set_epoch}")
                return

    def _check_reads(self, reads: Sequence[ReadRecord]) -> None:
        last_stale: dict[tuple[str, int, str], tuple[int, ReadRecord]] = {}
        for read in sorted(reads, key=lambda r: (r.served_us, r.invoke_us)):
            line = self.lines.get(read.group)
            position = None if line is None else _position(line, read.view, read.served_us)
            if line is None or position is None:
                self.fail(f"{read.level} read of {read.group} on {read.node} returned {read.view}, never committed")
                return
            if read.level in (LINEARIZABLE, LEASE):
                newer = position + 1
                if newer < len(line.views) and line.at_us[newer] < read.invoke_us:
                    self.fail(f"{read.level} read of {read.group} on {read.node} sent at "
                              f"{read.invoke_us / 1000:.1f} ms returned {read.view}, but {line.views[newer]} was "
                              f"applied at {line.at_us[newer] / 1000:.1f} ms")
                    return
            elif read.level == STALE:
                key = (read.node, read.incarnation, read.group)
                previous = last_stale.get(key)
                if previous is not None and position < previous[0]:
                    self.fail(f"stale reads of {read.group} on {read.node} went back in time: {previous[1].view} "
                              f"then {read.view}")
                    return
                last_stale[key] = (position, read)

    def _check_brokers(self, history: ControllerHistory, brokers: Iterable[BrokerBelief]) -> None:
        """A broker learns its group's master from the 1008 the controller sends it (oneway, as in
        RocketMQ: lost with its packet, and never sent again) or from its own 1004 poll, so what the
        protocol promises is: once a poll sent after the master's election is answered, the broker
        holds that master (the poll is a linearizable read). That is checked here, and is a safety
        property: a stale poll answer, or a broker that ignores the answer, fails it. An earlier
        form demanded the master of every broker that had "had time" after the network healed; it
        failed at seed 6174 on a broker whose polls all timed out in the quiet phase while its 1008
        was lost, which rmqc cannot prevent (a Java broker then learns the master at its next poll).
        Whether brokers keep learning masters at all is measured by the counts instead
        (`brokers_checked`, controller_notifications)."""
        for broker in brokers:
            if not broker.running or broker.broker_id is None:
                continue
            notified = max((n.master_epoch for n in history.notifications
                            if n.broker == broker.name and n.at_us >= broker.running_since_us), default=0)
            if broker.master_epoch < notified:
                self.fail(f"broker {broker.name} holds masterEpoch {broker.master_epoch} after a 1008 of "
                          f"masterEpoch {notified}")
                return
            group = self.groups.get(broker.group)
            if group is None or group.master_id is None or broker.polled_us is None:
                continue
            if broker.polled_us <= self.last_election_us.get(broker.group, 0):
                continue  # it has not asked since the last election (its 1008 may be lost)
            self.brokers_checked += 1
            if (broker.master_id, broker.master_epoch) != (group.master_id, group.master_epoch):
                self.fail(f"broker {broker.name} holds master {broker.master_id} of masterEpoch {broker.master_epoch} "
                          f"at the end, after a poll sent once the controller had {group.master_id} of "
                          f"{group.master_epoch}")
                return


@dataclass(frozen=True, slots=True)
class BrokerBelief:
    """What the end-of-seed check needs to know of one simulated broker."""

    name: str
    group: str
    running: bool
    running_since_us: int
    polled_us: int | None  # when it sent the last 1004 of its group answered with success (this run)
    broker_id: int | None
    master_id: int | None
    master_epoch: int


def _position(line: _GroupLine, view: GroupView, served_us: int) -> int | None:
    """The latest committed position holding `view` that was applied by `served_us`."""
    last = bisect.bisect_right(line.at_us, served_us)
    for position in range(last - 1, -1, -1):
        if line.views[position] == view:
            return position
    return None
