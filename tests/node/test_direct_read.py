"""rmqc.node._direct_read on a real socket pair: what it reads, when it waits, when it yields."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from rmqc.node._direct_read import YIELD_EVERY_READS, DirectReader


def _pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    return ours, theirs


async def test_a_read_that_drained_the_socket_waits_before_reading_again() -> None:
    ours, theirs = _pair()
    waits: list[bytes] = []

    async def wait_readable() -> None:
        # the peer sends its next bytes only once the reader waits: a read before the wait
        # would have found nothing (EAGAIN)
        waits.append(b"")
        theirs.sendall(b"second")
        await trio.lowlevel.wait_readable(ours.fileno())

    with ours, theirs:
        reader = DirectReader(ours.fileno(), 1024, wait_readable)
        theirs.sendall(b"first")
        assert await reader.read() == b"first"
        assert waits == []  # bytes were there: no wait
        assert await reader.read() == b"second"
        assert len(waits) == 1


class CountedWait:
    """A reader's wait for readability that counts how often it was called."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        await trio.lowlevel.wait_readable(self.fd)


@pytest.mark.parametrize(("chunk", "sent_first", "sent_between", "reads", "waits"), [
    # a short read drained the socket: the next read waits first, although bytes came meanwhile
    # (the wait returns at once; no read that could fail with EAGAIN before it)
    (1024, b"first", b"second", (b"first", b"second"), 1),
    # a full chunk: more may be waiting, so the next read reads at once
    (4, b"abcdefgh", b"", (b"abcd", b"efgh"), 0),
], ids=["short-read-waits", "full-read-reads-on"])
async def test_the_reader_waits_after_a_short_read_only(chunk: int, sent_first: bytes, sent_between: bytes,
                                                        reads: tuple[bytes, bytes], waits: int) -> None:
    ours, theirs = _pair()
    wait = CountedWait(ours.fileno())
    with ours, theirs:
        reader = DirectReader(ours.fileno(), chunk, wait)
        theirs.sendall(sent_first)
        assert await reader.read() == reads[0]
        if sent_between:
            theirs.sendall(sent_between)
        assert await reader.read() == reads[1]
        assert wait.calls == waits


async def test_a_sender_that_never_pauses_cannot_starve_other_tasks() -> None:
    ours, theirs = _pair()
    with ours, theirs:
        reader = DirectReader(ours.fileno(), 1)
        theirs.sendall(b"x" * (YIELD_EVERY_READS + 1))
        for _ in range(YIELD_EVERY_READS - 1):
            with trio.testing.assert_no_checkpoints():  # bytes waiting: read at once
                assert await reader.read() == b"x"
        with trio.testing.assert_checkpoints():  # then the reader yields to the node's other tasks
            assert await reader.read() == b"x"


async def test_the_end_of_the_stream_reads_as_empty_bytes() -> None:
    ours, theirs = _pair()
    with ours:
        reader = DirectReader(ours.fileno(), 1024)
        theirs.sendall(b"last")
        theirs.close()
        assert await reader.read() == b"last"
        assert await reader.read() == b""
