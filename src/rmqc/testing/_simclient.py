"""Simulated clients: each runs one operation at a time against the key-value state machine and
records what it saw, with virtual invoke and completion times, as a linearizability history.

Operation kinds: `write` (a proposal on the node the client thinks leads), `read` (ReadIndex, on any
node: follower reads included) and `lease` (a lease read on the leader, which falls back to ReadIndex
when the lease has lapsed). Every write carries a unique value so that stale reads are visible."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rmqc.linearizability import READ, WRITE, Op

OP_KINDS = ("write", "read", "lease")


@dataclass(frozen=True, slots=True)
class ClientKnobs:
    count: int = 3
    keys: tuple[str, ...] = ("x", "y", "z")
    kind_weights: tuple[int, int, int] = (4, 3, 3)  # write, read, lease
    think_max_us: int = 20_000
    timeout_us: int = 250_000  # a few election timeouts: long enough to ride out a failover
    follow_hint_p: float = 0.7


@dataclass(frozen=True, slots=True)
class ClientRequest:
    op_id: int
    client: str
    kind: str  # one of OP_KINDS
    key: str
    value: str | None  # the value to write


@dataclass(slots=True)
class _Pending:
    request: ClientRequest
    node: str
    invoke_us: int


@dataclass(slots=True)
class ClientStats:
    ok: int = 0
    failed: int = 0
    unknown: int = 0


@dataclass(slots=True)
class SimClient:
    name: str
    rng: random.Random
    knobs: ClientKnobs
    node_ids: Sequence[str]
    now_us: Callable[[], int]
    schedule: Callable[..., None]  # schedule(delay_us, action, *args)
    send: Callable[[str, ClientRequest], None]  # send(node, request)
    next_op_id: Callable[[], int]
    history: list[Op]
    stats: ClientStats
    leader_hint: str | None = None
    incarnation: int = 0
    pending: _Pending | None = None
    stopped: bool = False
    writes: int = field(default=0)

    @property
    def process(self) -> str:
        # A client whose op outcome is unknown continues as a new process, as in Jepsen.
        return f"{self.name}.{self.incarnation}"

    def start(self) -> None:
        self.schedule(self.rng.randrange(self.knobs.think_max_us + 1), self.invoke)

    def invoke(self) -> None:
        if self.stopped:
            return
        kind = self.rng.choices(OP_KINDS, weights=self.knobs.kind_weights)[0]
        key = self.rng.choice(self.knobs.keys)
        self.invoke_on(self._target(kind), kind, key)

    def invoke_on(self, node: str, kind: str, key: str) -> None:
        """Start one op on a chosen node (scripted scenarios call this directly)."""
        value = None
        if kind == "write":
            self.writes += 1
            value = f"{self.name}-{self.writes}"
        request = ClientRequest(self.next_op_id(), self.name, kind, key, value)
        self.pending = _Pending(request, node, self.now_us())
        self.send(node, request)
        self.schedule(self.knobs.timeout_us, self.on_timeout, request.op_id)

    def _target(self, kind: str) -> str:
        # Mostly the node believed to lead, sometimes any node: clients on the far side of a
        # partition keep talking to an old leader while others already found the new one.
        if kind != "read" and self.leader_hint is not None and self.rng.random() < self.knobs.follow_hint_p:
            return self.leader_hint
        return self.rng.choice(list(self.node_ids))

    def on_reply(self, op_id: int, ok: bool, value: str | None, leader_hint: str | None) -> None:
        pending = self.pending
        if pending is None or pending.request.op_id != op_id:
            return  # the reply to an op that already timed out
        self.leader_hint = leader_hint if leader_hint is not None else self.leader_hint
        if ok:
            self.stats.ok += 1
        else:
            self.stats.failed += 1
            if leader_hint is None:
                self.leader_hint = None
        self._record(pending, ok, value, complete_us=self.now_us())
        self._next()

    def on_timeout(self, op_id: int) -> None:
        pending = self.pending
        if pending is None or pending.request.op_id != op_id:
            return
        self.stats.unknown += 1
        self._record(pending, True, None, complete_us=None)
        self.incarnation += 1
        self.leader_hint = None
        self._next()

    def _record(self, pending: _Pending, ok: bool, value: str | None, complete_us: int | None) -> None:
        request = pending.request
        is_write = request.kind == "write"
        self.history.append(
            Op(
                process=self.process,
                key=request.key,
                kind=WRITE if is_write else READ,
                value=request.value if is_write else value,
                invoke_ns=pending.invoke_us * 1000,
                complete_ns=None if complete_us is None else complete_us * 1000,
                ok=ok,
            )
        )
        self.pending = None

    def _next(self) -> None:
        self.schedule(self.rng.randrange(self.knobs.think_max_us + 1), self.invoke)
