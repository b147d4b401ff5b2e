"""Helpers for node tests: free loopback ports (shared with the process tests) and bounded waits on
synchronous conditions."""

from __future__ import annotations

from collections.abc import Callable

import trio

from rmqc.testing.acl_accounts import ADMIN as ADMIN, BROKER as BROKER, PLAIN_ACL_YML
from rmqc.testing.cluster import free_ports as free_ports

ACL = PLAIN_ACL_YML  # tests with ACL on: one broker account and one admin


async def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail after `timeout_s` (never a fixed sleep)."""
    with trio.move_on_after(timeout_s):
        while not condition():
            await trio.sleep(0.005)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
