"""When the replica is driven, and where its actions go: the one scheduler that `rmqc serve`
(rmqc.node) and the simulator (rmqc.testing) both run, so that what is decided in production is
what runs under seeds.

Every input reaches the replica through a `Runner`, and the runner alone calls `drive()`:

- The outbox is a queue drained at named points: when a call into the replica returns (an input,
  a pass, the timer's `advance_time`) and, inside a pass, right before the driver saves
  (`Replica.flush_outbox`: a leader's appends leave before its own fsync, as the Ready contract
  allows). The shell's `perform` does each action.
- The replica is never re-entered. An input given while a call runs or the outbox drains (an
  action's performer handing one back: a forward the peer link could not send) waits in order,
  and runs as soon as that call and its drain are over.
- After an input, a pass it made due runs at once, in the caller's turn, when requests come one
  at a time (at most one in flight, the last pass that answered requests answered one, no pass
  scheduled, no run of Readies going on): one scheduler hand-off less on each hop of a lone write.
  Otherwise the pass is scheduled with the shell (`schedule_pass`), which makes it after the
  other inputs it has ready (group commit: several clients' requests come back in a wave after
  their answers, and the first of a wave must not take a save of its own). After the timer's
  `advance_time` a due pass runs at once unless one is scheduled. After a scheduled pass another
  is scheduled while one is due (a run of Readies: the shell lets its other work run in between).
- A call that raises ends the runner: what the replica emitted before the exception is performed,
  then `on_failure(error)` decides what the failure means (the node stops; the simulator crashes
  the node on a power cut). Nothing is called after that.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._io import Action, Answer

if TYPE_CHECKING:
    from ._replica import Replica

__all__ = ["Runner"]


class Runner:
    def __init__(self, perform: Callable[[Action], None], schedule_pass: Callable[[], None],
                 on_failure: Callable[[Exception], None]) -> None:
        self.outbox: deque[Action] = deque()  # the replica's outbox (Replica(outbox=runner.outbox))
        self.replica: Replica | None = None  # attach()
        self._perform = perform
        self._schedule_pass = schedule_pass
        self._on_failure = on_failure
        self._inside = False  # a call into the replica runs
        self._draining = False
        self._waiting: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.pass_scheduled = False  # the shell will call run_pass()
        self.requests_in_flight = 0  # requests given to the replica and not answered yet
        self.answers = 0  # requests answered so far
        self._answers_last_pass = 0  # requests answered by the last pass that answered any
        self.passes_inline = 0  # passes made in the turn of the input that made them due
        self.failure: Exception | None = None
        self.stopped = False

    def attach(self, replica: Replica) -> None:
        """The replica this runner drives (built with `outbox=runner.outbox`, `wake=runner.wake`,
        `flush=runner.flush`). What its construction emitted (the membership it starts with) is
        performed now, before the shell runs anything: a repairing node's empty membership must
        reach the peer links before they dial the `peers` of its configuration."""
        self.replica = replica
        self._drain()

    # ----- hooks the replica calls -----

    def wake(self) -> None:
        """The replica's `wake`: a pass became due. Inside a call the call's end decides; a call
        that bypassed the runner (a test poking the replica) gets a scheduled pass."""
        if not (self._inside or self._draining or self.pass_scheduled or self.failure or self.stopped):
            self._schedule()

    def flush(self) -> None:
        """The replica's named drain point inside a pass (before the driver saves)."""
        self._drain()

    # ----- what the shell calls -----

    def input(self, method: Callable[..., Any], *args: Any) -> Any:
        """Give the replica one input (any of its input methods, with its arguments), perform what
        it emitted and make the pass it made due. Returns the method's result, or None when the
        input had to wait for the call running now."""
        if self._inside or self._draining:
            self._waiting.append((method, args))
            return None
        result = self._call(method, args)
        # the common case (a heartbeat: no input waiting, no pass to decide) costs two lookups
        if self._waiting or (not self.pass_scheduled and self.replica.drive_due):  # type: ignore[union-attr]
            self._settle(lone_requests_only=True)
        return result

    def request(self, method: Callable[..., Any], *args: Any) -> None:
        """An input the replica answers exactly once (`client_request`, `forwarded_request`)."""
        self.requests_in_flight += 1
        self.input(method, *args)

    def timer(self) -> None:
        """The shell's clock reached `next_wakeup_ms()`: advance the replica's time."""
        replica = self.replica
        assert replica is not None
        if self._inside or self._draining:
            self._waiting.append((replica.advance_time, ()))
            return
        self._call(replica.advance_time)
        self._settle(lone_requests_only=False)

    def run_pass(self) -> None:
        """The pass the shell scheduled (schedule_pass); the next one is scheduled if due."""
        self.pass_scheduled = False
        if self.failure is None and not self.stopped:
            self._pass()
            self._run_waiting()
            self._schedule_if_due()

    def stop(self) -> None:
        """Nothing more is performed or called (the simulator's node crashed); a failure of the
        call running now is still reported."""
        self.stopped = True
        self.outbox.clear()
        self._waiting.clear()

    # ----- inside -----

    def _call(self, method: Callable[..., Any], args: tuple[Any, ...] = ()) -> Any:
        if self.failure is not None or self.stopped:
            return None
        self._inside = True
        try:
            result = method(*args)
        except Exception as error:
            self._inside = False
            self._drain()
            if self.failure is None:
                self.failure = error
                self._waiting.clear()
                self._on_failure(error)
            return None
        finally:
            self._inside = False
        if self.outbox:
            self._drain()
        return result

    def _drain(self) -> None:
        if self._draining:
            return
        self._draining = True
        try:
            outbox, perform = self.outbox, self._perform
            while outbox:
                action = outbox.popleft()
                if type(action) is Answer:
                    self.answers += 1
                    self.requests_in_flight -= 1
                perform(action)
        finally:
            self._draining = False

    def _run_waiting(self) -> None:
        while self._waiting and self.failure is None and not self.stopped:
            method, args = self._waiting.popleft()
            self._call(method, args)

    def _settle(self, *, lone_requests_only: bool) -> None:
        """After an input or the timer: the waiting inputs, then the pass they made due."""
        self._run_waiting()
        replica = self.replica
        assert replica is not None
        if self.failure is not None or self.stopped or self.pass_scheduled or not replica.drive_due:
            return
        lone = self.requests_in_flight <= 1 and self._answers_last_pass <= 1
        if replica.driver.in_run or (lone_requests_only and not lone):
            self._schedule()
            return
        self.passes_inline += 1
        self._pass()
        self._run_waiting()
        self._schedule_if_due()

    def _pass(self) -> None:
        replica = self.replica
        assert replica is not None
        answered_before = self.answers
        self._call(replica.drive)
        if self.answers != answered_before:
            self._answers_last_pass = self.answers - answered_before

    def _schedule_if_due(self) -> None:
        replica = self.replica
        assert replica is not None
        if self.failure is None and not self.stopped and not self.pass_scheduled and replica.drive_due:
            self._schedule()

    def _schedule(self) -> None:
        self.pass_scheduled = True
        self._schedule_pass()
