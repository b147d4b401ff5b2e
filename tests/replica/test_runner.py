"""rmqc.replica.Runner, the scheduler `rmqc serve` and the simulator share: when a pass runs, where
the outbox drains, that the replica is never re-entered and that a failure ends the runner. A
scripted replica makes each rule visible; the node and simulator suites run it with the real one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from rmqc.replica import Answer, Runner

Pass = Callable[["ScriptedReplica"], None]


@dataclass
class ScriptedReplica:
    """What the runner reads of a replica; each pass runs the next script step (or nothing)."""

    outbox: Any
    flush: Callable[[], None]
    log: list[str]
    passes: list[Pass] = field(default_factory=list)
    drive_due: bool = False
    driver: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(in_run=False))

    def drive(self) -> bool:
        self.log.append("pass")
        self.drive_due = self.driver.in_run = False
        if self.passes:
            self.passes.pop(0)(self)
        return self.driver.in_run

    def advance_time(self) -> None:
        self.log.append("time")
        self.drive_due = True

    def request(self, token: str) -> None:
        self.log.append(f"request {token}")
        self.drive_due = True

    def note(self, what: str) -> None:
        self.log.append(what)


@dataclass
class Shell:
    log: list[str] = field(default_factory=list)
    scheduled: int = 0
    failures: list[Exception] = field(default_factory=list)
    on_perform: Callable[[Any], None] = lambda action: None

    def __post_init__(self) -> None:
        self.runner = Runner(self.perform, self.schedule, self.failures.append)
        self.replica = ScriptedReplica(self.runner.outbox, self.runner.flush, self.log)
        self.runner.attach(self.replica)  # type: ignore[arg-type]

    def perform(self, action: Any) -> None:
        self.log.append(f"perform {action.token if isinstance(action, Answer) else action}")
        self.on_perform(action)

    def schedule(self) -> None:
        self.scheduled += 1


def answers(*tokens: str) -> Pass:
    def step(replica: ScriptedReplica) -> None:
        for token in tokens:
            replica.outbox.append(Answer(token, None))
    return step


def test_a_lone_request_is_passed_and_answered_in_its_own_turn() -> None:
    shell = Shell()
    shell.replica.passes = [answers("a")]
    shell.runner.request(shell.replica.request, "a")
    assert shell.log == ["request a", "pass", "perform a"]
    assert (shell.runner.passes_inline, shell.scheduled, shell.runner.requests_in_flight) == (1, 0, 0)


def test_a_request_while_another_is_in_flight_waits_for_a_scheduled_pass() -> None:
    """Group commit: the second request's pass is left to the shell, which makes it after the other
    inputs it has ready; further inputs meanwhile schedule nothing more."""
    shell = Shell()
    shell.replica.passes = [lambda replica: None, answers("a", "b")]  # a's first pass answers nothing yet
    shell.runner.request(shell.replica.request, "a")
    shell.runner.request(shell.replica.request, "b")
    shell.runner.request(shell.replica.request, "c")
    assert shell.log == ["request a", "pass", "request b", "request c"]
    assert (shell.runner.passes_inline, shell.scheduled, shell.runner.pass_scheduled) == (1, 1, True)
    shell.runner.run_pass()
    assert shell.log[-3:] == ["pass", "perform a", "perform b"]
    assert (shell.runner.requests_in_flight, shell.runner.pass_scheduled) == (1, False)


def test_after_a_pass_that_answered_many_the_next_request_is_not_passed_alone() -> None:
    """Requests come back in a wave after their answers: the first of the wave must not take a
    save of its own."""
    shell = Shell()
    shell.replica.passes = [answers("a", "b")]
    shell.runner.input(shell.replica.request, "x")  # not a request to answer: counts nothing
    shell.runner.request(shell.replica.request, "c")
    assert (shell.runner.passes_inline, shell.scheduled) == (1, 1)


def test_after_the_timer_a_due_pass_runs_at_once_and_a_run_is_scheduled_pass_by_pass() -> None:
    shell = Shell()

    def run_of_readies(replica: ScriptedReplica) -> None:
        replica.driver.in_run = replica.drive_due = True

    shell.replica.passes = [run_of_readies, run_of_readies]
    shell.runner.timer()
    assert shell.log == ["time", "pass"] and shell.scheduled == 1
    shell.runner.run_pass()
    assert shell.scheduled == 2  # still in the run: the shell lets its other work run, then calls again
    shell.runner.run_pass()
    assert shell.scheduled == 2 and not shell.runner.pass_scheduled


def test_the_outbox_drains_before_a_save_so_a_leaders_appends_leave_first() -> None:
    shell = Shell()

    def append_save_answer(replica: ScriptedReplica) -> None:
        replica.outbox.append(Answer("append", None))
        replica.flush()  # Replica.flush_outbox, right before the driver saves
        replica.log.append("save")
        replica.outbox.append(Answer("ack", None))

    shell.replica.passes = [append_save_answer]
    shell.runner.timer()
    assert shell.log == ["time", "pass", "perform append", "save", "perform ack"]


def test_an_input_handed_back_while_the_outbox_drains_runs_after_the_drain() -> None:
    """The node's forward that its peer link could not send hands `forward_not_sent` back from
    inside the drain: it waits, and the replica is never entered while a call of it runs."""
    shell = Shell()
    handed_back = []

    def hand_back(action: Any) -> None:
        if action.token == "a" and not handed_back:
            handed_back.append(shell.runner.input(shell.replica.note, "handed back"))

    shell.on_perform = hand_back
    shell.replica.passes = [answers("a", "b")]
    shell.runner.request(shell.replica.request, "a")
    assert shell.log == ["request a", "pass", "perform a", "perform b", "handed back"]
    assert handed_back == [None]  # it waited: no result to give


def test_a_failure_comes_after_what_was_emitted_before_it_and_ends_the_runner() -> None:
    shell = Shell()

    def emit_then_fail(replica: ScriptedReplica) -> None:
        replica.outbox.append(Answer("before", None))
        raise OSError("the disk went away")

    shell.replica.passes = [emit_then_fail]
    shell.runner.request(shell.replica.request, "before")
    assert shell.log == ["request before", "pass", "perform before"]
    assert [str(error) for error in shell.failures] == ["the disk went away"]
    shell.runner.request(shell.replica.request, "after")
    shell.runner.timer()
    shell.runner.run_pass()
    assert shell.log[-1] == "perform before" and len(shell.failures) == 1  # nothing called after it


def test_a_call_that_bypassed_the_runner_gets_a_scheduled_pass() -> None:
    shell = Shell()
    shell.runner.wake()
    assert shell.scheduled == 1
    shell.runner.wake()
    assert shell.scheduled == 1  # one is scheduled already


def test_a_failure_of_the_call_that_stopped_the_runner_is_still_reported() -> None:
    """The simulator's failed write: the replica's StopProcess, performed in the drain, crashes the
    node (stop), then the write's error reaches the shell, which counts it."""
    shell = Shell()
    shell.on_perform = lambda action: shell.runner.stop()

    def stop_then_fail(replica: ScriptedReplica) -> None:
        replica.outbox.append(Answer("stop", None))
        raise OSError("write failed")

    shell.replica.passes = [stop_then_fail]
    shell.runner.timer()
    assert [str(error) for error in shell.failures] == ["write failed"]


@pytest.mark.parametrize("stop_inside", [False, True])
def test_a_stopped_runner_performs_nothing_more(stop_inside: bool) -> None:
    """The simulator's crash: what waits in the outbox is gone with the process."""
    shell = Shell()
    if stop_inside:
        shell.on_perform = lambda action: shell.runner.stop()
    shell.replica.passes = [answers("a", "b")]
    if not stop_inside:
        shell.runner.stop()
    shell.runner.request(shell.replica.request, "a")
    performed = [line for line in shell.log if line.startswith("perform")]
    assert performed == (["perform a"] if stop_inside else [])


def test_what_the_replica_emitted_while_it_was_built_is_performed_on_attach() -> None:
    performed: list[Any] = []
    runner = Runner(performed.append, lambda: None, lambda error: None)
    runner.outbox.append(Answer("membership", None))  # as Replica.__init__ appends MembersChanged
    runner.attach(ScriptedReplica(runner.outbox, runner.flush, []))  # type: ignore[arg-type]
    assert [action.token for action in performed] == ["membership"]
