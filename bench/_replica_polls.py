"""The hold generator's brokers poll 1004 (CONTROLLER_GET_REPLICA_INFO) as RocketMQ 5 brokers in
controller mode do (ReplicasManager's metadata sync: every syncBrokerMetadataPeriod, 5 s by
default, an answer awaited 3 s), and learn their group's master from the answers (bench/_beliefs.py).

Cheap on purpose, so that 30,000 brokers fit beside the nodes on 2 cores: each group's 1004 frame
is encoded once, with a fixed-width opaque patched in per request (answers are matched by opaque:
polls are pipelined, many in flight on one connection); an answer's header alone is parsed (its
masterBrokerId and masterEpoch), its body (the SyncStateSet) skipped. The brokers' polls are
staggered evenly over the period; each connection sends, every SLOT_S, the polls that fell due in
one write. It records how late it woke against that schedule (the generator's own health) and how
long a write waited for the socket (a node not reading); a schedule that fell behind restarts from
then instead of sending the missed slots in a burst. A broker has at most one poll unanswered, as a
Java broker's metadata sync waits for its answer: a poll due meanwhile is skipped, and counted.

Where a broker polls: its group's 3 brokers poll 3 different nodes (every node answers 1004
through its read path: linearizable by default, so a follower confirms a read index with the
leader, batching the reads that arrive meanwhile). A Java broker polls the node it believes is
leader; spreading them is a choice of the load, to load every node's read path.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio

from rmqc.remoting import RequestCode, ResponseCode, encode, make_request

from ._beliefs import FleetBeliefs
from ._load import LoadError, split_address

POLL_PERIOD_S = 5.0  # BrokerConfig.syncBrokerMetadataPeriod's default
POLL_TIMEOUT_S = 3.0  # BrokerOuterAPI.getReplicaInfo's invokeSync timeout
POLL_CONNECTIONS_PER_NODE = 2
SLOT_S = 0.05  # the polls due within one slot go out in one write
SWEEP_EVERY_S = 0.5  # polls unanswered after POLL_TIMEOUT_S are given up this often
RECEIVE_BYTES = 65536
# Opaques of exactly 10 digits, within Java's int: patched into a frame without changing its length.
OPAQUE_FIRST = 1_000_000_000
OPAQUE_LAST = 2**31 - 1
_PREFIX = struct.Struct(">II")


def poll_frame_parts(name: str) -> tuple[bytes, bytes]:
    """The 1004 frame for broker-set `name`, split around its opaque's 10 digits."""
    frame = encode(make_request(RequestCode.CONTROLLER_GET_REPLICA_INFO, OPAQUE_FIRST, {"brokerName": name}))
    marker = b'"opaque":%d' % OPAQUE_FIRST
    at = frame.index(marker) + len(marker) - len(str(OPAQUE_FIRST))
    return frame[:at], frame[at + len(str(OPAQUE_FIRST)):]


def answer_headers(buffer: bytearray) -> tuple[list[dict[str, Any]], int]:
    """The JSON headers of the complete frames at the start of `buffer`, and the bytes they take."""
    headers: list[dict[str, Any]] = []
    pos, size = 0, len(buffer)
    while size - pos >= _PREFIX.size:
        length, mark = _PREFIX.unpack_from(buffer, pos)
        end = pos + 4 + length
        if end > size:
            break
        if mark >> 24:
            raise LoadError(f"an answer with serialize type {mark >> 24}, not JSON")
        headers.append(orjson.loads(buffer[pos + _PREFIX.size:pos + _PREFIX.size + (mark & 0xFFFFFF)]))
        pos = end
    return headers, pos


@dataclass
class PollCounts:
    """Of the polls to one node."""

    sent: int = 0
    answered: int = 0
    refused: int = 0  # answered with a code other than SUCCESS
    refused_by_code: collections.Counter[str] = field(default_factory=collections.Counter)
    timed_out: int = 0  # no answer within POLL_TIMEOUT_S (or the connection was lost)
    answers_after_timeout: int = 0  # ignored, as Java's invokeSync has given up on them
    skipped_outstanding: int = 0  # due while the broker's previous poll was still unanswered
    connections_lost: int = 0
    worst_answer_s: float = 0.0  # send to answer
    answers_over_1s: int = 0
    # a write of due polls the socket did not take at once: the node was not reading (it stops
    # reading a connection with 1024 requests in flight, or 4 MiB of answers unread)
    worst_write_blocked_s: float = 0.0
    writes_blocked_over_1s: int = 0


