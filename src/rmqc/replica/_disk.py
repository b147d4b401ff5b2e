"""The replica's writes when they fail: a full disk raises an alarm (writes refused, reads and
heartbeats served, the write tried again every DISK_FULL_RETRY_MS, writes resume by themselves),
any other failed write or fsync stops the process at once (docs/operations.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NoReturn

from rmqc.raft import has_quorum
from rmqc.remoting import ResponseCode
from rmqc.storage import StorageFullError, StorageWriteFailed

from ._alarms import DISK_FULL, DISK_FULL_RETRY_MS, DiskFullAlarm
from ._facts import RaftFacts
from ._io import Clock, Outbox, ReplicaConfig, ReplicaStorage, StopProcess
from ._proposals import Proposals, RequestFailed

log = logging.getLogger("rmqc.replica")


class Disk:
    """The disk-full alarm and the stop on a failed write, for one replica."""

    def __init__(self, config: ReplicaConfig, facts: RaftFacts, storage: ReplicaStorage, proposals: Proposals,
                 outbox: Outbox, now_ms: Callable[[], int], clock: Clock,
                 set_alarm: Callable[[str, bool], None]) -> None:
        self._config, self._facts, self._storage, self._proposals = config, facts, storage, proposals
        self._outbox, self._now_ms, self._clock, self._set_alarm = outbox, now_ms, clock, set_alarm
        self.alarm: DiskFullAlarm | None = None

    def look_for_space(self) -> None:
        """While the alarm is raised, every DISK_FULL_RETRY_MS: is there room for a write again?
        Needed because a refused write never reaches the disk, so when the write that failed is
        not offered again (a snapshot), nothing else would ever find out."""
        alarm = self.alarm
        if alarm is None or not alarm.retry_due(self._now_ms()):
            return
        storage = self._storage
        try:
            if alarm.needed_bytes is None:
                storage.ensure_space()  # type: ignore[attr-defined]
            else:
                storage.ensure_space(alarm.needed_bytes)  # type: ignore[attr-defined]
        except StorageFullError as error:
            self.full(error)
            return
        except StorageWriteFailed as error:
            self.failed(error)
        self._clear()

    def full(self, error: StorageFullError) -> None:
        """A write found no space: raise the alarm (once), refuse what is queued, retry later."""
        now_ms = self._now_ms()
        if self.alarm is None:
            config = self._config
            self.alarm = DiskFullAlarm(config.node_id, str(config.data_dir), str(error), now_ms,
                                       self._clock.wall_ms(), now_ms)
            log.error("%s: ALARM disk full: %s. Writes are refused (nothing acknowledged is lost), reads and "
                      "heartbeats are served, the write is tried again every %d ms and writes resume by "
                      "themselves once space is freed", config.node_id, error, DISK_FULL_RETRY_MS)
            self._set_alarm(DISK_FULL, True)
            # requests queued but not in the log can never be persisted now
            self.alarm.refused_writes += self._proposals.refuse_queued(
                RequestFailed(ResponseCode.SYSTEM_ERROR, self.alarm.remark))
            self._answer_what_cannot_commit()
        if error.needed_bytes is not None:  # the largest write that found no room: look for that much
            self.alarm.needed_bytes = max(self.alarm.needed_bytes or 0, error.needed_bytes)
        self.alarm.next_retry_mono_ms = now_ms + DISK_FULL_RETRY_MS

    def _answer_what_cannot_commit(self) -> None:
        """Requests in the log wait for their commit when the other voters can make a quorum
        without our write (their acknowledgements commit it in moments); with one or two voters
        nothing commits until our disk has room, so they are answered now, not at the request
        timeout with a bare "commit wait"."""
        assert self.alarm is not None
        me = self._config.node_id
        facts = self._facts
        voters = facts.conf_state.voters
        if facts.serving_as_leader and not has_quorum(voters, [v for v in voters if v != me]):
            self.alarm.refused_writes += self._proposals.refuse_in_the_log(
                RequestFailed(ResponseCode.SYSTEM_ERROR, self.alarm.in_the_log_remark))

    def _clear(self) -> None:
        assert self.alarm is not None
        alarm, self.alarm = self.alarm, None
        log.warning("%s: disk space is back after %d ms (%d writes refused meanwhile): writes resume",
                    self._config.node_id, self._now_ms() - alarm.raised_mono_ms, alarm.refused_writes)
        self._set_alarm(DISK_FULL, False)

    def failed(self, error: StorageWriteFailed) -> NoReturn:
        """StopProcess (the shell ends the process at once); should it return, the error still ends
        the driver pass: nothing after the failed write runs."""
        config = self._config
        self._outbox.append(StopProcess(
            f"{config.node_id}: STOPPING: {error}. It is never retried (the kernel may have dropped what "
            f"it had accepted) and nothing after it is acknowledged. Fix the disk, then restart: the node "
            f"recovers from what is durable, or refuses to start; `rmqc log verify {config.data_dir}` "
            f"names what is wrong"))
        raise error
