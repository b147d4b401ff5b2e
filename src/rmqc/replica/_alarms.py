"""The node's alarms: conditions an operator must act on, shown by `rmqc status`, the metrics and
the log until they clear: the disk is full, and the node is repairing damaged storage
(docs/operations.md says what to do for each).

A full disk is an alarm, not a crash: LMDB aborts a commit that finds no space before writing
over anything, so the node keeps everything durable so far, refuses the writes it would have to
persist, serves reads and heartbeats, and tries the write again every DISK_FULL_RETRY_MS. The
first write that succeeds clears the alarm: writes resume by themselves once space is freed (no
`alarm clear` command, unlike etcd: a write that succeeds is proof enough).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DISK_FULL", "DISK_FULL_RETRY_MS", "REPAIRING", "DiskFullAlarm", "repairing_status"]

DISK_FULL = "disk_full"
# Raised while the node repairs a damaged data directory (rmqc serve --repair): it neither votes
# nor campaigns until it holds a leader's commit index; cleared when the repair completes.
REPAIRING = "repairing"
# How often a node whose disk is full tries its write again: a failed attempt costs one aborted
# LMDB transaction; writes resume at most this long after space returns.
DISK_FULL_RETRY_MS = 500


@dataclass(slots=True)
class DiskFullAlarm:
    """Raised by the first write that found no space; cleared by the first that succeeds."""

    node_id: str
    data_dir: str
    detail: str  # the storage error, as LMDB reported it
    raised_mono_ms: int
    raised_wall_ms: int
    next_retry_mono_ms: int
    needed_bytes: int | None = None  # the room the failed write asked for (None: unknown)
    refused_writes: int = 0

    @property
    def remark(self) -> str:
        """The remark of every write refused meanwhile (a RocketMQ SYSTEM_ERROR)."""
        return (f"the controller's disk is full: node {self.node_id} cannot write its log in {self.data_dir} "
                f"({self.detail}); writes are refused until space is freed, reads and heartbeats are served")

    @property
    def in_the_log_remark(self) -> str:
        """The remark of a write already in the leader's log when the disk filled, whose commit
        needs the leader's own write (one or two voters): answered at once rather than at the
        request timeout. Its entry stays in the log, so the outcome is unknown: it is saved and
        applied once space is freed, unless another leader's entry takes its place first."""
        return (f"{self.remark}; this request was already in the log, unsaved: it is applied if space is "
                f"freed before another leader takes over, so whether it took effect is unknown")

    def retry_due(self, now_mono_ms: int) -> bool:
        return now_mono_ms >= self.next_retry_mono_ms

    def status(self, now_mono_ms: int) -> dict[str, Any]:
        """This alarm in the RMQC_NODE_STATUS answer."""
        return {"alarm": DISK_FULL, "sinceMs": self.raised_wall_ms, "forMs": now_mono_ms - self.raised_mono_ms,
                "dataDir": self.data_dir, "detail": self.detail, "refusedWrites": self.refused_writes}


def repairing_status(reason: str, target_index: int | None) -> dict[str, Any]:
    """The repair alarm in the RMQC_NODE_STATUS answer (`targetIndex`: None until a leader gave it)."""
    return {"alarm": REPAIRING, "detail": reason, "targetIndex": target_index}
