"""rmqc.node._direct_read on a real socket pair: what it reads, when it waits, when it yields."""

from __future__ import annotations

import socket

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


async def test_after_a_short_read_the_reader_waits_even_if_bytes_came_meanwhile() -> None:
    ours, theirs = _pair()
    waits = 0

    async def wait_readable() -> None:
        nonlocal waits
        waits += 1
        await trio.lowlevel.wait_readable(ours.fileno())  # returns at once: bytes are there

    with ours, theirs:
        reader = DirectReader(ours.fileno(), 1024, wait_readable)
        theirs.sendall(b"first")
        assert await reader.read() == b"first"
        theirs.sendall(b"second")
        assert await reader.read() == b"second"
        assert waits == 1  # no read that could fail with EAGAIN before it


async def test_a_full_read_reads_again_at_once() -> None:
    ours, theirs = _pair()
    waits = 0

    async def wait_readable() -> None:
        nonlocal waits
        waits += 1
        await trio.lowlevel.wait_readable(ours.fileno())

    with ours, theirs:
        reader = DirectReader(ours.fileno(), 4, wait_readable)
        theirs.sendall(b"abcdefgh")
        assert await reader.read() == b"abcd"
        assert await reader.read() == b"efgh"  # the chunk was full: more may wait, read at once
        assert waits == 0


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
