"""Per-follower replication progress (probe / replicate / snapshot) and the in-flight window.

A leader sends one probe at a time to a follower in PROBE, pipelines appends to one in REPLICATE up to
the Inflights bounds, and sends nothing while one in SNAPSHOT installs a snapshot. See etcd raft's
design.md for the state diagram this follows.
"""

from __future__ import annotations

from collections import deque
from enum import Enum

from rmqc._hot import enum_members

from ._errors import InflightsFull


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


# the members, read without the enum metaclass's lookup hook (rmqc._hot)
PROGRESS_STATE = enum_members(ProgressState)


class Inflights:
    """Appends sent but not yet acknowledged, bounded by message count AND bytes.

    Both bounds exist because a count alone lets a few huge batches flood a slow link, and bytes alone
    let thousands of tiny messages pile up in the transport's queue.
    """

    def __init__(self, max_count: int, max_bytes: int) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._items: deque[tuple[int, int]] = deque()  # (last index of the message, bytes)
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def full(self) -> bool:
        return len(self._items) >= self.max_count or self.bytes >= self.max_bytes

    def add(self, index: int, size_bytes: int) -> None:
        if self.full():
            raise InflightsFull(
                f"inflights full: {len(self._items)}/{self.max_count} msgs, "
                f"{self.bytes}/{self.max_bytes} B"
            )
        self._items.append((index, size_bytes))
        self.bytes += size_bytes

    def free_le(self, index: int) -> None:
        """Acknowledged up to index: free every message ending at or before it."""
        while self._items and self._items[0][0] <= index:
            _, size = self._items.popleft()
            self.bytes -= size

    def reset(self) -> None:
        self._items.clear()
        self.bytes = 0  # forgetting this kept etcd's window "full" forever (pitfall 36)


class Progress:
    def __init__(self, next_index: int, max_inflight: int, max_inflight_bytes: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = PROGRESS_STATE.PROBE
        # PROBE: one message is out, wait for its reply (or retry it, see may_resume). REPLICATE: the
        # window is full; a heartbeat reply clears it so one (maybe empty) append can resume a
        # stalled stream.
        self.flow_paused = False
        self.probe_sent_tick = 0  # when the outstanding probe left (the leader's tick count)
        self.probe_round = 0  # the last heartbeat round the leader had sent when the probe left
        self.pending_snapshot = 0
        self.snapshot_timeouts = 0  # election timeouts spent in SNAPSHOT without a report
        self.recent_active = False
        self.inflights = Inflights(max_inflight, max_inflight_bytes)

    def _reset_state(self, state: ProgressState) -> None:
        self.flow_paused = False
        self.pending_snapshot = 0
        self.snapshot_timeouts = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state is PROGRESS_STATE.SNAPSHOT:
            pending = self.pending_snapshot
            self._reset_state(PROGRESS_STATE.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset_state(PROGRESS_STATE.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset_state(PROGRESS_STATE.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(PROGRESS_STATE.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def forget_after(self, index: int) -> None:
        """The follower's storage lost what it held after `index` (found damaged, repaired): its
        earlier acks beyond that no longer count toward commits (the one place match goes down),
        and replication probes from there."""
        self.match = min(self.match, index)
        self._reset_state(PROGRESS_STATE.PROBE)
        self.next = index + 1

    def maybe_update(self, index: int) -> bool:
        """An accepting reply up to index. Match never goes down (pitfall 7)."""
        updated = False
        if self.match < index:
            self.match = index
            updated = True
            if self.state is PROGRESS_STATE.PROBE:
                self.flow_paused = False
        self.next = max(self.next, index + 1)
        return updated

    def can_send_entries(self) -> bool:
        """False when only an empty append may go (REPLICATE with a full window)."""
        return not (self.state is PROGRESS_STATE.REPLICATE and self.inflights.full())

    def sent_append(self, last_index: int | None, size_bytes: int, tick: int, heartbeat_round: int) -> None:
        """An append left for this peer at `tick`, after heartbeat round `heartbeat_round`;
        last_index is None for an empty one."""
        if self.state is PROGRESS_STATE.REPLICATE:
            if last_index is not None:
                self.next = last_index + 1  # optimistic: pipeline the next batch at once
                self.inflights.add(last_index, size_bytes)
            self.flow_paused = self.inflights.full()
        elif self.state is PROGRESS_STATE.PROBE:
            self.flow_paused = True
            self.probe_sent_tick, self.probe_round = tick, heartbeat_round

    def may_resume(self, tick: int, heartbeat_round: int | None, probe_retry_ticks: int) -> None:
        """A reply to heartbeat round `heartbeat_round` (None: unknown): the follower is alive, so a
        paused stream may go on (pitfall 36). A probe still outstanding is sent again only if it
        looks lost: the follower answered a round sent after the probe (links are FIFO, so it has
        read past the probe) and the probe is `probe_retry_ticks` old (its answer waits for an
        fsync that heartbeat replies do not). A follower working through a backlog answers every
        queued heartbeat at once; resending the probe for each would flood it with copies of a
        range it has not reached yet (issue 13)."""
        if self.state is PROGRESS_STATE.PROBE and self.flow_paused:
            behind_probe = heartbeat_round is not None and heartbeat_round <= self.probe_round
            if behind_probe or tick - self.probe_sent_tick < probe_retry_ticks:
                return
        self.flow_paused = False

    def acked_replicate(self, index: int) -> None:
        self.inflights.free_le(index)
        self.flow_paused = self.inflights.full()

    def maybe_decrease_to(self, rejected: int, match_hint: int) -> bool:
        """A rejection of the append at `rejected`; False if it is stale (pitfall 7)."""
        if self.state is PROGRESS_STATE.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.flow_paused = False
        return True

    def is_paused(self) -> bool:
        return self.state is PROGRESS_STATE.SNAPSHOT or self.flow_paused
