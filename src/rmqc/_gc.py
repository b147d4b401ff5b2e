"""One helper shared by code that builds many long-lived, acyclic objects in one synchronous go
(the serve-path imports, snapshot restore and encoding): the cyclic collector would otherwise
re-traverse the growing heap many times meanwhile and find nothing to free."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
