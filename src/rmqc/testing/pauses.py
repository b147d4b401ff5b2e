"""Process pauses on a real cluster (Jepsen's pause nemesis): SIGSTOP a node of running `rmqc serve`
processes for a while, SIGCONT it, repeat, under a broker-like write load, and measure per pause
what issue 13 asks of the cluster:

- `recovery_ms`: after a leader is paused, the time from SIGSTOP until another node accepts a
  durable write (a probe writes to every survivor every few ms); after a follower is paused, the
  longest gap between acknowledged writes of the load in the window (the cluster should not notice).
- `silence_ms`: per node that was not paused, the longest a private status request (60001, sent
  every PROBE_INTERVAL_S on one connection per node, one at a time) waited for its answer during
  the window (SIGSTOP until the cluster settled after SIGCONT).
- `stale_reads`: 1012 reads at `linearizable` and `lease` on every node that returned a next id not
  above an id acknowledged before the read was sent.
- `lost`: acknowledged ids that a linearizable read on every node no longer shows at the end.

The load is shaped like a broker registering (1012 GET_NEXT_BROKER_ID, then 1013 APPLY_BROKER_ID of
that id with a check code derived from it, so a retry is idempotent), moving to the next node when
a node does not answer within ATTEMPT_TIMEOUT_S, as a broker moves between controllers.

The cluster is started and signalled through rmqc.launcher (by PID); every wait is bounded.
tests/cluster/test_pauses.py runs a short version, bench/_scn_pauses.py the long one.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import trio

from rmqc.launcher import ServeCluster, free_ports, serve_nodes
from rmqc.remoting import (
    RMQC_NODE_STATUS,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode,
    make_request,
)

__all__ = ["PauseConfig", "PauseResult", "PauseRun", "run_pauses"]

PROBE_INTERVAL_S = 0.010
ATTEMPT_TIMEOUT_S = 0.25  # a broker gives a controller this long before trying the next one
FAILOVER_PROBE_PAUSE_S = 0.005
READ_INTERVAL_S = 0.05  # per node and level
IDS_PER_SET = 100  # ids one writer registers in a broker set before moving to a fresh set
CLUSTER_NAME = "PauseCluster"
HEALTHY_TIMEOUT_S = 30.0  # a cluster that does not come back within this is a failure, not a wait
SETTLE_S = 1.0  # observed after the cluster is healthy again following SIGCONT
RECEIVE_BYTES = 65536
LAG_PROBE_S = 0.005
LAG_RECORDED_S = 0.010


class PauseRunFailed(RuntimeError):
    """The cluster did not become healthy again within HEALTHY_TIMEOUT_S."""


@dataclass(frozen=True)
class PauseConfig:
    pauses: int = 4  # alternating leader, follower, leader, ...
    pause_s: float = 3.0
    writes_per_s: float = 300.0
    writers: int = 8  # each does 1012 + 1013 in turn, so a few are needed for a few hundred a second
    between_s: float = 1.0  # healthy time between two pauses
    settings: tuple[str, ...] = ()  # --set OPTION=VALUE for every node
    program: tuple[str, ...] = ()  # what runs `rmqc` (another tree's, for a before/after); default: ours


@dataclass
class PauseResult:
    index: int
    kind: str  # "leader" or "follower"
    node: str
    recovery_ms: float = 0.0
    silence_ms: dict[str, float] = field(default_factory=dict)  # less the harness's own lateness
    raw_silence_ms: dict[str, float] = field(default_factory=dict)  # as the harness saw it
    stale_reads: int = 0
    # The longest this harness's own loop was late in the window: a silence this long on every node
    # at once is the harness (or the machine) stalling, not the nodes.
    harness_lag_ms: float = 0.0
    loadavg_1m: float = 0.0  # of the machine at the end of the window (other work shows here)

    @property
    def worst_silence_ms(self) -> float:
        return max(self.silence_ms.values(), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "node": self.node, "recovery_ms": round(self.recovery_ms, 1),
                "silence_ms": {k: round(v, 1) for k, v in self.silence_ms.items()},
                "worst_silence_ms": round(self.worst_silence_ms, 1),
                "worst_raw_silence_ms": round(max(self.raw_silence_ms.values(), default=0.0), 1),
                "stale_reads": self.stale_reads,
                "harness_lag_ms": round(self.harness_lag_ms, 1), "loadavg_1m": round(self.loadavg_1m, 2)}


class _Conn:
    """One remoting connection, one request at a time; any failure or timeout closes it."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._stream: trio.SocketStream | None = None
        self._decoder = FrameDecoder()
        self._opaques = itertools.count(1)

    async def call(self, code: int, ext: Mapping[str, object] | None, timeout_s: float) -> RemotingCommand | None:
        with trio.move_on_after(timeout_s):
            try:
                return await self._call(code, ext)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, EOFError):
                pass
        await self.close()
        return None

    async def _call(self, code: int, ext: Mapping[str, object] | None) -> RemotingCommand:
        if self._stream is None:
            host, _, port = self.address.rpartition(":")
            self._stream = await trio.open_tcp_stream(host, int(port))
            self._decoder = FrameDecoder()
        opaque = next(self._opaques)
        await self._stream.send_all(encode(make_request(code, opaque, ext)))
        while True:
            data = await self._stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise EOFError(self.address)
            for response in self._decoder.feed(data):
                if response.opaque == opaque:
                    return response

    async def __aenter__(self) -> _Conn:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await trio.aclose_forcefully(stream)


