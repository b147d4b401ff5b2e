"""One controller node: a Trio nursery around its sans-IO replica (rmqc.replica).

The replica decides everything; this shell only does the I/O (design.md "Layers and data flow").
Every input reaches the replica through its `Runner` (rmqc.replica._runner, the scheduler the
simulator runs too), which decides when a driver pass runs and drains the outbox into `_perform`:
Raft messages to the peer outboxes (a leader's appends before its own fsync), answers straight to
their sockets, 1008s to the notifier. Tasks (all in the node's nursery, all cancelled together on
shutdown):
- driver: makes the passes the runner schedules (`replica.drive()` touches the Raft core and saves
  each Ready through the saver: one journal record + fdatasync in the saver's thread, waited for in
  the loop up to its patience, then left to run on while the node goes on: rmqc.node._saver);
  between two passes it yields so that peer readers, the server and the timer run.
- timer: sleeps until `replica.next_wakeup_ms()` (ticks the core acts on, heartbeat deadlines,
  digests, forward timeouts, the successor grace) and hands the time to the runner, which makes
  the pass that made due at once: one wake-up, and the next one planned after it.
- peer links, the listening server, the notifier (1008 transport), snapshot writes (their storage
  steps in the saver's thread).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn

import trio

from rmqc.config import NodeConfig, java_properties_of
from rmqc.controller import ControllerConfig
from rmqc.errors import CompactedError, ConfigError, RmqcError, SnapshotOutOfDateError
from rmqc.fsm import ApplyResult, Command
from rmqc.metrics import NodeMetrics
from rmqc.peerwire import FrameKind, PeerProtocolError, Reply as PeerReply, encode_tagged
from rmqc.raft import ConfState, Message
from rmqc.remoting import (
    RMQC_EVENTS,
    FrameDecoder,
    RemotingCommand,
    dumps_properties,
    encode,
)
from rmqc.replica import (
    Answer,
    ForwardRequest,
    MembersChanged,
    Notify,
    Replica,
    RequestFailed,
    Runner,
    SendDigest,
    SendRaft,
    SnapshotOutcome,
    StopProcess,
    WriteSnapshot,
    client_origin,
    master_epoch_of,
)
from rmqc.storage import (
    FAULT_FILE_ENV,
    LmdbStorage,
    NodeIdentity,
    StorageFullError,
    StorageWriteFailed,
    acquire_node_lock,
    claim_identity,
    open_for_repair,
    open_verified,
)

from ._clock import TrioClock
from ._events import EventReaders
from ._health import HealthMonitor
from ._join import join_group
from ._loop_load import LoopLoad
from ._notifier import Notifier
from ._peers import PeerLinks
from ._saver import BackgroundSaver
from ._server import Channel, Respond, Server
from ._tls import notify_client_context

log = logging.getLogger("rmqc.node")

# Entries a node's compaction deletes per transaction, one step of _write_snapshot in the event
# loop's thread between two checkpoints; 1,000 take about 1 ms (bench/bench_snapshot_stall.py).
NODE_SWEEP_BATCH_ENTRIES = 1_000
# How often a stopping node looks whether its handover ended and its requests were answered.
STOP_POLL_S = 0.002
# The exit status of a node stopped by a failed write or fsync (sysexits.h EX_IOERR).
EXIT_STORAGE_FAILED = 74

__all__ = ["ControllerNode", "RequestFailed", "stop_process_now"]


def stop_process_now(message: str) -> NoReturn:
    """A write or fsync failed (not for lack of space): end the process at once, before anything
    else can run. No retry (the kernel may have dropped the pages it had accepted: PostgreSQL's
    fsyncgate), no acknowledgement, no `finally` that writes: a restart recovers from what is
    durable, or refuses with `rmqc log verify`'s finding."""
    log.critical("%s", message)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(EXIT_STORAGE_FAILED)


async def _poll_until(done: Callable[[], bool], timeout_s: float) -> bool:
    """Look whether `done()` every STOP_POLL_S, for at most `timeout_s`; whether it is done."""
    with trio.move_on_after(timeout_s):
        while not done():
            await trio.sleep(STOP_POLL_S)
    return done()


