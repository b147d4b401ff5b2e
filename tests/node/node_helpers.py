"""Helpers for node tests: free loopback ports and bounded waits on conditions."""

from __future__ import annotations

import socket
from collections.abc import Callable

import trio


def free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out and we released; good enough on a loopback-only machine."""
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


async def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail after `timeout_s` (never a fixed sleep)."""
    with trio.move_on_after(timeout_s):
        while not condition():
            await trio.sleep(0.005)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
