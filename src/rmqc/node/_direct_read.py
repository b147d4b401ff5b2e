"""Reading a non-blocking socket straight from its file descriptor, for the server's remoting
connections and the peer links alike.

Trio's `receive_some` costs two scheduler passes per read even when bytes are waiting (a
checkpoint before and one after), the largest share of a small request's or Raft message's cost
on a node: a lone write crosses four such reads (issue 21). `os.read` returns at once when bytes
are there; only an empty socket waits (for readability). The reader still yields every
YIELD_EVERY_READS reads that found data, so a sender that never pauses cannot starve the node's
other tasks.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import trio

# Reads that found data waiting before the reader yields anyway (fairness between connections).
YIELD_EVERY_READS = 8


class DirectReader:
    def __init__(self, fd: int, chunk_bytes: int, wait_readable: Callable[[], Awaitable[None]] | None = None) -> None:
        self._fd = fd
        self._chunk_bytes = chunk_bytes
        self._wait_readable = wait_readable or self._readable
        self._reads_without_yield = 0
        # The last read returned less than it asked for: the socket was empty then, so the next
        # read waits for readability first instead of a read that would fail with EAGAIN (one
        # system call less per request and per Raft message at low load; a level-triggered wait
        # returns at once if bytes came in meanwhile).
        self._drained = False

    async def read(self) -> bytes:
        """The next bytes (b"" at the end of the stream); OSError as os.read raises it."""
        while True:
            if self._drained:
                self._drained = False
                self._reads_without_yield = 0
                await self._wait_readable()
            try:
                data = os.read(self._fd, self._chunk_bytes)
            except BlockingIOError:
                self._drained = True
                continue
            self._drained = len(data) < self._chunk_bytes
            self._reads_without_yield += 1
            if self._reads_without_yield >= YIELD_EVERY_READS:
                self._reads_without_yield = 0
                await trio.lowlevel.checkpoint()
            return data

    async def _readable(self) -> None:
        await trio.lowlevel.wait_readable(self._fd)
