"""Shell-facing queue of reads waiting for the local applied index to reach their read index."""

from __future__ import annotations

import heapq

from ._errors import ReadQueueFull

# Same reasoning as the leader's bound: past this many the apply loop is stuck, not busy.
MAX_WAITING_READS = 65_536


class PendingReads:
    """read_id -> read index; `release(applied)` returns the ids now safe to serve, in index order."""

    def __init__(self, max_waiting: int = MAX_WAITING_READS) -> None:
        self._heap: list[tuple[int, int, object]] = []
        self._seq = 0
        self._max_waiting = max_waiting

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, read_id: object, read_index: int) -> None:
        if len(self._heap) >= self._max_waiting:
            raise ReadQueueFull(f"{len(self._heap)} reads wait for apply (max {self._max_waiting})")
        self._seq += 1  # tie-breaker keeps arrival order and never compares read ids
        heapq.heappush(self._heap, (read_index, self._seq, read_id))

    def release(self, applied_index: int) -> list[object]:
        ready: list[object] = []
        while self._heap and self._heap[0][0] <= applied_index:
            ready.append(heapq.heappop(self._heap)[2])
        return ready

    def clear(self) -> list[object]:
        dropped = [item[2] for item in sorted(self._heap)]
        self._heap.clear()
        return dropped
