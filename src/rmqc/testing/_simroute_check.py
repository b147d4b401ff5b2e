"""NameServer invariants (docs/namesrv.md), on the controller's committed stream (`_simcontroller_check`)
and the 105 answers the simulated clients received (`_simhistory.RouteRecord`).

The committed stream gives, per broker name, its committed master's address by index (or none:
no group, the controller does not manage the name) and, per topic and broker name, the index
ranges in which the name's queue data must be routed: from a registration (103) applied while
its address was the group's committed master (only those take a topic table, fencing), until the
name's registrations or the topic are removed (an unregistration of any of its brokers ends the
range: the check stays sound without modelling which registration was the last).

Each answer was served at the node's applied index `i`; checked at the end of a seed, each a
named violation:
- route-fencing: a broker name the controller manages lists as brokerId 0 only the master
  committed at `i` (never an uncommitted master, never one deposed before `i`);
- route-stale: a linearizable or lease answer was served at an `i` at or after every change of the
  topic group's master first applied before the request was sent (no stale master);
- route-divergent: every answer for a topic served at the same applied index is the same bytes,
  whichever node served it (the per-node route cache holds only what the state says);
- route-lost: a topic a committed master registered is in every answer served within its range,
  with that broker name's queue data.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rmqc.fsm import ApplyResult, BrokerGroup, DeleteTopicRoute, RegisterBrokerRoute, UnregisterBrokerRoute

from ._simhistory import LEASE, LINEARIZABLE, RouteRecord

UNMANAGED = "<no controller group>"  # a broker name without a group: Java's rules apply, not checked


@dataclass(slots=True)
class _MasterLine:
    """A broker name's committed master address (or UNMANAGED) from each index on."""

    indexes: list[int] = field(default_factory=list)
    addresses: list[str | None] = field(default_factory=list)
    at_us: list[int] = field(default_factory=list)  # first applied anywhere

    def add(self, index: int, address: str | None, at_us: int) -> None:
        if not self.addresses or self.addresses[-1] != address:
            self.indexes.append(index)
            self.addresses.append(address)
            self.at_us.append(at_us)

    def position(self, index: int) -> int:
        """The entry in force at `index` (-1: before the name's group existed)."""
        return bisect.bisect_right(self.indexes, index) - 1


@dataclass(slots=True)
class RouteChecker:
    violations: list[str]
    masters: dict[str, _MasterLine] = field(default_factory=dict)
    # (topic, broker name) -> [first index, index it ended (None: open)] ranges it must be routed in
    required: dict[tuple[str, str], list[list[int | None]]] = field(default_factory=dict)
    routes_checked: int = 0

    def fail(self, what: str) -> None:
        self.violations.append(what)

    # -- the committed stream -------------------------------------------------------------------
    def on_group(self, index: int, name: str, group: BrokerGroup | None, now_us: int) -> None:
        """A controller command left broker name `name`'s group as `group` (None: removed)."""
        address = group.master_address if group is not None else UNMANAGED
        self.masters.setdefault(name, _MasterLine()).add(index, address, now_us)

    def on_namesrv(self, index: int, result: ApplyResult, group: BrokerGroup | None) -> None:
        command = result.command
        if isinstance(command, RegisterBrokerRoute):
            if result.ok and group is not None and group.master_address == command.broker_address:
                for topic, *_ in command.topics:
                    ranges = self.required.setdefault((topic, command.broker_name), [])
                    if not ranges or ranges[-1][1] is not None:
                        ranges.append([index, None])
        elif isinstance(command, UnregisterBrokerRoute):
            self._end(index, lambda topic, name: name == command.broker_name)
        elif isinstance(command, DeleteTopicRoute):
            self._end(index, lambda topic, name: topic == command.topic)

    def _end(self, index: int, which: Callable[[str, str], bool]) -> None:
        """End at `index` the open ranges of the (topic, broker name) pairs `which` picks."""
        for (topic, name), ranges in self.required.items():
            if which(topic, name) and ranges[-1][1] is None:
                ranges[-1][1] = index

    # -- the answers, at the end of a seed ------------------------------------------------------
    def finish(self, routes: Sequence[RouteRecord]) -> None:
        first_answer: dict[tuple[str, int], RouteRecord] = {}
        for route in sorted(routes, key=lambda r: (r.served_us, r.invoke_us)):
            self.routes_checked += 1
            if not (self._fenced(route) and self._fresh(route) and self._same(route, first_answer)
                    and self._kept(route)):
                return

    def _fenced(self, route: RouteRecord) -> bool:
        for name, listed in route.masters:
            line = self.masters.get(name)
            position = -1 if line is None else line.position(route.applied_index)
            if listed is None or line is None or position < 0 or line.addresses[position] == UNMANAGED:
                continue
            if listed != line.addresses[position]:
                self.fail(f"route-fencing: the route of {route.topic} on {route.node} at applied index "
                          f"{route.applied_index} lists {listed} as master (brokerId 0) of {name}; the controller's "
                          f"committed master there is {line.addresses[position]}")
                return False
        return True

    def _fresh(self, route: RouteRecord) -> bool:
        if route.level not in (LINEARIZABLE, LEASE):
            return True
        name = route.topic.split("-", 1)[0]
        line = self.masters.get(name)
        if line is None:
            return True
        newer = line.position(route.applied_index) + 1
        if newer < len(line.indexes) and line.at_us[newer] < route.invoke_us:
            self.fail(f"route-stale: {route.level} route of {route.topic} on {route.node} sent at "
                      f"{route.invoke_us / 1000:.1f} ms was served at applied index {route.applied_index}, but "
                      f"{name}'s master became {line.addresses[newer]} at index {line.indexes[newer]}, applied at "
                      f"{line.at_us[newer] / 1000:.1f} ms")
            return False
        return True

    def _same(self, route: RouteRecord, first_answer: dict[tuple[str, int], RouteRecord]) -> bool:
        first = first_answer.setdefault((route.topic, route.applied_index), route)
        if first.body != route.body:
            self.fail(f"route-divergent: at applied index {route.applied_index} the route of {route.topic} on "
                      f"{route.node} was {route.body!r}, on {first.node} {first.body!r}")
            return False
        return True

    def _kept(self, route: RouteRecord) -> bool:
        name = route.topic.split("-", 1)[0]
        for since, until in self.required.get((route.topic, name), ()):
            assert since is not None
            if since <= route.applied_index and (until is None or route.applied_index < until) \
                    and name not in route.queues:
                self.fail(f"route-lost: {name}'s committed master registered {route.topic} at index {since}; "
                          f"the route on {route.node} at applied index {route.applied_index} has no queue data of "
                          f"{name} ({'no route' if route.body is None else 'queue data of ' + str(route.queues)})")
                return False
        return True
