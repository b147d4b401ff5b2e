"""Simulated admin clients (mqadmin) as a pure model: designated elections (1002 with
designateElect), cleaning broker ids (1011) and runtime configuration (1009), one request at a
time, on the node believed to lead. Like the brokers (`_simbrokers`): `step(now_us)` may send, and
`on_answer` takes the answer or a loss. Acknowledged designated elections go into the history."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, make_request

from ._simbrokers import CLUSTER, Answer, Outgoing, master_of
from ._simhistory import ControllerHistory, ElectAck

# 1009 updates: live keys only (read at every election or notification), values a run may flip.
CONFIG_UPDATES = (
    b"notifyBrokerRoleChanged=false\n",
    b"notifyBrokerRoleChanged=true\n",
    b"electMasterMaxRetryCount=1\n",
    b"electMasterMaxRetryCount=3\n",
    b"enableElectUncleanMaster=true\n",
    b"enableElectUncleanMaster=false\n",
)
ACTIONS = ("elect", "clean", "config")


@dataclass(frozen=True, slots=True)
class AdminKnobs:
    count: int = 1
    think_min_us: int = 50_000
    think_max_us: int = 200_000
    timeout_us: int = 150_000
    weights: tuple[int, int, int] = (6, 2, 1)  # elect, clean, config
    follow_hint_p: float = 1.0  # on the node believed to lead, else on any node


class SimAdminClient:
    def __init__(self, name: str, node_ids: Sequence[str], groups: Sequence[str], max_id: int,
                 rng: random.Random, knobs: AdminKnobs, history: ControllerHistory) -> None:
        self.name = name
        self.node_ids = tuple(node_ids)
        self.groups = tuple(groups)
        self.max_id = max_id  # ids are guessed in 1..max_id, as an operator types them
        self.rng = rng
        self.knobs = knobs
        self.history = history
        self.leader_hint: str | None = None
        self.pending: tuple[int, str, int] | None = None  # (opaque, group, sent_us)
        self.next_us = knobs.think_min_us
        self._opaque = 0

    def step(self, now_us: int) -> list[Outgoing]:
        if self.pending is not None and now_us - self.pending[2] >= self.knobs.timeout_us:
            self.on_answer(self.pending[0], None, now_us)
        if self.pending is not None or now_us < self.next_us:
            return []
        self.next_us = now_us + self.rng.randint(self.knobs.think_min_us, self.knobs.think_max_us)
        action = self.rng.choices(ACTIONS, weights=self.knobs.weights)[0]
        group = self.rng.choice(self.groups)
        broker_id = self.rng.randint(1, self.max_id)
        self._opaque += 1
        self.pending = (self._opaque, group, now_us)
        self.history.requests += 1
        hinted = self.leader_hint is not None and self.rng.random() < self.knobs.follow_hint_p
        node = self.leader_hint if hinted and self.leader_hint is not None else self.rng.choice(self.node_ids)
        return [(node, self._request(action, group, broker_id))]

    def _request(self, action: str, group: str, broker_id: int) -> RemotingCommand:
        if action == "elect":
            ext = {"clusterName": CLUSTER, "brokerName": group, "brokerId": broker_id, "designateElect": True}
            return make_request(RequestCode.CONTROLLER_ELECT_MASTER, self._opaque, ext)
        if action == "clean":
            ext = {"clusterName": CLUSTER, "brokerName": group, "brokerControllerIdsToClean": str(broker_id),
                   "isCleanLivingBroker": False}
            return make_request(RequestCode.CLEAN_BROKER_DATA, self._opaque, ext)
        body = self.rng.choice(CONFIG_UPDATES)
        return make_request(RequestCode.UPDATE_CONTROLLER_CONFIG, self._opaque, {}, body)

    def on_answer(self, opaque: int, answer: Answer | None, now_us: int) -> None:
        if self.pending is None or self.pending[0] != opaque:
            return
        group = self.pending[1]
        self.pending = None
        if answer is None:
            self.leader_hint = None
            return
        self.leader_hint = answer.leader_hint
        response = answer.response
        master = master_of(response)
        if response.code == ResponseCode.SUCCESS and master is not None:
            self.history.add(ElectAck(group, master, int(response.ext("masterEpoch") or 0), now_us))
