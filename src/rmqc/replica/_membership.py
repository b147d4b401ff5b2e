"""Membership requests for operators (`rmqc admin members ...`), beside the other private rmqc
requests of _operations.py, and the applied address book they keep.

Only the leader decides (also LIST: only it knows how far each member replicated). Any other node
answers CONTROLLER_NOT_LEADER naming the leader (extFields `leaderId`, `leaderAddress`), as
RMQC_TRANSFER_LEADER does; clients retry there.

- RMQC_MEMBERS_LIST (60004): 0, body JSON array sorted by id of {"id", "address", "role"
  ("voter"|"learner"), "isLeader", "match", "lag"} (lag = leader's last index - match; the
  leader's own row has its last index and lag 0).
- RMQC_MEMBERS_ADD (60005), extFields `id`, `address` (host:port): proposes ADD_LEARNER with the
  address in ConfChange.context; 0 once that entry is applied on the leader.
- RMQC_MEMBERS_PROMOTE (60006), extFields `id`: ADD_VOTER of a learner that has caught up (its
  match within CATCH_UP_ENTRIES of the leader's commit, no snapshot on its way to it); 0 once
  applied.
- RMQC_MEMBERS_REMOVE (60007), extFields `id`: REMOVE_NODE; 0 once applied. The leader removing
  itself first transfers the leadership (as RMQC_TRANSFER_LEADER without `to`) and then answers
  CONTROLLER_NOT_LEADER naming the new leader: the client retries there, and the new leader
  removes the old one (a leader never commits its own removal).

Answers 0 carry the change body {"change": "add_learner"|"promote"|"remove", "id", "address",
"index", "voters", "learners"} (index: the entry's; the membership after it). Refusals are code 1
(SYSTEM_ERROR) with one line saying what and what to do: a change still pending (not yet applied),
removing the last voter, promoting a learner that lags or still receives a snapshot, an unknown id,
an id already a member with another address, an address another member uses, a malformed id or
address, a leader not serving yet. Idempotent: ADD of a member with the same address, PROMOTE of a
voter answer 0 at once (index: the applied index); REMOVE of a non-member is "unknown id".
A change that does not commit within request_timeout_ms is answered code 1 (it may still commit:
LIST tells, and retrying is safe because the requests are idempotent).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import orjson

from rmqc.errors import RmqcError
from rmqc.raft import ConfChange, ConfChangeType, ConfState, Entry, ProgressState, RawNode
from rmqc.remoting import (
    RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_LIST,
    RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE,
    RemotingCommand,
    ResponseCode,
    make_response,
)

from ._facts import RaftFacts
from ._io import Answer, Outbox, ReplicaConfig
from ._operations import Operations

log = logging.getLogger("rmqc.replica")

MEMBERSHIP_REQUESTS = frozenset({RMQC_MEMBERS_LIST, RMQC_MEMBERS_ADD, RMQC_MEMBERS_PROMOTE, RMQC_MEMBERS_REMOVE})
# A learner is caught up when its match index trails the leader's commit by at most this many
# entries (one append's worth: promoted, it acknowledges the next append at once).
CATCH_UP_ENTRIES = 64
# The syntax of `peers` (rmqc.config): no '-' in an id, it separates the id from the host.
MEMBER_ID = re.compile(r"[A-Za-z0-9_.]{1,64}")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_CHANGE_NAMES = {ConfChangeType.ADD_LEARNER: "add_learner", ConfChangeType.ADD_VOTER: "promote",
                 ConfChangeType.REMOVE_NODE: "remove"}


class Refused(RmqcError):
    """A membership request refused before anything was proposed (its message is the remark)."""


def address_refusal(address: str) -> str | None:
    """Why `address` is not a host:port, or None when it is."""
    host, colon, port = address.rpartition(":")
    if colon and _HOST.fullmatch(host) and port.isdigit() and 0 < int(port) < 65536:
        return None
    return f"malformed address {address!r}: expected host:port (e.g. 127.0.0.1:9878)"


def book_after(conf_state: ConfState, change: ConfChange, after: ConfState) -> tuple[tuple[str, str], ...]:
    """The address book once `change` turned `conf_state` into `after` (the core's membership): an
    address in the change's context is taken, members that left are dropped."""
    book = dict(conf_state.addresses)
    if change.context and change.type is not ConfChangeType.REMOVE_NODE:
        book[change.node_id] = change.context.decode()
    members = set(after.members)
    return tuple(sorted((node_id, address) for node_id, address in book.items() if node_id in members))


def with_known_addresses(conf_state: ConfState, config: ReplicaConfig) -> ConfState:
    """`conf_state` with the `peers` option's address for every member its book lacks (records
    written before the book existed, the bootstrap's voters)."""
    book = dict(conf_state.addresses)
    for member in conf_state.members:
        peer = config.peer(member) if member not in book else None
        if peer is not None:
            book[member] = peer.address
    return ConfState(conf_state.voters, conf_state.learners, tuple(sorted(book.items())))


@dataclass(slots=True)
class _Change:
    request: RemotingCommand
    token: Hashable
    change: ConfChange
    started_ms: int
    index: int = 0  # of the proposed entry, once proposed
    term: int = 0


class Membership:
    """The membership requests of one Replica. `feed` and `applied` run in its driver pass, the
    rest when a request arrives or its time runs out; each request ends in exactly one Answer."""

    def __init__(self, config: ReplicaConfig, facts: RaftFacts, raw: RawNode, outbox: Outbox, operations: Operations,
                 now_ms: Callable[[], int], wake_driver: Callable[[], None]) -> None:
        self._config, self._facts, self._raw, self._operations = config, facts, raw, operations
        self._now_ms, self._wake_driver = now_ms, wake_driver
        self._out = outbox.append
        self._change: _Change | None = None

    def handle(self, request: RemotingCommand, token: Hashable) -> None:
        if self._facts.leader_id != self._config.node_id:
            self._out(Answer(token, self._operations.not_leader(request)))
        elif request.code == RMQC_MEMBERS_LIST:
            self._out(Answer(token, make_response(request, ResponseCode.SUCCESS, None, None,
                                                  orjson.dumps(self.rows()))))
        else:
            try:
                self._decide(request, token)
            except Refused as refusal:
                self._out(Answer(token, make_response(request, ResponseCode.SYSTEM_ERROR, str(refusal))))

    # ----- LIST -----

    def rows(self) -> list[dict[str, Any]]:
        """The LIST body (leader only: the match indexes are its progress)."""
        status = self._raw.status()
        conf = self._facts.conf_state
        book = dict(conf.addresses)
        rows = []
        for member in conf.members:
            progress = status.progress.get(member)
            match = status.last_index if member == status.id else (progress.match if progress else 0)
            rows.append({"id": member, "address": book.get(member, ""),
                         "role": "voter" if member in conf.voters else "learner",
                         "isLeader": member == self._facts.leader_id, "match": match,
                         "lag": max(0, status.last_index - match)})
        return rows

    # ----- ADD, PROMOTE, REMOVE -----

    def _decide(self, request: RemotingCommand, token: Hashable) -> None:
        if not self._facts.serving_as_leader:
            raise Refused(self._operations.not_serving_yet())
        node_id = _member_id(request)
        conf = self._facts.conf_state
        if request.code == RMQC_MEMBERS_REMOVE:
            change = self._remove(node_id, conf, request, token)
            if change is None:
                return  # the leader hands over first; Operations answers
        else:
            if request.code == RMQC_MEMBERS_ADD:
                change = self._add(node_id, request.ext("address") or "", conf)
            else:
                change = self._promote(node_id, conf)
            if change is None:  # already so: idempotent
                kind = ConfChangeType.ADD_LEARNER if request.code == RMQC_MEMBERS_ADD else ConfChangeType.ADD_VOTER
                self._out(Answer(token, self._done(request, kind, node_id, self._facts.applied_index)))
                return
        self._refuse_if_pending()
        self._change = _Change(request, token, change, self._now_ms())
        self._wake_driver()

    def _add(self, node_id: str, address: str, conf: ConfState) -> ConfChange | None:
        refusal = address_refusal(address)
        if refusal is not None:
            raise Refused(refusal)
        book = dict(conf.addresses)
        if node_id in conf.members:
            if book.get(node_id) in (address, None):
                return None
            raise Refused(f"{node_id} is already a member with address {book[node_id]}; remove it first "
                          f"to give it another address")
        user = next((member for member, used in book.items() if used == address), None)
        if user is not None:
            raise Refused(f"address {address} is already used by member {user}; remove {user} first or "
                          f"choose another address")
        return ConfChange(ConfChangeType.ADD_LEARNER, node_id, address.encode())

    def _promote(self, node_id: str, conf: ConfState) -> ConfChange | None:
        if node_id in conf.voters:
            return None
        if node_id not in conf.learners:
            raise Refused(_unknown(node_id, conf))
        lagging = self._lagging(node_id)
        if lagging is not None:
            raise Refused(f"learner {node_id} has not caught up: {lagging}; wait and retry (members list "
                          f"shows its lag)")
        return ConfChange(ConfChangeType.ADD_VOTER, node_id)

    def _lagging(self, node_id: str) -> str | None:
        """Why learner `node_id` must not become a voter yet (None: it may)."""
        raw = self._raw
        progress = raw.progress_of(node_id)
        commit = raw.committed
        if progress is None or progress.match == 0:
            return "it has not acknowledged anything yet (is it running and reachable at its address?)"
        if progress.state is ProgressState.SNAPSHOT:
            return f"a snapshot (index {progress.pending_snapshot}) is still being sent to it"
        if commit - progress.match > CATCH_UP_ENTRIES:
            return f"its match index {progress.match} trails the commit index {commit} by more than {CATCH_UP_ENTRIES}"
        return None

    def _remove(self, node_id: str, conf: ConfState, request: RemotingCommand, token: Hashable) -> ConfChange | None:
        if node_id not in conf.members:
            raise Refused(_unknown(node_id, conf))
        if conf.voters == (node_id,):
            raise Refused(f"{node_id} is the last voter: add and promote another member before removing it")
        if node_id == self._config.node_id:
            self._refuse_if_pending()
            self._operations.hand_over_before_removal(request, token)
            return None
        return ConfChange(ConfChangeType.REMOVE_NODE, node_id)

    def _refuse_if_pending(self) -> None:
        raw = self._raw
        if self._change is not None:
            change = self._change.change
            raise Refused(f"a membership change ({_CHANGE_NAMES[change.type]} {change.node_id}) is pending; "
                          f"wait for its answer, then retry")
        if raw.conf_change_pending():
            raise Refused(f"a membership change at index {raw.pending_conf_index} is not applied yet (applied "
                          f"{self._facts.applied_index}); retry once it is")

    # ----- the driver -----

    def feed(self, raw: RawNode) -> None:
        """Driver: propose the change a request asked for."""
        change = self._change
        if change is None or change.index:
            return
        try:
            raw.propose_conf_change(change.change)
        except RmqcError as error:
            self._finish(make_response(change.request, ResponseCode.SYSTEM_ERROR, f"membership not changed: {error}"))
            return
        change.index, change.term = raw.last_index(), self._facts.term

    def applied(self, entry: Entry) -> None:
        """Driver, after the conf change `entry` was applied: is it the one a request waits for?"""
        change = self._change
        if change is None or not change.index or entry.index != change.index:
            return
        if entry.term != change.term:
            self._finish(make_response(change.request, ResponseCode.SYSTEM_ERROR,
                                       f"membership not changed: entry {entry.index} was overwritten by a new "
                                       f"leader; retry"))
            return
        log.info("%s: membership change %s %s applied at %d", self._config.node_id,
                 _CHANGE_NAMES[change.change.type], change.change.node_id, entry.index)
        self._finish(self._done(change.request, change.change.type, change.change.node_id, entry.index))

    def after_apply(self, applied_index: int) -> None:
        """Driver: the entry we proposed was passed without being ours (a new leader's log)."""
        change = self._change
        if change is not None and change.index and applied_index > change.index:
            self._finish(make_response(change.request, ResponseCode.SYSTEM_ERROR,
                                       f"membership not changed: entry {change.index} was not applied as proposed "
                                       f"(the leadership changed); retry"))

    def next_deadline_ms(self) -> int | None:
        change = self._change
        return None if change is None else change.started_ms + self._config.request_timeout_ms

    def expire(self, now_ms: int) -> None:
        deadline = self.next_deadline_ms()
        if deadline is not None and now_ms >= deadline:
            assert self._change is not None
            self._finish(make_response(
                self._change.request, ResponseCode.SYSTEM_ERROR,
                f"membership change not applied within {self._config.request_timeout_ms} ms (request_timeout_ms); "
                f"it may still be: check with members list, then retry (the requests are idempotent)"))

    def fail(self, why: str) -> None:
        if self._change is not None:
            self._finish(make_response(self._change.request, ResponseCode.SYSTEM_ERROR, why))

    def _finish(self, response: RemotingCommand) -> None:
        change, self._change = self._change, None
        assert change is not None
        self._out(Answer(change.token, response))

    def _done(self, request: RemotingCommand, change_type: ConfChangeType, node_id: str, index: int) -> RemotingCommand:
        conf = self._facts.conf_state
        body = {"change": _CHANGE_NAMES[change_type], "id": node_id, "address": dict(conf.addresses).get(node_id, ""),
                "index": index, "voters": list(conf.voters), "learners": list(conf.learners)}
        return make_response(request, ResponseCode.SUCCESS, None, None, orjson.dumps(body))


def _member_id(request: RemotingCommand) -> str:
    node_id = request.ext("id") or ""
    if not MEMBER_ID.fullmatch(node_id):
        raise Refused(f"malformed id {node_id!r}: expected 1 to 64 letters, digits, '_' or '.'")
    return node_id


def _unknown(node_id: str, conf: ConfState) -> str:
    return (f"unknown id {node_id!r}: the members are {', '.join(conf.members)}")
