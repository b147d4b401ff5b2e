"""What each broker of the hold's generator believes, and the two-master episodes that follow from
it. Pure: no sockets, no clocks (the caller passes the time), so a test can feed it answers.

A broker's belief is (masterBrokerId, masterEpoch) of its group as it last learned it; it believes
itself master when that masterBrokerId is its own id. It learns as a RocketMQ 5 broker in
controller mode does from its periodic 1004 (ReplicasManager's metadata sync): an answer changes
the belief only if its masterEpoch is newer than the one held and it names a master. An answer of
the same epoch changes nothing (one epoch has one master); an older one is ignored; a newer one
with no master leaves the belief as it is (the Java broker keeps its role and asks for an election
with 1002, which the generator does not send: such answers are only counted).

Episodes are counted by the simulator's own `TwoMasters` (rmqc.brokersim), so the generator and
`rmqc sim brokers` report the same thing under the same keys: an episode begins when two or more
brokers of one group believe themselves master and ends when at most one does. The group is looked
at whenever a belief of one of its brokers changes, so times are exact to the answer that changed
it (the simulator's are exact to its 200 ms tick).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmqc.brokersim._fleet import TwoMasters

NO_MASTER = 0  # masterBrokerId believed when none is known (broker ids start at 1)


class FleetBeliefs:
    """The beliefs of `replicas` brokers per group, broker `g * replicas + i` having id `i + 1`."""

    def __init__(self, names: list[str], replicas: int = 3) -> None:
        self.names = names
        self.replicas = replicas
        self.master = [NO_MASTER] * (len(names) * replicas)
        self.epoch = [0] * (len(names) * replicas)
        self.two_masters = TwoMasters()
        self.changes = 0  # beliefs changed by an answer (seeding not counted)
        self.answers_without_master = 0  # newer epoch, no master named: belief kept (Java: 1002)
        self.answers_older = 0  # an epoch older than the one held (a node behind another)

    def broker_id(self, broker: int) -> int:
        return broker % self.replicas + 1

    def seed(self, group: int, master_id: int | None, epoch: int, now_ms: int) -> None:
        """Every broker of `group` believes what the set-up's election left (as the 1008 or the
        first poll of a real broker would have told it)."""
        for broker in range(group * self.replicas, (group + 1) * self.replicas):
            self.master[broker] = master_id or NO_MASTER
            self.epoch[broker] = epoch
        self._observe(group, now_ms)

    def learn(self, broker: int, master_id: int | None, epoch: int, now_ms: int) -> bool:
        """A 1004 answer (masterBrokerId, masterEpoch) reached `broker`; True if its belief changed."""
        held = self.epoch[broker]
        if epoch <= held:
            self.answers_older += epoch < held
            return False
        if master_id is None:
            self.answers_without_master += 1
            return False
        self.epoch[broker] = epoch
        if master_id == self.master[broker]:
            return False
        self.master[broker] = master_id
        self.changes += 1
        self._observe(broker // self.replicas, now_ms)
        return True

    def believes_master(self, broker: int) -> bool:
        return self.master[broker] == self.broker_id(broker)

    def masters(self, group: int) -> int:
        """Brokers of `group` that believe themselves master."""
        first = group * self.replicas
        return sum(1 for i in range(self.replicas) if self.master[first + i] == i + 1)

    def _observe(self, group: int, now_ms: int) -> None:
        self.two_masters.observe(self.names[group], self.masters(group), now_ms)

    @property
    def episodes(self) -> int:
        return self.two_masters.episodes

    def longest_ms(self, now_ms: int) -> int:
        """The longest episode, an unfinished one counted up to `now_ms`."""
        return int(self.two_masters.to_json(now_ms)["longestMs"])

    def against(self, controllers: Mapping[str, tuple[str | None, int]]) -> dict[str, Any]:
        """The beliefs against the controllers' (masterBrokerId, masterEpoch) per group name."""
        behind = without = other = 0
        for group, name in enumerate(self.names):
            if name not in controllers:
                continue
            master, epoch = controllers[name]
            first = group * self.replicas
            behind += sum(1 for b in range(first, first + self.replicas) if self.epoch[b] < epoch)
            believed = [b for b in range(first, first + self.replicas) if self.believes_master(b)]
            without += not believed
            other += any(str(self.broker_id(b)) != master for b in believed)
        return {"brokers_behind_controllers": behind, "groups_with_no_broker_believing_master": without,
                "groups_with_a_master_belief_the_controllers_do_not_hold": other}
