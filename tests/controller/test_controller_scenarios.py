"""All 25 java-scenarios replayed through the in-process harness, and the checker's own rules."""

from __future__ import annotations

import pytest

from rmqc.remoting import RESPONSE_FLAG, RemotingCommand, dumps_fastjson
from rmqc.testing.controller_harness import (
    ControllerHarness,
    body_matches,
    check_response,
    load_scenarios,
    replay_scenario,
    replay_scenario_async,
    scenario_actions,
)

SCENARIOS = load_scenarios()


def test_the_scenario_file_has_all_25_scenarios() -> None:
    assert len(SCENARIOS) == 25


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_on_a_fresh_node(scenario: dict) -> None:
    assert replay_scenario(ControllerHarness(), scenario) == []


def test_all_scenarios_in_sequence_on_one_node() -> None:
    """conventions.names: the sNN- prefixes let every scenario run one after another on one node."""
    harness = ControllerHarness()
    problems = [f"{s['name']}: {p}" for s in SCENARIOS for p in replay_scenario(harness, s)]
    assert problems == []


def test_a_wrong_expectation_is_reported() -> None:
    scenario = next(s for s in SCENARIOS if s["name"] == "ReplicasInfoManagerTest.testRegisterBrokerSuccess")
    tampered = {**scenario, "steps": [dict(step) for step in scenario["steps"]]}
    elect = next(i for i, s in enumerate(tampered["steps"]) if s.get("send") == 1002)
    tampered["steps"][elect] = {**tampered["steps"][elect],
                                "expect": {**tampered["steps"][elect]["expect"], "ext": {"masterEpoch": "7"}}}
    problems = replay_scenario(ControllerHarness(), tampered)
    assert len(problems) == 1 and "masterEpoch" in problems[0] and f"step {elect} " in problems[0]


def _response(code: int, ext: dict | None = None, body: object = None, remark: str | None = None) -> RemotingCommand:
    raw = None if body is None else dumps_fastjson(body)
    return RemotingCommand(code, flag=RESPONSE_FLAG, ext_fields=ext, body=raw, remark=remark)


def test_check_response_reports_each_kind_of_difference() -> None:
    response = _response(2011, {"masterEpoch": "1", "masterBrokerId": "1"}, {"syncStateSet": [1]}, "r")
    expect = {"code": 0, "ext": {"masterEpoch": "2"}, "ext_absent": ["masterBrokerId"],
              "ext_present": ["masterAddress"], "remark": "x", "remark_contains": "y",
              "body": {"syncStateSet": [2]}}
    problems = check_response(expect, response)
    assert len(problems) == 7, problems


def test_a_body_that_is_not_json_is_a_reported_problem() -> None:
    response = RemotingCommand(0, flag=RESPONSE_FLAG, body=b"{oops")
    [problem] = check_response({"code": 0, "body": {"a": 1}}, response)
    assert "not fastjson" in problem


def test_check_response_accepts_a_matching_answer() -> None:
    response = _response(0, {"masterEpoch": "1", "extra": "ignored"}, {"brokerAddrs": {1: "a", 2: "b"}})
    expect = {"code": 0, "ext": {"masterEpoch": "1"}, "ext_absent": ["masterAddress"],
              "body": {"brokerAddrs": {"2": "b", "1": "a"}}}
    assert check_response(expect, response) == []


@pytest.mark.parametrize(
    ("expected", "actual", "matches"),
    [
        ({}, {}, True),
        ({}, {"a": 1}, False),  # an expected empty object requires an empty object
        ({"a": 1}, {"a": 1, "b": 2}, True),  # subset
        ({"a": 1}, {"a": 1.0}, True),  # numbers compare numerically
        ([1, 2], [2, 1], True),  # arrays are order-insensitive
        ([1, 1], [1, 2], False),  # ... but each expected element needs a distinct actual one
        ([1], [1, 2], False),  # same length
        ([{"id": 1}], [{"id": 1, "alive": True}], True),
        ({"x": True}, {"x": 1}, False),  # booleans exactly
        ({"1": "a"}, {1: "a"}, True),  # map keys as strings
    ],
)
def test_body_matching_rules(expected: object, actual: object, matches: bool) -> None:
    assert body_matches(expected, actual) is matches


class AsyncHarness:
    """The harness behind coroutine operations, as a TCP driver would present them."""

    def __init__(self) -> None:
        self.harness = ControllerHarness()
        self.calls: list[str] = []

    async def send(self, request: RemotingCommand) -> RemotingCommand:
        self.calls.append("send")
        return self.harness.send(request)

    async def send_oneway(self, connection: str, request: RemotingCommand) -> None:
        self.calls.append("oneway")
        self.harness.send_oneway(connection, request)

    async def close_connection(self, connection: str) -> object:
        self.calls.append("close")
        return self.harness.close_connection(connection)

    async def sleep(self, ms: int) -> None:
        self.calls.append("sleep")
        self.harness.sleep(ms)


async def test_async_replay_walks_the_same_actions() -> None:
    scenario = next(s for s in SCENARIOS if s["name"] == "ControllerManagerTest.testSomeApi#closeChannel")
    driver = AsyncHarness()
    assert await replay_scenario_async(driver, scenario) == []
    assert driver.calls == [a.kind for a in scenario_actions(scenario)]
    assert driver.calls.count("close") == 1 + 2  # the step's close, then both heartbeat connections
