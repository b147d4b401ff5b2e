"""RocketMQ ACL in the simulator (SimKnobs.acl: profile "acl", and some seeds of the default one).

With ACL on, every node reads the same plain_acl.yml (`acl_accounts.PLAIN_ACL_YML`: a broker
account and an admin account) and runs `rmqc serve`'s gate on each remoting request it decodes,
before the replica sees it: the node's own decision and counters (`rmqc.acl.RequestGate`, which
`rmqc.node._acl` wraps), with the sender's simulated address as the host. A refused two-way
request is answered NO_PERMISSION there, a refused one-way one dropped; an admitted one reaches
the replica with its origin (the access key, the sender's address, the node), as `rmqc serve`
records it in the log. Brokers sign every request with the broker account, admins and operators
with the admin account, as rmqc's client signs them (`Credentials.sign`).

Intruders (`SimIntruder`, AclKnobs.intruders) send only requests the ACL must refuse, to random
nodes: a designated election (1002), a clean (1011), a configuration change (1009) and one-way
heartbeats (904) of a broker of their own; unsigned, signed with an unknown key, with the admin's
key and a wrong secret, signed by the admin and then altered (a field or the body changed), or
signed by the broker account (not an admin). Checked:
- every answer an intruder gets is NO_PERMISSION with the reason its forgery earns;
- no command of an intruder is ever applied (the committed stream holds no origin of theirs:
  `ControllerChecker.refused_addresses`), so a refused 1002 never shows up as an election;
- at the end, no node's liveness table holds an intruder's broker (its 904s were dropped);
- no node refuses a request an honest client signed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from rmqc.acl import AclRules, Allowed, Credentials, Refusal, RequestGate, parse_plain_acl
from rmqc.client import heartbeat_ext
from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand, RequestCode, ResponseCode, make_request
from rmqc.replica import client_origin

from ._simbrokers import CLUSTER, Answer, Outgoing
from .acl_accounts import ADMIN, BROKER, PLAIN_ACL_YML

if TYPE_CHECKING:
    from ._simreplica import Remote, ReplicaSimNode
    from ._simworld import World


@dataclass(frozen=True, slots=True)
class AclKnobs:
    share: float = 1.0  # of the seeds that run with ACL on (drawn per seed, from a random.Random of its own)
    intruders: int = 1
    think_min_us: int = 5_000  # an intruder's pause between two requests
    think_max_us: int = 40_000


# SimKnobs' default: a quarter of the seeds with ACL on, no intruder
HONEST_ACL = AclKnobs(share=0.25, intruders=0)
# How an intruder gets its request refused, and the refusal that must come back.
FORGERIES: dict[str, Refusal] = {
    "unsigned": Refusal.ADDRESS_NOT_ALLOWED,
    "unknown_key": Refusal.UNKNOWN_ACCESS_KEY,
    "wrong_secret": Refusal.BAD_SIGNATURE,
    "altered": Refusal.BAD_SIGNATURE,
    "not_admin": Refusal.NOT_ADMIN,
}
REQUESTS = ("elect", "clean", "config", "heartbeat")
UNKNOWN = Credentials("intruder-key", "intruder-secret")
WRONG_SECRET = Credentials(ADMIN.access_key, "not-the-admin-secret")
# The field an altered request has changed after it was signed (a 1009's body instead)
ALTERED = ("brokerId", "brokerControllerIdsToClean")
# The broker id an intruder's 904s claim (in a real group; no real broker has it)
INTRUDER_BROKER_ID = 99
CLIENT_PORT = 40_000


@cache
def sim_acl_rules() -> AclRules:
    return parse_plain_acl(PLAIN_ACL_YML)


def acl_on(knobs: AclKnobs, seed: int) -> bool:
    return knobs.share >= 1 or random.Random(f"{seed}/acl").random() < knobs.share


class SimIntruder:
    """A hostile client: one forged request every think time, to a random node; answers checked."""

    def __init__(self, name: str, address: str, node_ids: Sequence[str], groups: Sequence[str],
                 rng: random.Random, knobs: AclKnobs, fail: Callable[[str], None],
                 count: Callable[[str], None]) -> None:
        self.name = name
        self.address = address  # host:port of its connections, as the nodes see it
        self.broker_address = f"{address.rsplit(':', 1)[0]}:10911"  # the broker its 904s claim to be
        self.node_ids = tuple(node_ids)
        self.groups = tuple(groups)
        self.rng = rng
        self.knobs = knobs
        self._fail = fail
        self._count = count
        self.expected: dict[int, tuple[str, Refusal]] = {}  # opaque -> (what was sent, its refusal)
        self.next_us = 0
        self._opaque = 0

    def step(self, now_us: int) -> list[Outgoing]:
        if now_us < self.next_us:
            return []
        self.next_us = now_us + self.rng.randint(self.knobs.think_min_us, self.knobs.think_max_us)
        what = self.rng.choice(REQUESTS)
        forgeries = sorted(FORGERIES) if what != "heartbeat" else sorted(set(FORGERIES) - {"not_admin"})
        forgery = self.rng.choice(forgeries)
        self._opaque += 1
        request = self._forge(self._request(what), forgery)
        if not request.is_oneway:
            self.expected[self._opaque] = (f"{what} ({forgery})", FORGERIES[forgery])
        self._count("acl_intruder_oneway" if request.is_oneway else "acl_intruder_requests")
        return [(self.rng.choice(self.node_ids), request)]

    def _request(self, what: str) -> RemotingCommand:
        group = self.rng.choice(self.groups)
        broker_id = self.rng.randint(1, 3)
        if what == "elect":
            ext: dict[str, object] = {"clusterName": CLUSTER, "brokerName": group, "brokerId": broker_id,
                                      "designateElect": True}
            return make_request(RequestCode.CONTROLLER_ELECT_MASTER, self._opaque, ext)
        if what == "clean":
            ext = {"clusterName": CLUSTER, "brokerName": group, "brokerControllerIdsToClean": str(broker_id),
                   "isCleanLivingBroker": True}
            return make_request(RequestCode.CLEAN_BROKER_DATA, self._opaque, ext)
        if what == "config":
            return make_request(RequestCode.UPDATE_CONTROLLER_CONFIG, self._opaque, {},
                                b"enableElectUncleanMaster=true\n")
        ext = heartbeat_ext(CLUSTER, group, INTRUDER_BROKER_ID, self.broker_address, heartbeat_timeout_ms=60_000)
        return make_request(RequestCode.BROKER_HEARTBEAT, self._opaque, ext, oneway=True)

    def _forge(self, request: RemotingCommand, forgery: str) -> RemotingCommand:
        if forgery == "unknown_key":
            UNKNOWN.sign(request)
        elif forgery == "wrong_secret":
            WRONG_SECRET.sign(request)
        elif forgery == "not_admin":
            BROKER.sign(request)
        elif forgery == "altered":  # signed by its account, then changed on the way
            (BROKER if request.is_oneway else ADMIN).sign(request)
            if request.body is not None:
                request.body = b"enableElectUncleanMaster=false\n"
            else:
                fields = dict(request.ext_fields or {})
                name = next(name for name in ALTERED if name in fields)
                fields[name] = str(int(fields[name]) + 1)
                request.ext_fields = fields
        return request

    def on_answer(self, opaque: int, answer: Answer) -> None:
        response = answer.response
        sent = self.expected.pop(opaque, None)
        if sent is None:
            self._fail(f"acl: {self.name} got an answer to a request it never sent (opaque {opaque})")
            return
        what, refusal = sent
        remark = f"NO_PERMISSION: {refusal.value}"
        if response.code != ResponseCode.NO_PERMISSION or response.remark != remark:
            self._fail(f"acl: {self.name}'s {what} to {answer.node} was answered {response.code} "
                       f"({response.remark}), not NO_PERMISSION ({refusal.value})")
            return
        self._count("acl_intruder_refusals_answered")


class SimAcl:
    """The ACL of one run: the rules, each node's gate, what each client signs with and where it
    sends from, and the intruders."""

    def __init__(self, world: World, knobs: AclKnobs) -> None:
        self.world = world
        self.knobs = knobs
        self.rules = sim_acl_rules()
        self.gates: dict[str, RequestGate] = {}  # node -> its gate (its counters outlive restarts)
        self.admitted = 0
        self.credentials: dict[str, Credentials] = {}
        self.addresses: dict[str, str] = {}  # sender -> host:port of its connections
        for number, name in enumerate(sorted(world.brokers)):
            self._client(name, f"10.0.0.{number + 1}", BROKER)
        for number, name in enumerate(sorted(world.admins)):
            self._client(name, f"10.1.0.{number + 1}", ADMIN)
        for number, name in enumerate(sorted(world.operators)):
            self._client(name, f"10.2.0.{number + 1}", ADMIN)
        self.intruders: dict[str, SimIntruder] = {}
        groups = sorted({broker.group for broker in world.brokers.values()})
        for number in range(knobs.intruders):
            name = f"intruder{number}"
            self.addresses[name] = f"10.9.0.{number + 1}:{CLIENT_PORT}"
            self.intruders[name] = SimIntruder(name, self.addresses[name], world.initial_ids, groups,
                                               random.Random(f"{world.seed}/{name}"), knobs,
                                               world.checker.fail, world.count)

    def _client(self, name: str, host: str, credentials: Credentials) -> None:
        self.addresses[name] = f"{host}:{CLIENT_PORT}"
        self.credentials[name] = credentials

    @property
    def intruder_addresses(self) -> frozenset[str]:
        return frozenset(self.addresses[name] for name in self.intruders)

    def sign(self, sender: str, request: RemotingCommand) -> None:
        """As the honest client's ControllerClient does before it sends (intruders forge their own)."""
        credentials = self.credentials.get(sender)
        if credentials is not None:
            credentials.sign(request)

    def admit(self, node: ReplicaSimNode, remote: Remote) -> Origin | None:
        """The node's gate on a request it decoded: the origin to hand the replica with it, or None
        (refused: answered NO_PERMISSION here, or dropped if one-way)."""
        request, address = remote.request, self.addresses[remote.sender]
        gate = self.gates.get(node.id)
        if gate is None:
            gate = self.gates[node.id] = RequestGate()
        decision = gate.check(self.rules, request, address.rsplit(":", 1)[0])
        if isinstance(decision, Allowed):
            self.admitted += 1
            return client_origin(request, address, node.id, acl_enabled=True)  # as rmqc serve records it
        if remote.sender in self.credentials:
            self.world.checker.fail(f"acl: {node.id} refused {remote.sender}'s signed request {request.code}: "
                                    f"{decision.refusal.value}")
        if decision.answer is not None:
            self.world.answer(node, remote, decision.answer)
        return None

    def on_answer(self, sender: str, opaque: int, answer: Answer) -> bool:
        """An answer to an intruder (checked; True), or to someone else (False)."""
        intruder = self.intruders.get(sender)
        if intruder is None:
            return False
        intruder.on_answer(opaque, answer)
        return True

    def finish(self) -> None:
        """The end checks (no node heard an intruder's 904) and the gates' counters, summed."""
        claimed = {intruder.broker_address for intruder in self.intruders.values()}
        for node_id in self.world.current_ids():
            replica = self.world.nodes[node_id].replica
            if not self.world.checker.ok or replica is None or not self.world.nodes[node_id].up:
                continue
            table = replica.liveness.table
            for key in table:
                info = table.live_info(key)
                if key.broker_id == INTRUDER_BROKER_ID or (info is not None and info.broker_addr in claimed):
                    self.world.checker.fail(f"acl: {node_id}'s liveness table holds {key}, an intruder's broker "
                                            "(a refused one-way 904 reached the replica)")
                    break
        counts: Counter[str] = Counter({"acl_seeds": 1, "acl_admitted": self.admitted})
        for gate in self.gates.values():
            counts.update({f"acl_refused_{reason.lower()}": n for reason, n in gate.refused.items()})
            counts["acl_dropped_oneway"] += gate.dropped_oneway
        self.world.counts.update(+counts)  # the ones above zero
