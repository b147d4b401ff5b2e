"""What a processor hands back to the server: answer now, stay silent, or propose then answer."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rmqc._hot import hot_record
from rmqc.fsm import ApplyResult, Command, Origin
from rmqc.remoting import RemotingCommand


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """The controller group as this node sees it, for 1005 (spec 3.2)."""

    group: str
    self_id: str
    leader_id: str | None
    leader_address: str | None  # must be reachable by brokers (spec 3.2, issue #9082)
    peers: tuple[tuple[str, str], ...]  # (id, address) in configured order

    def peers_text(self) -> str:
        return "".join(f"{node_id}:{address};" for node_id, address in self.peers)


class RequestContext(NamedTuple):
    """Everything about the moment and the node a handler may need; the server fills it in.
    (A NamedTuple: the server builds one per request, heartbeats included.)

    Two clocks: `now_ms` is the node's monotonic clock, the one liveness deadlines are kept on;
    `wall_ms` is the wall clock, only stamped into commands (and so into the history). A caller
    with one clock (tests, the simulator) leaves `wall_ms` None and both read `now_ms`."""

    now_ms: int
    channel_id: Hashable | None = None  # the broker connection (for close detection)
    is_leader: bool = True
    leader_ready: bool = True  # the leader has committed an entry of its own term
    node: NodeInfo | None = None
    # The server has already made a local read safe on this node (ReadIndex, lease or an explicit
    # stale read): read requests (1004, 1006, 1012) are then served here even on a follower.
    read_allowed: bool = False
    wall_ms: int | None = None
    # Who asked (audit): recorded in every command this request causes. None: unknown (tests, the
    # simulator), recorded as no origin.
    origin: Origin | None = None

    @property
    def stamp_ms(self) -> int:
        """The time stamped into a command built for this request."""
        return self.now_ms if self.wall_ms is None else self.wall_ms


@hot_record
class Reply:
    response: RemotingCommand


@dataclass(frozen=True, slots=True)
class NoReply:
    """One-way request: the server writes nothing."""


@hot_record
class Propose:
    """Commit `commands` (in one entry), apply them, then answer with `finish(results)`.

    `results` are the ApplyResults of exactly these commands, in order. If the request was
    one-way the server still proposes but discards the answer.
    """

    commands: Sequence[Command]
    finish: Callable[[list[ApplyResult]], RemotingCommand]


Outcome = Reply | NoReply | Propose