@dataclass
class _Probe:
    """The status requests of one node: (sent, answered or None) pairs, and the last status body."""

    samples: list[tuple[float, float | None]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    answered_at: float = 0.0

    def silence_s(self, start: float, end: float,
                  harness_late: Callable[[float, float], float]) -> tuple[float, float]:
        """The longest wait for an answer among requests outstanding at some time in [start, end]:
        as seen (raw), and less the longest time this harness itself was late meanwhile (it could
        not have seen an answer sooner: that part of the wait is the harness's, not the node's)."""
        raw = net = 0.0
        for sent, answered in reversed(self.samples):
            if answered is not None and answered < start:
                break
            if sent <= end:
                since, until = max(sent, start), min(answered if answered is not None else end, end)
                raw = max(raw, until - since)
                net = max(net, until - since - harness_late(since, until))
        return raw, max(0.0, net)


@dataclass
class _Writer:
    index: int
    run: str
    sets: int = 0
    acked: int = 0  # ids acknowledged in the current set: ids 1..acked
    acked_total: int = 0
    ack_times: list[float] = field(default_factory=list)
    node: int = 0

    @property
    def set_name(self) -> str:
        return f"{self.run}-w{self.index}-s{self.sets}"


class PauseRun:
    """A 3-node cluster under the broker-like load, with probes, readers and the pause sequence."""

    def __init__(self, root: Path, config: PauseConfig) -> None:
        self.config = config
        self.cluster = ServeCluster(serve_nodes(root, free_ports(3), settings=config.settings,
                                                program=config.program or None))
        self.ids = [node.node_id for node in self.cluster.nodes]
        self.probes = {node_id: _Probe() for node_id in self.ids}
        self.writers = [_Writer(i, f"p{int(time.time() * 1000)}") for i in range(config.writers)]
        self.results: list[PauseResult] = []
        self.stale_reads: list[str] = []
        self.lost: list[str] = []
        self.started = time.monotonic()
        self.timeline: list[tuple[Any, ...]] = []  # (s since start, node, role, term, leader, commit, last)
        self.events: list[tuple[float, str]] = []  # (s since start, what the pauser did)
        self._last_seen: dict[str, tuple[Any, ...]] = {}
        self.harness_lags: list[tuple[float, float]] = []  # (monotonic, seconds late)

    def address(self, node_id: str) -> str:
        return self.cluster.node(node_id).address

    # ----- background tasks -----

    async def _probe(self, node_id: str) -> None:
        async with _Conn(self.address(node_id)) as conn:
            await self._probe_with(node_id, conn)

    async def _probe_with(self, node_id: str, conn: _Conn) -> None:
        probe = self.probes[node_id]
        while True:
            sent = time.monotonic()
            probe.samples.append((sent, None))
            slot = len(probe.samples) - 1
            answer = await conn.call(RMQC_NODE_STATUS, None, HEALTHY_TIMEOUT_S)
            now = time.monotonic()
            probe.samples[slot] = (sent, now)  # a refused connection is an answer too, not silence
            if answer is not None and answer.code == ResponseCode.SUCCESS and answer.body:
                probe.status, probe.answered_at = orjson.loads(answer.body), now
                self._note_change(node_id, now, probe.status)
            await trio.sleep_until(trio.current_time() + max(0.0, sent + PROBE_INTERVAL_S - time.monotonic()))

    async def _watch_own_lag(self) -> None:
        """Record when this process's loop woke up later than asked (CPU starvation of the harness)."""
        while True:
            asked = time.monotonic()
            await trio.sleep(LAG_PROBE_S)
            late = time.monotonic() - asked - LAG_PROBE_S
            if late > LAG_RECORDED_S:
                self.harness_lags.append((asked, late))

    def _harness_lag_s(self, start: float, end: float) -> float:
        """The longest stretch of [start, end] during which this harness's loop was late."""
        stalls = ((at + LAG_PROBE_S, at + LAG_PROBE_S + late) for at, late in self.harness_lags)
        return max((min(until, end) - max(since, start) for since, until in stalls
                    if since < end and until > start), default=0.0)

    def _note_change(self, node_id: str, now: float, status: dict[str, Any]) -> None:
        """Role, term and leader changes of every node, with the log position: the timeline that
        explains a slow recovery."""
        key = (status.get("role"), status.get("term"), status.get("leader"))
        if self._last_seen.get(node_id) != key:
            self._last_seen[node_id] = key
            self.timeline.append((round(now - self.started, 3), node_id, *key, status.get("commit"),
                                  status.get("lastIndex")))

    async def _write_loop(self, writer: _Writer) -> None:
        interval_s = self.config.writers / self.config.writes_per_s
        conns = [_Conn(self.address(node_id)) for node_id in self.ids]
        next_s = trio.current_time()
        try:
            while True:
                await self._register_one(writer, conns)
                next_s = max(next_s + interval_s, trio.current_time() - 1.0)  # no burst after a stall
                await trio.sleep_until(next_s)
        finally:
            for conn in conns:
                await conn.close()

    async def _register_one(self, writer: _Writer, conns: list[_Conn]) -> None:
        """1012 then 1013 at the writer's node; a node that does not answer in time is left."""
        name = writer.set_name
        conn = conns[writer.node]
        sent = time.monotonic()
        answer = await conn.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                 {"clusterName": CLUSTER_NAME, "brokerName": name}, ATTEMPT_TIMEOUT_S)
        if answer is None or answer.code != ResponseCode.SUCCESS:
            writer.node = (writer.node + 1) % len(conns)
            return
        next_id = int(answer.ext("nextBrokerId") or 0)
        if next_id <= writer.acked:
            self.stale_reads.append(f"{name}: 1012 (linearizable) at {conn.address} sent {sent:.3f} -> "
                                    f"{next_id}, id {writer.acked} was acknowledged before")
        ext = {"clusterName": CLUSTER_NAME, "brokerName": name, "appliedBrokerId": next_id,
               "registerCheckCode": f"10.9.{writer.index}.{next_id % 250}:10911;{next_id}"}
        answer = await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext, ATTEMPT_TIMEOUT_S)
        if answer is None or answer.code != ResponseCode.SUCCESS:
            writer.node = (writer.node + 1) % len(conns)
            return
        writer.acked = max(writer.acked, next_id)
        writer.acked_total += 1
        writer.ack_times.append(time.monotonic())
        if writer.acked >= IDS_PER_SET:
            writer.sets, writer.acked = writer.sets + 1, 0

    async def _read_loop(self, node_id: str, level: str) -> None:
        async with _Conn(self.address(node_id)) as conn:
            await self._read_with(conn, node_id, level)

    async def _read_with(self, conn: _Conn, node_id: str, level: str) -> None:
        writer = self.writers[0]
        while True:
            name, acked, sent = writer.set_name, writer.acked, time.monotonic()
            answer = await conn.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                     {"clusterName": CLUSTER_NAME, "brokerName": name, "consistency": level},
                                     ATTEMPT_TIMEOUT_S)
            if answer is not None and answer.code == ResponseCode.SUCCESS:
                next_id = int(answer.ext("nextBrokerId") or 0)
                if name == writer.set_name and next_id <= acked:
                    self.stale_reads.append(f"{name}: 1012 ({level}) at {node_id} sent {sent:.3f} -> {next_id}, "
                                            f"id {acked} was acknowledged before")
            await trio.sleep(READ_INTERVAL_S)

    # ----- the pause sequence -----

    def _leader(self) -> str | None:
        """The node that says it serves as leader, if every node answered a probe recently and
        agrees on it."""
        now = time.monotonic()
        leaders = {probe.status.get("leader") for probe in self.probes.values()}
        serving = [node_id for node_id, probe in self.probes.items() if probe.status.get("servingAsLeader")]
        fresh = all(now - probe.answered_at < 0.5 for probe in self.probes.values())
        if fresh and len(serving) == 1 and leaders == {serving[0]}:
            return serving[0]
        return None

    async def _healthy(self, since: float) -> str:
        """Wait until every node agrees on a leader and a write was acknowledged after `since`."""
        with trio.move_on_after(HEALTHY_TIMEOUT_S):
            while True:
                leader = self._leader()
                written = any(w.ack_times and w.ack_times[-1] > since for w in self.writers)
                if leader is not None and written:
                    return leader
                await trio.sleep(0.02)
        raise PauseRunFailed(f"cluster not healthy {HEALTHY_TIMEOUT_S:g} s after {since:.3f}: "
                             f"{ {n: p.status.get('role') for n, p in self.probes.items()} }")

    async def _first_write_on(self, survivors: list[str], t0: float) -> float:
        """Seconds from t0 until one of `survivors` accepts a durable write (id 1 of a fresh set,
        valid whatever happened before), each tried every few ms."""
        accepted: list[float] = []

        async def keep_writing(node_id: str, cancel: trio.CancelScope) -> None:
            async with _Conn(self.address(node_id)) as conn:
                await write_until_accepted(conn, node_id, cancel)

        async def write_until_accepted(conn: _Conn, node_id: str, cancel: trio.CancelScope) -> None:
            for attempt in itertools.count():
                ext = {"clusterName": CLUSTER_NAME, "brokerName": f"f{t0:.3f}-{node_id}-{attempt}",
                       "appliedBrokerId": 1, "registerCheckCode": "10.9.9.9:10911;1"}
                answer = await conn.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ext, ATTEMPT_TIMEOUT_S)
                if answer is not None and answer.code == ResponseCode.SUCCESS:
                    accepted.append(time.monotonic())
                    cancel.cancel()
                    return
                await trio.sleep(FAILOVER_PROBE_PAUSE_S)

        with trio.move_on_after(HEALTHY_TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                for node_id in survivors:
                    nursery.start_soon(keep_writing, node_id, nursery.cancel_scope)
        if not accepted:
            raise PauseRunFailed(f"no write accepted by {survivors} within {HEALTHY_TIMEOUT_S:g} s")
        return min(accepted) - t0

    def _write_gap_s(self, start: float, end: float) -> float:
        times = sorted(t for w in self.writers for t in w.ack_times if start <= t <= end)
        points = [start, *times, end]
        return max(b - a for a, b in itertools.pairwise(points))

    async def _one_pause(self, index: int, kind: str) -> PauseResult:
        leader = await self._healthy(time.monotonic())
        target = leader if kind == "leader" else next(n for n in self.ids if n != leader)
        process = self.cluster.node(target).process
        assert process is not None
        stale_before = len(self.stale_reads)
        start = time.monotonic()
        process.signal(signal.SIGSTOP)
        self.events.append((round(start - self.started, 3), f"SIGSTOP {target} ({kind})"))
        result = PauseResult(index, kind, target)
        survivors = [n for n in self.ids if n != target]
        if kind == "leader":
            result.recovery_ms = await self._first_write_on(survivors, start) * 1000
        await trio.sleep_until(trio.current_time() + max(0.0, start + self.config.pause_s - time.monotonic()))
        resumed = time.monotonic()
        process.signal(signal.SIGCONT)
        self.events.append((round(resumed - self.started, 3), f"SIGCONT {target}"))
        await self._healthy(resumed)
        await trio.sleep(SETTLE_S)
        end = time.monotonic()
        if kind == "follower":
            result.recovery_ms = self._write_gap_s(start, end) * 1000
        silences = {n: self.probes[n].silence_s(start, end, self._harness_lag_s) for n in survivors}
        result.silence_ms = {n: net * 1000 for n, (_, net) in silences.items()}
        result.raw_silence_ms = {n: raw * 1000 for n, (raw, _) in silences.items()}
        result.stale_reads = len(self.stale_reads) - stale_before
        result.harness_lag_ms = self._harness_lag_s(start, end) * 1000
        result.loadavg_1m = os.getloadavg()[0]
        return result

    async def _check_lost(self) -> None:
        """Every acknowledged id must still be there, read at linearizable on every node."""
        await self._healthy(0.0)
        for writer in self.writers:
            for node_id in self.ids:
                async with _Conn(self.address(node_id)) as conn:
                    answer = await conn.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                             {"clusterName": CLUSTER_NAME, "brokerName": writer.set_name}, 5.0)
                if answer is None or answer.code != ResponseCode.SUCCESS:
                    raise PauseRunFailed(f"final read of {writer.set_name} at {node_id} failed: {answer}")
                if int(answer.ext("nextBrokerId") or 0) <= writer.acked:
                    self.lost.append(f"{writer.set_name}: id {writer.acked} acknowledged, {node_id} says next "
                                     f"{answer.ext('nextBrokerId')}")

    async def run(self, on_pause: Any = None) -> list[PauseResult]:
        await self.cluster.start_async()
        try:
            async with trio.open_nursery() as probes:
                probes.start_soon(self._watch_own_lag)
                for node_id in self.ids:
                    probes.start_soon(self._probe, node_id)
                async with trio.open_nursery() as load:
                    for node_id in self.ids:
                        for level in ("linearizable", "lease"):
                            load.start_soon(self._read_loop, node_id, level)
                    for writer in self.writers:
                        load.start_soon(self._write_loop, writer)
                    await self._pause_sequence(on_pause)
                    load.cancel_scope.cancel()  # the load ends before the final reads
                await self._check_lost()
                probes.cancel_scope.cancel()
        finally:
            await self.cluster.stop_async()
        return self.results

    async def _pause_sequence(self, on_pause: Any) -> None:
        for index in range(self.config.pauses):
            kind = "leader" if index % 2 == 0 else "follower"
            result = await self._one_pause(index, kind)
            self.results.append(result)
            if on_pause is not None:
                on_pause(result)
            await trio.sleep(self.config.between_s)

    def summary(self) -> dict[str, Any]:
        leader = [r.recovery_ms for r in self.results if r.kind == "leader"]
        follower = [r.recovery_ms for r in self.results if r.kind == "follower"]
        acked = sum(w.acked_total for w in self.writers)
        elapsed_s = time.monotonic() - self.started
        return {"pauses": len(self.results), "worst_leader_recovery_ms": round(max(leader, default=0.0), 1),
                "worst_follower_write_gap_ms": round(max(follower, default=0.0), 1),
                "worst_silence_ms": round(max((r.worst_silence_ms for r in self.results), default=0.0), 1),
                "worst_raw_silence_ms": round(max((max(r.raw_silence_ms.values(), default=0.0)
                                                   for r in self.results), default=0.0), 1),
                "stale_reads": len(self.stale_reads), "lost": len(self.lost),
                "worst_harness_lag_ms": round(max((r.harness_lag_ms for r in self.results), default=0.0), 1),
                "acked_writes": acked, "acked_writes_per_s": round(acked / max(1e-9, elapsed_s), 1)}


async def run_pauses(root: Path, config: PauseConfig, on_pause: Any = None) -> PauseRun:
    run = PauseRun(root, config)
    await run.run(on_pause)
    return run