@dataclass
class _Link:
    """One poll connection: its brokers by slot of the period, its polls awaiting an answer."""

    stream: trio.SocketStream
    counts: PollCounts  # its node's
    by_slot: list[list[int]]
    pending: dict[int, tuple[int, float]] = field(default_factory=dict)  # opaque -> (broker, sent at)
    lost: bool = False


class ReplicaPolls:
    """Every broker of `beliefs` polls 1004 every `period_s`, its answers fed to `beliefs`."""

    def __init__(self, beliefs: FleetBeliefs, period_s: float = POLL_PERIOD_S) -> None:
        self.beliefs = beliefs
        self.period_s = period_s
        self.parts = [poll_frame_parts(name) for name in beliefs.names]
        self.by_node: dict[str, PollCounts] = {}
        # the generator's own scheduling: how late a connection's slot woke against its schedule (a
        # schedule that fell behind restarts from its write's end: polls are not sent in bursts)
        self.worst_late_s = 0.0
        self.late_over_1s = 0
        self.started_at: float | None = None
        self._outstanding = bytearray(len(beliefs.master))  # 1 while a broker's poll is unanswered
        self._opaque = OPAQUE_FIRST

    def connection_of(self, broker: int, nodes: int, per_node: int) -> int:
        """A group's brokers poll different nodes, its master not always the same one."""
        group, index = divmod(broker, self.beliefs.replicas)
        return (group + index) % nodes * per_node + group // nodes % per_node

    async def run(self, nodes: dict[str, str], nursery: trio.Nursery,
                  per_node: int = POLL_CONNECTIONS_PER_NODE) -> None:
        """Opens `per_node` connections to every node (id -> address), then polls until cancelled
        (its tasks in `nursery`)."""
        self.by_node = {node: PollCounts() for node in nodes}
        links = []
        slots = max(1, round(self.period_s / SLOT_S))
        for node, address in nodes.items():
            for _ in range(per_node):
                stream = await trio.open_tcp_stream(*split_address(address))
                links.append(_Link(stream, self.by_node[node], [[] for _ in range(slots)]))
        total = len(self._outstanding)
        for broker in range(total):
            # broker b's turn is at (b / total) of the period: evenly staggered over all brokers
            links[self.connection_of(broker, len(nodes), per_node)].by_slot[broker * slots // total].append(broker)
        start = trio.current_time()
        self.started_at = start
        for link in links:
            nursery.start_soon(self._guarded, self._send, link, start)
            nursery.start_soon(self._guarded, self._receive, link)
            nursery.start_soon(self._sweep, link)

    async def _guarded(self, step: Callable[..., Awaitable[None]], link: _Link, *args: object) -> None:
        """`step(link, *args)`; a lost connection is counted once, its unanswered polls given up,
        and its brokers poll no more (the hold reports it: a node closes no connection unprovoked)."""
        try:
            await step(link, *args)
        except (OSError, LoadError, trio.BrokenResourceError, trio.ClosedResourceError):
            if not link.lost:
                link.lost = True
                link.counts.connections_lost += 1
                self._give_up(link, list(link.pending))
                await link.stream.aclose()

    async def _send(self, link: _Link, start: float) -> None:
        counts, outstanding, parts, replicas = link.counts, self._outstanding, self.parts, self.beliefs.replicas
        pending = link.pending
        slot_s = self.period_s / len(link.by_slot)
        due = start
        while not link.lost:
            for brokers in link.by_slot:
                now = trio.current_time()
                late_s = now - due
                self.worst_late_s = max(self.worst_late_s, late_s)
                self.late_over_1s += late_s > 1.0
                frames: list[bytes] = []
                for broker in brokers:
                    if outstanding[broker]:
                        counts.skipped_outstanding += 1
                        continue
                    opaque = self._next_opaque()
                    head, tail = parts[broker // replicas]
                    frames += (head, b"%d" % opaque, tail)
                    pending[opaque] = (broker, now)
                    outstanding[broker] = 1
                if frames:
                    await link.stream.send_all(b"".join(frames))
                    counts.sent += len(frames) // 3
                    blocked_s = trio.current_time() - now
                    counts.worst_write_blocked_s = max(counts.worst_write_blocked_s, blocked_s)
                    counts.writes_blocked_over_1s += blocked_s > 1.0
                due = max(due + slot_s, trio.current_time())
                await trio.sleep_until(due)

    def _next_opaque(self) -> int:
        opaque = self._opaque
        self._opaque = OPAQUE_FIRST if opaque == OPAQUE_LAST else opaque + 1
        return opaque

    async def _receive(self, link: _Link) -> None:
        counts, beliefs, outstanding, pending = link.counts, self.beliefs, self._outstanding, link.pending
        buffer = bytearray()
        while data := await link.stream.receive_some(RECEIVE_BYTES):
            buffer += data
            headers, used = answer_headers(buffer)
            del buffer[:used]
            now = trio.current_time()
            now_ms = int(now * 1000)
            for header in headers:
                entry = pending.pop(header["opaque"], None)
                if entry is None:
                    counts.answers_after_timeout += 1
                    continue
                broker, sent = entry
                outstanding[broker] = 0
                answer_s = now - sent
                counts.worst_answer_s = max(counts.worst_answer_s, answer_s)
                counts.answers_over_1s += answer_s > 1.0
                code = header.get("code")
                if code != ResponseCode.SUCCESS:
                    counts.refused += 1
                    counts.refused_by_code[f"{code} {str(header.get('remark') or '')[:60]}"] += 1
                    continue
                counts.answered += 1
                ext = header.get("extFields") or {}
                master = ext.get("masterBrokerId")
                beliefs.learn(broker, int(master) if master else None, int(ext.get("masterEpoch") or 0), now_ms)
        raise LoadError("a node closed a poll connection")

    async def _sweep(self, link: _Link) -> None:
        while not link.lost:
            await trio.sleep(SWEEP_EVERY_S)
            deadline = trio.current_time() - POLL_TIMEOUT_S
            self._give_up(link, [opaque for opaque, (_, sent) in link.pending.items() if sent < deadline])

    def _give_up(self, link: _Link, opaques: list[int]) -> None:
        for opaque in opaques:
            broker, _ = link.pending.pop(opaque)
            self._outstanding[broker] = 0
            link.counts.timed_out += 1

    def figures(self, now: float) -> dict[str, object]:
        """Totals over the nodes, then per node (its answers, refusals, timeouts, answer times)."""
        elapsed = now - self.started_at if self.started_at is not None else 0.0
        nodes = list(self.by_node.values())

        def total(name: str) -> int:
            return sum(getattr(c, name) for c in nodes)

        refused_by_code: collections.Counter[str] = collections.Counter()
        for counts in nodes:
            refused_by_code.update(counts.refused_by_code)
        return {
            "poll_period_s": self.period_s,
            "polls_sent": total("sent"), "polls_answered": total("answered"),
            "polls_answered_per_s": round(total("answered") / elapsed, 1) if elapsed > 0 else None,
            "polls_refused": total("refused"), "polls_refused_by_code": dict(refused_by_code),
            "polls_timed_out": total("timed_out"), "poll_answers_after_timeout": total("answers_after_timeout"),
            "polls_skipped_previous_unanswered": total("skipped_outstanding"),
            "poll_connections_lost": total("connections_lost"),
            "poll_worst_lateness_ms": round(1000 * self.worst_late_s, 1),
            "polls_late_over_1s": self.late_over_1s,
            "poll_worst_answer_ms": round(1000 * max((c.worst_answer_s for c in nodes), default=0.0), 1),
            "poll_answers_over_1s": total("answers_over_1s"),
            "poll_worst_write_blocked_ms": round(1000 * max((c.worst_write_blocked_s for c in nodes), default=0.0), 1),
            "poll_writes_blocked_over_1s": total("writes_blocked_over_1s"),
            "polls_by_node": {node: {"answered": c.answered, "refused": c.refused, "timed_out": c.timed_out,
                                     "worst_answer_ms": round(1000 * c.worst_answer_s, 1),
                                     "answers_over_1s": c.answers_over_1s,
                                     "worst_write_blocked_ms": round(1000 * c.worst_write_blocked_s, 1)}
                              for node, c in self.by_node.items()},
        }
