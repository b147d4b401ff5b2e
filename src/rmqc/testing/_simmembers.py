"""A simulated operator changing the membership as `rmqc admin members ...` and `transfer-leader`
do: through the shipped request path (RMQC_MEMBERS_*, RMQC_TRANSFER_LEADER), one plan at a time,
one request at a time, following CONTROLLER_NOT_LEADER redirects and retrying what was refused for
now (a change still pending, a learner still catching up, an answer lost or late).

Plans: grow (a new node with an empty disk joins: add, then promote once caught up), shrink
(remove a voter, the leader too), replace (grow, then remove an old voter) and transfer. A node
whose removal was answered is stopped for good (its process ends); so is one the cluster says is
no member any more ("unknown id" to a retried removal). Like the other clients (`_simadmin`):
`step(now_us)` may send, `on_answer` takes the answer or a loss."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqc.remoting import (
    RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE,
    RMQC_TRANSFER_LEADER,
    RemotingCommand,
    ResponseCode,
    make_request,
)

from ._simbrokers import Answer, Outgoing

if TYPE_CHECKING:
    from ._simworld import World

PLANS = ("grow", "shrink", "replace", "transfer")


@dataclass(frozen=True, slots=True)
class MembersKnobs:
    count: int = 2  # operators at once: their changes race, and all but one are refused as pending
    think_min_us: int = 50_000  # between two plans
    think_max_us: int = 150_000
    retry_us: int = 20_000  # before retrying a refused or lost request
    timeout_us: int = 300_000  # an answer later than this counts as lost
    attempts: int = 30  # per request; then the plan is given up (the next one starts from the cluster's state)
    weights: tuple[int, int, int, int] = (3, 2, 3, 2)  # grow, shrink, replace, transfer
    min_voters: int = 3  # shrink keeps at least this many voters
    max_members: int = 7  # grow and replace add no node beyond this


@dataclass(slots=True)
class _Step:
    code: int
    ext: dict[str, str]
    done: Callable[[], None]  # once answered 0 (or its outcome is known to be reached)
    attempts: int = 0


class MembersOperator:
    def __init__(self, name: str, world: World, rng: random.Random, knobs: MembersKnobs) -> None:
        self.name = name
        self.world = world
        self.rng = rng
        self.knobs = knobs
        self.steps: list[_Step] = []
        self.leader_hint: str | None = None
        self.pending: tuple[int, int] | None = None  # (opaque, sent_us)
        self.next_us = knobs.think_min_us
        self.active = True
        self._opaque = 0

    def stop(self) -> None:
        """The quiet phase: no new request (one in flight still gets its answer handled)."""
        self.active = False

    # -- the client contract ------------------------------------------------------------------------
    def step(self, now_us: int) -> list[Outgoing]:
        if self.pending is not None and now_us - self.pending[1] >= self.knobs.timeout_us:
            self.on_answer(self.pending[0], None, now_us)
        if self.pending is not None or now_us < self.next_us or not self.active:
            return []
        if not self.steps:
            self._plan()
            self.next_us = now_us + self.rng.randint(self.knobs.think_min_us, self.knobs.think_max_us)
            if not self.steps:
                return []
        step = self.steps[0]
        step.attempts += 1
        self._opaque += 1
        self.pending = (self._opaque, now_us)
        return [(self._target(), make_request(step.code, self._opaque, step.ext))]

    def on_answer(self, opaque: int, answer: Answer | None, now_us: int) -> None:
        if self.pending is None or self.pending[0] != opaque:
            return
        self.pending = None
        step = self.steps[0]
        response = answer.response if answer is not None else None
        if response is not None and response.code == ResponseCode.SUCCESS:
            self.world.count(f"members_{_NAMES[step.code]}_done")
            self.steps.pop(0)
            step.done()
            return
        self.leader_hint = _redirect(response) or (answer.leader_hint if answer is not None else None)
        if step.code == RMQC_MEMBERS_REMOVE and response is not None and "unknown id" in (response.remark or ""):
            self.steps.pop(0)  # an earlier attempt was applied, its answer lost: the node is gone
            step.done()
        elif step.attempts >= self.knobs.attempts:
            self.world.count("members_plans_given_up")
            self.world.trace(f"{self.name}: gave up {_NAMES[step.code]} {step.ext} after {step.attempts} attempts")
            self.steps.clear()
        elif response is None or response.code != ResponseCode.CONTROLLER_NOT_LEADER:
            self.next_us = now_us + self.knobs.retry_us

    # -- plans --------------------------------------------------------------------------------------
    def _plan(self) -> None:
        leader = self.world.leader()
        if leader is None:
            return
        conf = leader.conf_state
        if conf.learners:  # a learner left by a plan given up: finish its promotion first
            self.steps = [self._promote(sorted(conf.learners)[0])]
            return
        plan = self.rng.choices(PLANS, weights=self.knobs.weights)[0]
        room = len(conf.members) < self.knobs.max_members
        if plan in ("grow", "replace") and room:
            new_id = self.world.start_joiner()
            self.steps = [self._add(new_id), self._promote(new_id)]
            if plan == "replace":
                self.steps.append(self._remove(self.rng.choice(conf.voters)))
        elif plan == "shrink" and len(conf.voters) > self.knobs.min_voters:
            self.steps = [self._remove(self.rng.choice(conf.voters))]
        elif plan == "transfer":
            self.steps = [_Step(RMQC_TRANSFER_LEADER, {}, _nothing)]
        if self.steps:
            self.world.trace(f"{self.name}: {plan}: " + ", ".join(f"{_NAMES[s.code]} {s.ext}" for s in self.steps))

    def _add(self, node_id: str) -> _Step:
        return _Step(RMQC_MEMBERS_ADD, {"id": node_id, "address": self.world.address_of(node_id)}, _nothing)

    def _promote(self, node_id: str) -> _Step:
        return _Step(RMQC_MEMBERS_PROMOTE, {"id": node_id}, _nothing)

    def _remove(self, node_id: str) -> _Step:
        return _Step(RMQC_MEMBERS_REMOVE, {"id": node_id}, lambda: self.world.retire(node_id))

    def _target(self) -> str:
        hint = self.leader_hint
        if hint is not None and hint in self.world.nodes and not self.world.nodes[hint].retired:
            return hint
        return self.rng.choice([n for n in self.world.node_ids if not self.world.nodes[n].retired])


_NAMES = {RMQC_MEMBERS_ADD: "add", RMQC_MEMBERS_PROMOTE: "promote", RMQC_MEMBERS_REMOVE: "remove",
          RMQC_TRANSFER_LEADER: "transfer"}


def _redirect(response: RemotingCommand | None) -> str | None:
    if response is None or response.code != ResponseCode.CONTROLLER_NOT_LEADER:
        return None
    return response.ext("leaderId") or None


def _nothing() -> None:
    pass
