"""Named failures of the read bookkeeping."""

from __future__ import annotations

from rmqc.errors import BoundExceeded


class ReadQueueFull(BoundExceeded):
    """Too many reads wait for leadership confirmation; the caller should back off and retry."""
