"""RMQC_EVENTS (60008), `rmqc events`' request: the events of this node (rmqc.replica.EventLog)
after the cursor `after`. Answered at once when there are some; otherwise held until one is
recorded or `waitMs` passes (a long poll), so a follower of the stream hears of a failover as it
happens without asking again and again. Any node answers with its own events, a follower too.

The answer's body: {"events": [...], "missed": n, "lastSeq": n}; `missed` > 0 says the reader fell
behind and the ring dropped that many events before it asked.
"""

from __future__ import annotations

import orjson
import trio

from rmqc.remoting import RemotingCommand, ResponseCode, make_response
from rmqc.replica import MAX_EVENTS_PER_PAGE, EventLog

# Far below the client's own timeout (rmqc events asks with a larger one): an answer always comes.
MAX_WAIT_MS = 20_000
# Long polls held at once; beyond, a request is answered at once (empty), so readers cost a task each
# only up to this.
MAX_WAITING_READERS = 256


class BadEventsRequest(ValueError):
    """An RMQC_EVENTS field is not a non-negative integer."""


class EventReaders:
    """The long polls waiting for this node's next event."""

    def __init__(self) -> None:
        self._recorded = trio.Event()
        self.waiting = 0
        self._released = False  # the node is stopping: no reader waits any more

    def wake(self) -> None:
        """An event was recorded (the EventLog's listener): every waiting reader reads again."""
        self._recorded.set()
        self._recorded = trio.Event()

    def release(self) -> None:
        """The node stops: every waiting reader is answered now (with what there is), none waits after."""
        self._released = True
        self.wake()

    async def answer(self, events: EventLog, request: RemotingCommand) -> RemotingCommand:
        try:
            after = _count(request, "after", 0)
            wait_ms = min(_count(request, "waitMs", 0), MAX_WAIT_MS)
            limit = min(_count(request, "limit", MAX_EVENTS_PER_PAGE), MAX_EVENTS_PER_PAGE) or MAX_EVENTS_PER_PAGE
        except BadEventsRequest as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(error))
        page = events.page(after, limit)
        if not page.events and wait_ms and self.waiting < MAX_WAITING_READERS:
            self.waiting += 1
            try:
                with trio.move_on_after(wait_ms / 1000):
                    while not (page.events or self._released):
                        await self._recorded.wait()
                        page = events.page(after, limit)
            finally:
                self.waiting -= 1
        return make_response(request, ResponseCode.SUCCESS, body=orjson.dumps(page.to_json()))


def _count(request: RemotingCommand, name: str, default: int) -> int:
    text = request.ext(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadEventsRequest(f"RMQC_EVENTS: {name} must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise BadEventsRequest(f"RMQC_EVENTS: {name} must be a non-negative integer, got {text!r}")
    return value
