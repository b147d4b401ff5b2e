"""RMQC_EVENTS (60008), `rmqc events`' request, in the shell: the long poll. rmqc.replica reads the
request's fields (`events_query`), pages this node's EventLog and makes the answer; here a request
with nothing after its cursor is held until an event is recorded or its `waitMs` passes, so a
follower of the stream hears of a failover as it happens without asking again and again.
"""

from __future__ import annotations

import trio

from rmqc.remoting import RemotingCommand, ResponseCode, make_response
from rmqc.replica import BadEventsRequest, EventLog, events_answer, events_query

# Long polls held at once; beyond, a request is answered at once (empty), so readers cost a task each
# only up to this.
MAX_WAITING_READERS = 256


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
            query = events_query(request)
        except BadEventsRequest as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(error))
        page = events.page(query.after, query.limit)
        if not page.events and query.wait_ms and self.waiting < MAX_WAITING_READERS:
            self.waiting += 1
            try:
                with trio.move_on_after(query.wait_ms / 1000):
                    while not (page.events or self._released):
                        await self._recorded.wait()
                        page = events.page(query.after, query.limit)
            finally:
                self.waiting -= 1
        return events_answer(request, page)
