"""Forwarding: a follower sends the leader-only requests it cannot decide to the leader (design.md
"Write path" 1) and answers the client with the leader's answer. Each forward holds a slot until
the answer comes, the request timeout passes, or the leader it went to is no longer ours.

A leader-only request that reaches the elected leader before it serves (before its first commit;
after a takeover from a leader whose port refused it, until that leader's lease has run out, 150-
200 ms) waits (`LeaderWaits`) instead of being refused 2007: the others already name it as leader
(1005), and a broker has no handling of 2007 and would retry only at its next metadata refresh,
10 s later (spec 7.1)."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand, ResponseCode, make_response

from ._io import Answer, ForwardRequest, Outbox
from ._proposals import NOT_LEADER_REMARK, OVERLOAD_REMARK

# Requests forwarded to the leader and not yet answered.
MAX_FORWARDS_IN_FLIGHT = 16_384
# Requests waiting for this node to serve as leader. Past this a request is answered SYSTEM_BUSY at once.
MAX_WAITING_FOR_LEADER = 16_384
FORWARD_TIMEOUT_REMARK = "java.util.concurrent.TimeoutException: forwarded to leader"


@dataclass(slots=True)
class _Slot:
    leader_id: str
    token: Hashable
    request: RemotingCommand
    deadline_ms: int
    # the replica's own forward (not a client's): gets the answer instead of an Answer action
    on_answer: Callable[[RemotingCommand], None] | None = None


class Forwards:
    """The forwards of one follower, by tag; every slot ends in exactly one Answer."""

    def __init__(self, outbox: Outbox, request_timeout_ms: int) -> None:
        self._out = outbox.append
        self._timeout_ms = request_timeout_ms
        self._slots: dict[int, _Slot] = {}
        self._by_deadline: deque[int] = deque()  # tags, oldest first (one timeout for all)
        self._tags = itertools.count(1)

    def __len__(self) -> int:
        return len(self._slots)

    def forward(self, leader_id: str, request: RemotingCommand, token: Hashable, now_ms: int,
                on_answer: Callable[[RemotingCommand], None] | None = None) -> None:
        """Send `request` to the leader; a one-way request is answered (None) at once. With
        `on_answer` (a two-way request of the replica's own), the answer goes there, not out."""
        if len(self._slots) >= MAX_FORWARDS_IN_FLIGHT:
            self._reply(token, on_answer, make_response(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))
            return
        tag = next(self._tags)
        if request.is_oneway:
            self._out(ForwardRequest(leader_id, tag, request))
            self._out(Answer(token, None))
            return
        self._slots[tag] = _Slot(leader_id, token, request, now_ms + self._timeout_ms, on_answer)
        self._by_deadline.append(tag)
        self._out(ForwardRequest(leader_id, tag, request))

    def answered(self, tag: int, response: RemotingCommand) -> None:
        slot = self._slots.pop(tag, None)
        if slot is not None:  # else: timed out or abandoned already
            response.opaque = slot.request.opaque
            self._reply(slot.token, slot.on_answer, response)

    def not_sent(self, tag: int) -> None:
        """The shell could not send the forward (the peer's outbox is full)."""
        self._fail(tag, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)

    def abandon(self, except_to: str | None = None) -> None:
        """Requests forwarded to a leader that is no longer ours will never be answered: the
        client retries after finding the new one."""
        for tag in [tag for tag, slot in self._slots.items() if slot.leader_id != except_to]:
            self._fail(tag, ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)

    def expire(self, now_ms: int) -> None:
        queue = self._by_deadline
        while queue:
            slot = self._slots.get(queue[0])
            if slot is not None and slot.deadline_ms > now_ms:
                return
            tag = queue.popleft()
            if slot is not None:
                self._fail(tag, ResponseCode.SYSTEM_ERROR, FORWARD_TIMEOUT_REMARK)

    def next_deadline_ms(self) -> int | None:
        queue = self._by_deadline
        while queue and queue[0] not in self._slots:
            queue.popleft()
        return self._slots[queue[0]].deadline_ms if queue else None

    def fail_all(self, remark: str) -> None:
        for tag in list(self._slots):
            self._fail(tag, ResponseCode.SYSTEM_ERROR, remark)

    def _fail(self, tag: int, code: int, remark: str) -> None:
        slot = self._slots.pop(tag, None)
        if slot is not None:
            self._reply(slot.token, slot.on_answer, make_response(slot.request, code, remark))

    def _reply(self, token: Hashable, on_answer: Callable[[RemotingCommand], None] | None,
               response: RemotingCommand) -> None:
        if on_answer is None:
            self._out(Answer(token, response))
        else:
            on_answer(response)


@dataclass(slots=True)
class WaitingRequest:
    """A leader-only request held until this node serves as leader; `forwarded`: a follower's
    forward (decided here, never forwarded again)."""

    request: RemotingCommand
    channel_id: int
    token: Hashable
    origin: Origin | None
    forwarded: bool
    deadline_ms: int


class LeaderWaits:
    """Leader-only requests held while this node is the elected leader and does not serve yet,
    oldest first; each ends in exactly one answer: taken back by the replica (`take_all`) once it
    serves or is no longer the leader, or refused 2007 after `wait_ms`, an election timeout: well
    past the takeover's lease wait (150-200 ms of the 500, so a stalled new leader still makes
    it), and as long as CheckQuorum gives a leader that hears no quorum before it steps down."""

    def __init__(self, outbox: Outbox, wait_ms: int) -> None:
        self._out = outbox.append
        self.wait_ms = wait_ms
        self._waiting: deque[WaitingRequest] = deque()

    def __len__(self) -> int:
        return len(self._waiting)

    def hold(self, request: RemotingCommand, channel_id: int, token: Hashable, origin: Origin | None, *,
             forwarded: bool, now_ms: int) -> None:
        if len(self._waiting) >= MAX_WAITING_FOR_LEADER:
            self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)))
            return
        self._waiting.append(WaitingRequest(request, channel_id, token, origin, forwarded, now_ms + self.wait_ms))

    def take_all(self) -> list[WaitingRequest]:
        taken = list(self._waiting)
        self._waiting.clear()
        return taken

    def expire(self, now_ms: int) -> None:
        waiting = self._waiting
        while waiting and waiting[0].deadline_ms <= now_ms:
            held = waiting.popleft()
            self._out(Answer(held.token, make_response(held.request, ResponseCode.CONTROLLER_NOT_LEADER,
                                                       f"{NOT_LEADER_REMARK}: elected, and not serving "
                                                       f"within {self.wait_ms} ms")))

    def next_deadline_ms(self) -> int | None:
        return self._waiting[0].deadline_ms if self._waiting else None

    def fail_all(self, remark: str) -> None:
        for held in self.take_all():
            self._out(Answer(held.token, make_response(held.request, ResponseCode.SYSTEM_ERROR, remark)))
