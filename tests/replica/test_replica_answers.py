"""AnswerOnApply: the one answer of a proposed request, whatever became of its commands."""

from __future__ import annotations

from collections.abc import Callable

from rmqc.fsm import ApplyResult
from rmqc.remoting import RemotingCommand, ResponseCode, make_request, make_response
from rmqc.replica._proposals import AnswerOnApply, RequestFailed

REQUEST = make_request(1013, 42, {"brokerName": "b"})


def answer_of(finish: Callable[[list[ApplyResult]], RemotingCommand], results: list[ApplyResult] | None,
              error: RequestFailed | None) -> RemotingCommand:
    answers: list[RemotingCommand | None] = []
    AnswerOnApply(REQUEST, finish, answers.append)(results, error)
    assert len(answers) == 1 and answers[0] is not None
    assert answers[0].opaque == 42 and answers[0].is_response
    return answers[0]


def test_applied_commands_are_answered_by_the_processors_finish() -> None:
    done = make_response(REQUEST, ResponseCode.SUCCESS, ext={"brokerName": "b"})
    seen: list[list[ApplyResult]] = []

    def finish(results: list[ApplyResult]) -> RemotingCommand:
        seen.append(results)
        return done

    assert answer_of(finish, [], None) is done and seen == [[]]


def test_a_failure_is_answered_with_its_code_and_remark_without_finishing() -> None:
    def finish(_results: list[ApplyResult]) -> RemotingCommand:
        raise AssertionError("a failed proposal is not finished")

    answer = answer_of(finish, None, RequestFailed(ResponseCode.CONTROLLER_NOT_LEADER, "not leader"))
    assert (answer.code, answer.remark) == (ResponseCode.CONTROLLER_NOT_LEADER, "not leader")


def test_a_finish_that_raises_is_answered_system_error_naming_it() -> None:
    def finish(_results: list[ApplyResult]) -> RemotingCommand:
        raise KeyError("boom")

    answer = answer_of(finish, [], None)
    assert answer.code == ResponseCode.SYSTEM_ERROR and answer.remark == "KeyError('boom')"