def check_own_membership(config: NodeConfig, conf_state: ConfState, repairing: bool = False) -> None:
    """Refuse to serve what can never work, with the reason (ConfigError): a node with no
    membership that is not joining (`listen` without `peers` or `join` on a data directory without
    a log: it would wait in term 0 for a leader that cannot exist), or a member whose log records
    it at another address than it would listen on (its peers and brokers look for it there; a
    restart with `--data-dir` alone would take the default 127.0.0.1:9878)."""
    if not conf_state.members and not config.join and not repairing:
        raise ConfigError(
            f"{config.data_dir} holds no log, and neither peers nor join was given: there is no group to "
            f"serve; start a new group with --peers {config.node_id}-{config.listen_address} (one node; list "
            "every voter for more), or join a running one with --join HOST:PORT")
    recorded = dict(conf_state.addresses).get(config.node_id)
    if recorded is not None and recorded != config.listen_address:
        raise ConfigError(
            f"the log in {config.data_dir} records {config.node_id} at {recorded}, but it would listen on "
            f"{config.listen_address}; restart it with --listen {recorded} (a member moves to another address "
            "only by a replacement: rmqc admin members replace)")


class ControllerNode:
    def __init__(self, config: NodeConfig, *, rng: random.Random | None = None,
                 stop_now: Callable[[str], None] = stop_process_now, repair: bool = False) -> None:
        self.config = config
        self._repair = repair  # rmqc serve --repair: a damaged data directory rejoins (open_for_repair)
        self._stop_now = stop_now  # on a failed write or fsync
        self._rng = rng or random.Random()
        self.links = PeerLinks(config, self, self._rng)
        self.notifier = Notifier(notify_client_context(self.config), on_sent=self._notification_sent)
        self.event_readers = EventReaders()  # rmqc events' long polls
        self.server = Server(config, self, self.links)
        self.node_metrics = NodeMetrics()  # Prometheus series of this node (own registry)
        # liveness checks; a snapshot of every check for /livez and /readyz when the metrics port is set
        self.health = HealthMonitor(self, publish=config.metrics_port is not None)
        self.listen_address = config.listen_address
        self.storage: LmdbStorage | None = None
        self.saver: BackgroundSaver | None = None  # the driver's saves and the snapshot's writes (from run() on)
        self.replica: Replica | None = None  # from run() on: it needs the opened storage and Trio's clock
        self.started = trio.Event()
        self.members: dict[str, str] = {}  # the applied address book (MembersChanged), this node included
        self.is_member = False  # this node is a voter or learner of the applied membership
        self._pass_due = trio.Event()  # the runner scheduled a pass: the driver task makes it
        self._rearmed = trio.Event()  # the replica's next wake-up moved earlier
        self._failed_pass: Exception | None = None  # raised by the driver task: the node stops
        self._nursery: trio.Nursery | None = None
        self.runner = Runner(self._perform_action, self._schedule_pass, self._runner_failed)
        self._perform: dict[type, Callable[[Any], None]] = {
            SendRaft: self._send_raft,
            ForwardRequest: self._forward,
            SendDigest: self._send_digest,
            Answer: self._answer,
            Notify: self._notify,
            WriteSnapshot: self._start_snapshot_write,
            StopProcess: self._stop,
            MembersChanged: self.members_changed,
        }

    # ----- lifecycle -----

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        lock = acquire_node_lock(self.config.data_dir)
        loop_load = LoopLoad(self.node_metrics.loop_busy, self.node_metrics.loop_stretches)
        trio.lowlevel.add_instrument(loop_load)
        try:
            claim_identity(self.config.data_dir, NodeIdentity(self.config.node_id, self.config.group))
            self.storage = await trio.to_thread.run_sync(self._open_storage)
            if self.storage.fault_hook is not None:
                log.warning("%s: the TEST-ONLY storage fault hook is on (%s=%s): never in production",
                            self.config.node_id, FAULT_FILE_ENV, self.storage.fault_hook.control)
            saver = self.saver = BackgroundSaver(self.storage)
            saver.on_save_finished = self._save_finished
            saver.start()
            runner = self.runner
            self.replica = Replica(
                self.config, self.storage, TrioClock(), self._rng, runner.outbox,
                controller_config=ControllerConfig.from_properties(dumps_properties(java_properties_of(self.config))),
                observer=self.node_metrics, wake=runner.wake, rearm=self._rearm, saver=saver,
                flush=runner.flush)
            runner.attach(self.replica)
            self.replica.shell_health = self.health.liveness_here
            self.replica.events.listener = self.event_readers.wake
            check_own_membership(self.config, self.replica.conf_state, self.replica.repairing)
            try:
                await self._serve(task_status)
            finally:
                self.runner.input(self.replica.stop, "node stopping")
                saver.close()
                self.replica.close()
                self.storage.close()
        finally:
            trio.lowlevel.remove_instrument(loop_load)
            lock.release()

    def _open_storage(self) -> LmdbStorage:
        """The verified storage; with --repair, a damaged one is set aside and opened for repair."""
        if not self._repair:
            return open_verified(self.config.data_dir)
        storage, started = open_for_repair(self.config.data_dir)
        if started is None:
            log.info("%s: --repair: no damage found in %s%s", self.config.node_id, self.config.data_dir,
                     "; the repair begun earlier goes on" if storage.repair_reason() else "")
        else:
            log.warning("%s: --repair: %s; kept %s; the damaged files are in %s", self.config.node_id,
                        started.reason, started.kept, started.evidence)
        return storage

    async def _serve(self, task_status: trio.TaskStatus[str]) -> None:
        peer = self.config.self_peer
        listeners = await trio.open_tcp_listeners(peer.port, host=peer.host)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._driver, name="driver")
            nursery.start_soon(self._timer, name="timer")
            nursery.start_soon(self.health.run, name="health")
            await nursery.start(self.links.run)
            await nursery.start(self.notifier.run)
            nursery.start_soon(self.server.serve, listeners, name="server")
            if self.config.join and not self.is_member:
                nursery.start_soon(self._join, name="join")
            self.started.set()
            task_status.started(self.listen_address)

    async def stop_gracefully(self, drain_s: float) -> None:
        """SIGTERM, Ctrl-C: a leader hands its role to the most up-to-date voter (Replica.
        begin_graceful_stop; at most two election timeouts, the core gives up after one), taking
        requests meanwhile (writes are held and then forwarded to the new leader); then no new
        request is read and those in flight get `drain_s` to be answered. `shutdown` follows."""
        replica = self.replica
        if replica is None:
            return
        config = self.config
        if self.runner.input(replica.begin_graceful_stop):
            election_timeout_s = config.election_tick * config.tick_ms / 1000
            if not await _poll_until(lambda: not replica.handing_over, 2 * election_timeout_s + config.tick_ms / 1000):
                log.warning("%s: stopping: the handover did not end within two election timeouts; stopping anyway",
                            config.node_id)
        self.server.draining = True
        self.event_readers.release()  # a long poll would hold the drain until its wait ends
        in_flight = self.server.requests_in_flight
        await _poll_until(lambda: not self.server.requests_in_flight, drain_s)
        left = self.server.requests_in_flight
        log.info("%s: stopping: %d requests were in flight, %d answered, %d not answered within %d ms", config.node_id,
                 in_flight, in_flight - left if left <= in_flight else in_flight, left, drain_s * 1000)

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking work, fail what waits, and give the answers `grace_s` to be written."""
        if self.replica is not None:
            self.runner.input(self.replica.stop, "node stopping")
        await _poll_until(lambda: not self.server.requests_in_flight, grace_s)

    async def _join(self) -> None:
        """Ask the group to add this node (rmqc.node._join); a refusal ends the node (JoinFailed)."""
        change = await join_group(self.config, self._rng)
        log.info("%s: added to the group as a learner at %s (index %s); catching up from the leader",
                 self.config.node_id, self.listen_address, change.get("index"))

    def members_changed(self, action: MembersChanged) -> None:
        """The applied membership: links to exactly its other members; a node outside it (joining,
        or removed) dials no one and accepts any member of its group (PeerLinks.set_members)."""
        was_member, self.is_member = self.is_member, self.config.node_id in (*action.voters, *action.learners)
        self.members = dict(action.addresses)
        self.links.set_members(self.members, member=self.is_member)
        voters, learners = ", ".join(action.voters) or "none", ", ".join(action.learners) or "none"
        if was_member and not self.is_member:
            log.warning("%s: removed from the membership at index %d (voters %s, learners %s): this node takes no "
                        "part any more and idles; stop its process", self.config.node_id, action.index, voters,
                        learners)
        else:
            log.info("%s: membership at index %d: voters %s, learners %s", self.config.node_id, action.index,
                     voters, learners)

    def status(self) -> Any:
        """The replica's published ReplicaStatus (None before the node runs)."""
        return None if self.replica is None else self.replica.status()

    def quiescent(self) -> bool:
        """Nothing is waiting to be decided, proposed or committed (tests wait on this)."""
        return self.replica is not None and self.replica.quiescent() and not self.runner.pass_scheduled

    @property
    def _live(self) -> Replica:
        """The replica, to the peer links, the server, the notifier, the saver and the timer: each
        calls in only from `_serve` on (or from the replica's own actions), after `run` made it."""
        replica = self.replica
        assert replica is not None
        return replica

    # ----- the two tasks that run the replica -----

    def _runner_failed(self, error: Exception) -> None:
        """A call into the replica raised (in any task): the driver task raises it, which stops the
        node as a failure in its own pass would, not only the connection whose input it was."""
        self._failed_pass = error
        self._pass_due.set()

    def _schedule_pass(self) -> None:
        self._pass_due.set()

    def _rearm(self) -> None:
        self._rearmed.set()

    def _save_finished(self, error: Exception | None) -> None:
        """The saver thread ended a save the driver left to it: the Ready goes on."""
        self.runner.input(self._live.save_finished, error)

    async def _driver(self) -> None:
        runner = self.runner
        while True:
            await self._pass_due.wait()  # a checkpoint even when set: the others run between passes
            self._pass_due = trio.Event()
            if self._failed_pass is not None:
                raise self._failed_pass
            runner.run_pass()

    async def _timer(self) -> None:
        replica = self._live
        while True:
            with trio.move_on_at(TrioClock.trio_time_of(replica.next_wakeup_ms())):
                await self._rearmed.wait()
            self._rearmed = trio.Event()
            self.runner.timer()

    # ----- peers (PeerLinks calls these) -----

    def raft_term(self) -> int:
        return self._live.term

    def on_raft_messages(self, sender: str, messages: list[Message]) -> None:
        self.runner.input(self._live.raft_messages, sender, messages)

    def on_peer_unreachable(self, peer_id: str) -> None:
        self.runner.input(self._live.peer_unreachable, peer_id)

    def on_peer_down(self, peer_id: str) -> None:
        self.runner.input(self._live.peer_down, peer_id)

    def on_snapshot_sent(self, peer_id: str, ok: bool) -> None:
        self.runner.input(self._live.snapshot_sent, peer_id, ok)

    def on_digest(self, sender: str, payload: bytes) -> None:
        self.runner.input(self._live.digest, sender, payload)

    def on_forward_request(self, sender: str, tag: int, frame: bytes, reply: PeerReply) -> None:
        try:
            (request,) = FrameDecoder(self.config.max_frame_bytes).feed(frame)
        except (RmqcError, ValueError) as error:
            log.warning("bad forwarded request: %s", error)
            return

        def answer(response: RemotingCommand | None) -> None:
            if response is not None and not request.is_oneway and self._nursery is not None:
                self._nursery.start_soon(self._reply_forward, reply, tag, response)

        self.runner.request(self._live.forwarded_request, sender, request, answer)

    async def _reply_forward(self, reply: PeerReply, tag: int, response: RemotingCommand) -> None:
        with (trio.move_on_after(self.config.request_timeout_ms / 1000),
              contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError)):
            await reply(FrameKind.FORWARD_RESPONSE, encode_tagged(tag, encode(response)))

    def on_forward_response(self, sender: str, tag: int, frame: bytes) -> None:
        try:
            (response,) = FrameDecoder(self.config.max_frame_bytes).feed(frame)
        except (RmqcError, ValueError) as error:
            raise PeerProtocolError(f"bad forwarded response: {error}") from error
        self.runner.input(self._live.forwarded_response, tag, response)

    # ----- remoting connections (Server calls these) -----

    def serve_now(self, request: RemotingCommand, channel: Channel, respond: Respond) -> None:
        """Take any request without a task: `respond` runs once, now or when the replica answers."""
        replica = self._live
        started_s = trio.current_time()

        def answer(response: RemotingCommand | None) -> None:
            code = None if response is None else response.code
            self.node_metrics.observe_request(request.code, code, trio.current_time() - started_s)
            respond(response)

        if request.code == RMQC_EVENTS and self._nursery is not None:  # a long poll: a task of its own
            self._nursery.start_soon(self._answer_events, replica, request, answer, name="events-reader")
            return
        self.runner.request(replica.client_request, request, channel.id, answer,
                            client_origin(request, channel.remote, self.config.node_id,
                                          acl_enabled=self.config.acl_enabled))

    async def _answer_events(self, replica: Replica, request: RemotingCommand,
                             answer: Callable[[RemotingCommand | None], None]) -> None:
        answer(await self.event_readers.answer(replica.events, request))

    def _notification_sent(self, address: str, command: RemotingCommand) -> None:
        """The notifier sent a 1008: the failover's `notified` step, and its latency since the commit."""
        self.runner.input(self._live.notification_sent, address, master_epoch_of(command))

    def handle_oneway_now(self, request: RemotingCommand, channel: Channel) -> bool:
        """A one-way 904 served synchronously (True); anything else goes to serve_now."""
        replica = self._live
        timed = self.node_metrics.oneway_timing_due(request.code)
        started_s = trio.current_time() if timed else 0.0
        served = bool(self.runner.input(replica.heartbeat, request, channel.id))
        if timed and served:
            self.node_metrics.observe_oneway(request.code, trio.current_time() - started_s)
        return served

    def on_channel_closed(self, channel: Channel) -> None:
        self.runner.input(self._live.connection_closed, channel.id)

    async def propose(self, commands: list[Command]) -> list[ApplyResult]:
        """Enter commands into the log as one entry; returns their apply results once committed."""
        done = trio.Event()
        outcome: list[tuple[list[ApplyResult] | None, RequestFailed | None]] = []

        def on_done(results: list[ApplyResult] | None, error: RequestFailed | None) -> None:
            outcome[:] = [(results, error)]
            done.set()

        self.runner.input(self._live.enqueue, commands, on_done)
        await done.wait()
        [(results, error)] = outcome
        if error is not None:
            raise error
        assert results is not None  # the replica answers with results or an error
        return results

    # ----- snapshots, off the driver -----

    async def _write_snapshot(self, action: WriteSnapshot) -> None:
        """create_snapshot + compaction as a task of its own: the state encoded a step at a time in
        the event loop's thread, then one short transaction per step (the snapshot, the boundary,
        then the sweep NODE_SWEEP_BATCH_ENTRIES at a time) in the saver's thread, one at a time
        with the driver's saves, with a checkpoint between two steps so the driver, the peer
        readers, the server and the timer run in between; the driver never waits for the whole
        write, and the loop never waits on the storage's writer lock behind a stalled save.

        Not a thread of its own running the whole write: a second Python thread busy beside the
        busy event loop re-takes the GIL from it at every step, and under libfaketime (the chaos
        run's clock fault preloads it in every node) each contended hand-off goes through its
        pthread_cond_timedwait wrapper: the loop then stalled for 1-1.7 s at a time, each node,
        until the snapshot was written (3-19 s in the chaos run; docs/chaos.md,
        bench/repro_snapshot_stall.py). The saver's loop waits for each step with the GIL
        released (rmqc.node._saver), so no hand-off is contended."""
        storage, replica, saver = self.storage, self.replica, self.saver
        assert storage is not None and replica is not None and saver is not None
        steps = action.state.encode_steps()
        while (data := next(steps)) is None:  # ~10 ms a step: the loop runs in between
            await trio.lowlevel.checkpoint()
        run = saver.run
        try:
            await run(partial(storage.create_snapshot, action.index, action.conf_state, data))
            await trio.lowlevel.checkpoint()
            if action.compact_to > storage.first_index():
                await run(partial(storage.compact, action.compact_to, sweep=False))
            while True:
                await trio.lowlevel.checkpoint()
                if not await run(partial(storage.sweep_batch, NODE_SWEEP_BATCH_ENTRIES)):
                    break
        except (SnapshotOutOfDateError, CompactedError) as error:  # the leader's snapshot is newer
            self.runner.input(replica.snapshot_written, action.index, SnapshotOutcome.SUPERSEDED, error)
        except StorageFullError as error:
            self.runner.input(replica.snapshot_written, action.index, SnapshotOutcome.DISK_FULL, error)
        except StorageWriteFailed as error:
            self.runner.input(replica.snapshot_written, action.index, SnapshotOutcome.FAILED, error)
        else:
            self.runner.input(replica.snapshot_written, action.index, SnapshotOutcome.OK)

    # ----- the replica's actions (the runner drains its outbox into these) -----

    def _perform_action(self, action: Any) -> None:
        self._perform[type(action)](action)

    def _send_raft(self, action: SendRaft) -> None:
        self.links.send_messages(list(action.messages))

    def _forward(self, action: ForwardRequest) -> None:
        frame = encode_tagged(action.tag, encode(action.request))
        if not self.links.send_control(action.leader, FrameKind.FORWARD_REQUEST, frame):
            self.runner.input(self._live.forward_not_sent, action.tag)  # runs once this drain is over

    def _send_digest(self, action: SendDigest) -> None:
        self.links.send_control(action.leader, FrameKind.DIGEST, action.payload)

    def _answer(self, action: Answer) -> None:
        action.token(action.response)  # type: ignore[operator]  # the shell's tokens are its callbacks

    def _notify(self, action: Notify) -> None:
        self.notifier.submit(action.address, action.command)

    def _start_snapshot_write(self, action: WriteSnapshot) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._write_snapshot, action)

    def _stop(self, action: StopProcess) -> None:
        self._stop_now(action.reason)
