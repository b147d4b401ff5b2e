"""A pure in-process single-node controller, and the java-scenarios step checker.

`ControllerHarness` feeds RemotingCommands through `ControllerProcessor`, applies every `Propose`
at once (a one-node "log"), tracks each broker's heartbeat connection so closes can be simulated,
and runs on an injected clock: `advance(ms)` moves time and fires expiry at each deadline, as the
server's timer would. No sockets, no threads, no real time.

The scenario part is transport-independent: `scenario_actions` turns a scenario into driver
actions (requests built by `scenario_request`), `check_response` checks an answer against a step's
`expect` (bodies by `body_matches`), and `replay_scenario` / `replay_scenario_async` walk the
actions with any driver offering the four operations of `ScenarioDriver` (plain or async), so
the TCP replay against `rmqc serve` reuses exactly this checking code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rmqc.controller import (
    ControllerConfig,
    ControllerProcessor,
    NodeInfo,
    NoReply,
    Propose,
    Reply,
    RequestContext,
)
from rmqc.fsm import ApplyResult, Command, ControllerState, ElectionReason
from rmqc.liveness import BrokerKey, HeartbeatTable
from rmqc.remoting import RemotingCommand, RemotingProtocolError, loads_fastjson, make_request

# A copy of the shared spec's scenarios travels with the tests, so a checkout is self-contained.
# tests/test_spec_copies.py keeps it equal to the shared spec when that folder sits beside the repo.
DEFAULT_SCENARIOS_PATH = Path(__file__).resolve().parents[3] / "tests" / "spec" / "java-scenarios.json"
START_MS = 1_700_000_000_000

# Why: a controller-triggered election is retried at most electMasterMaxRetryCount times; this
# guard only stops a buggy retry rule from looping forever inside one harness step.
MAX_FOLLOW_UP_ROUNDS = 64


class HarnessError(AssertionError):
    """The harness itself was misused or a processor misbehaved (e.g. endless retries)."""


@dataclass
class ControllerHarness:
    """One controller node in memory: processor + state + liveness + a fake clock."""

    config: ControllerConfig = field(default_factory=ControllerConfig)
    now_ms: int = START_MS
    is_leader: bool = True
    node: NodeInfo | None = field(default_factory=lambda: NodeInfo(
        "rmqc", "n0", "n0", "127.0.0.1:9878", (("n0", "127.0.0.1:9878"),)))
    state: ControllerState = field(default_factory=ControllerState)
    liveness: HeartbeatTable = field(default_factory=HeartbeatTable)

    def __post_init__(self) -> None:
        self.processor = ControllerProcessor(self.config, self.state, self.liveness)
        self.log: list[list[Command]] = []  # one inner list per committed entry
        self.results: list[ApplyResult] = []
        self.notifications: list[tuple[str, RemotingCommand]] = []
        self._channels: dict[str, int] = {}  # connection key ("<brokerName>#<brokerId>") -> id
        self._next_channel = 1
        self._next_opaque = 1
        self._last_scan_ms = self.now_ms

    # ---- requests ----------------------------------------------------------------------------

    def request(self, code: int, ext: dict[str, Any] | None = None, body: bytes | None = None,
                *, oneway: bool = False, connection: str | None = None, version: int = 0) -> RemotingCommand | None:
        """Send one request (on the named connection, if any) and return the answer (None if
        one-way). A Propose is committed and applied at once."""
        self._next_opaque += 1
        request = make_request(code, self._next_opaque, ext, body, oneway=oneway, version=version)
        return self.handle(request, self._channel_for(connection))

    def handle(self, request: RemotingCommand, channel_id: int | None = None) -> RemotingCommand | None:
        ctx = RequestContext(self.now_ms, channel_id, self.is_leader, self.is_leader, self.node)
        outcome = self.processor.handle(request, ctx)
        if isinstance(outcome, Reply):
            return outcome.response
        if isinstance(outcome, NoReply):
            return None
        assert isinstance(outcome, Propose)
        response = outcome.finish(self.commit(list(outcome.commands)))
        return None if request.is_oneway else response

    def commit(self, commands: list[Command]) -> list[ApplyResult]:
        """Apply one entry of commands, fan out notifications, then follow-up election retries."""
        results = self._apply_entry(commands)
        follow_ups = self.processor.election_retries(results, self.now_ms)
        for _ in range(MAX_FOLLOW_UP_ROUNDS):
            if not follow_ups:
                return results
            follow_ups = self.processor.election_retries(self._apply_entry(follow_ups), self.now_ms)
        raise HarnessError(f"election retries did not stop after {MAX_FOLLOW_UP_ROUNDS} rounds")

    def _apply_entry(self, commands: list[Command]) -> list[ApplyResult]:
        results = self.state.apply_all(commands)
        self.processor.config_applied(results)
        self.log.append(commands)
        self.results.extend(results)
        for result in results:
            self.notifications.extend(self.processor.notifications_for(result, self.now_ms))
        return results

    # ---- connections and time ----------------------------------------------------------------

    def _channel_for(self, connection: str | None) -> int | None:
        if connection is None:
            return None
        if connection not in self._channels:
            self._channels[connection] = self._next_channel
            self._next_channel += 1
        return self._channels[connection]

    def close_connection(self, connection: str) -> list[BrokerKey]:
        """The broker's connection closes: its brokers are inactive at once (spec 6.2)."""
        channel_id = self._channels.pop(connection, None)
        if channel_id is None:
            return []
        inactive = self.liveness.on_channel_closed(channel_id, self.now_ms)
        self._on_inactive(inactive, ElectionReason.CONNECTION_CLOSED)
        return inactive

    def advance(self, ms: int) -> None:
        """Move the clock, expiring brokers at their deadlines (as a deadline timer would) and
        running the inactive-master scan every scanInactiveMasterInterval."""
        target = self.now_ms + ms
        while (deadline := self.liveness.next_deadline_ms()) is not None and deadline < target:
            self.now_ms = max(self.now_ms, deadline + 1)
            self._expire_and_scan()
        self.now_ms = target
        self._expire_and_scan()

    def _expire_and_scan(self) -> None:
        self._on_inactive(self.liveness.expire(self.now_ms))
        interval_ms = int(self.config.get("scanInactiveMasterInterval"))  # type: ignore[call-overload]
        if self.now_ms - self._last_scan_ms >= interval_ms:
            self._last_scan_ms = self.now_ms
            commands = self.processor.inactive_master_scan(self.now_ms)
            if commands:
                self.commit(commands)

    def _on_inactive(self, inactive: list[BrokerKey],
                     reason: ElectionReason = ElectionReason.HEARTBEAT_MISSED) -> None:
        commands = self.processor.elections_due(self.now_ms, inactive, reason=reason)
        if commands:
            self.commit(commands)  # one entry for every group that lost its master

    # ---- broker-side conveniences (what a RocketMQ broker sends, spec section 7) ---------------

    def heartbeat(self, cluster: str, name: str, broker_id: int, address: str, *, timeout_ms: int = 10_000,
                  epoch: int = -1, max_offset: int = -1, priority: int | None = None) -> None:
        """A one-way 904 on the broker's own connection ('<name>#<id>')."""
        ext = {"clusterName": cluster, "brokerName": name, "brokerAddr": address, "brokerId": broker_id,
               "heartbeatTimeoutMills": timeout_ms, "epoch": epoch, "maxOffset": max_offset,
               "electionPriority": priority}
        self.request(904, ext, oneway=True, connection=f"{name}#{broker_id}")

    def register(self, cluster: str, name: str, address: str) -> int:
        """1012 + 1013 + 1003 as a starting broker does (spec 7.2); returns the broker id."""
        answer = self.request(1012, {"clusterName": cluster, "brokerName": name})
        assert answer is not None and answer.code == 0, answer
        broker_id = int(answer.ext("nextBrokerId") or 0)
        ext = {"clusterName": cluster, "brokerName": name, "appliedBrokerId": broker_id,
               "registerCheckCode": f"{address};{self.now_ms}"}
        answer = self.request(1013, ext)
        assert answer is not None and answer.code == 0, answer
        ext = {"clusterName": cluster, "brokerName": name, "brokerId": broker_id, "brokerAddress": address}
        answer = self.request(1003, ext)
        assert answer is not None and answer.code == 0, answer
        return broker_id

    # ---- the ScenarioDriver operations -----------------------------------------------------

    def send(self, request: RemotingCommand) -> RemotingCommand:
        response = self.handle(request)
        if response is None:
            raise HarnessError(f"no answer to two-way request {request.code}")
        return response

    def send_oneway(self, connection: str, request: RemotingCommand) -> None:
        self.handle(request, self._channel_for(connection))

    def sleep(self, ms: int) -> None:
        self.advance(ms)


# ---- java-scenarios.json: building requests and checking answers ---------------------------------


class ScenarioDriver(Protocol):
    """What `replay_scenario` needs from a controller under test (in-process or over TCP)."""

    def send(self, request: RemotingCommand) -> RemotingCommand: ...
    def send_oneway(self, connection: str, request: RemotingCommand) -> None: ...
    def close_connection(self, connection: str) -> object: ...
    def sleep(self, ms: int) -> None: ...


class AsyncScenarioDriver(Protocol):
    """The same four operations as coroutines, for `replay_scenario_async`."""

    async def send(self, request: RemotingCommand) -> RemotingCommand: ...
    async def send_oneway(self, connection: str, request: RemotingCommand) -> None: ...
    async def close_connection(self, connection: str) -> object: ...
    async def sleep(self, ms: int) -> None: ...


def load_scenarios(path: Path = DEFAULT_SCENARIOS_PATH) -> list[dict[str, Any]]:
    scenarios: list[dict[str, Any]] = json.loads(path.read_text())["scenarios"]
    return scenarios


def request_body(body: Any) -> bytes | None:
    """conventions.request_body: null = none; a string as its raw text; JSON values compact."""
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def connection_of(step: dict[str, Any]) -> str:
    """conventions.oneway: a broker's heartbeat connection is keyed '<brokerName>#<brokerId>'."""
    ext = step["ext"]
    return f"{ext['brokerName']}#{ext['brokerId']}"


def scenario_request(step: dict[str, Any], opaque: int) -> RemotingCommand:
    """The request of a 'send' or 'oneway' step."""
    if "send" in step:
        return make_request(step["send"], opaque, step.get("ext") or {}, request_body(step.get("body")))
    return make_request(step["oneway"], opaque, step.get("ext") or {}, request_body(step.get("body")),
                        oneway=True)


def check_response(expect: dict[str, Any], response: RemotingCommand) -> list[str]:
    """Every way `response` differs from a step's `expect` (empty list = it matches)."""
    problems = []
    ext = response.ext_fields or {}
    if response.code != expect["code"]:
        problems.append(f"code {response.code} (remark {response.remark!r}), expected {expect['code']}")
    for key, value in (expect.get("ext") or {}).items():
        if ext.get(key) != value:
            problems.append(f"ext[{key}] = {ext.get(key)!r}, expected {value!r}")
    problems += [f"ext[{k}] present ({ext[k]!r}), expected absent" for k in expect.get("ext_absent") or () if k in ext]
    problems += [f"ext[{k}] missing or empty" for k in expect.get("ext_present") or () if not ext.get(k)]
    if "remark" in expect and response.remark != expect["remark"]:
        problems.append(f"remark {response.remark!r}, expected {expect['remark']!r}")
    if "remark_contains" in expect and expect["remark_contains"] not in (response.remark or ""):
        problems.append(f"remark {response.remark!r} lacks {expect['remark_contains']!r}")
    if expect.get("body") is not None:
        problems += _check_body(expect["body"], response.body)
    return problems


def _check_body(expected: Any, body: bytes | None) -> list[str]:
    if not body:
        return [f"no body, expected {expected!r}"]
    try:
        actual = loads_fastjson(body)
    except RemotingProtocolError as exc:
        return [f"body is not fastjson: {exc}"]
    if not body_matches(expected, actual):
        return [f"body {body.decode('utf-8', 'replace')} does not match {json.dumps(expected)}"]
    return []


def body_matches(expected: Any, actual: Any) -> bool:
    """conventions.expect.body: subset match; map keys as strings; arrays order-insensitive."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        if not expected:
            return not actual
        by_text = {str(k): v for k, v in actual.items()}
        return all(str(k) in by_text and body_matches(v, by_text[str(k)]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and _match_all(expected, actual)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)):
        return isinstance(actual, (int, float)) and expected == actual
    return bool(expected == actual)


def _match_all(expected: list[Any], actual: list[Any]) -> bool:
    """Each expected element matches a distinct actual element (backtracking; lists are tiny)."""
    if not expected:
        return True
    first, rest = expected[0], expected[1:]
    for index, candidate in enumerate(actual):
        if body_matches(first, candidate) and _match_all(rest, actual[:index] + actual[index + 1:]):
            return True
    return False


@dataclass(frozen=True)
class Action:
    """One thing a scenario asks the driver to do; `kind` names the driver call."""

    kind: ClassVar[str]
    label: str  # "step N (code)" for problem reports


@dataclass(frozen=True)
class Send(Action):
    """A two-way request whose answer is checked against `expect`."""

    kind = "send"
    request: RemotingCommand
    expect: dict[str, Any]


@dataclass(frozen=True)
class Oneway(Action):
    kind = "oneway"
    connection: str
    request: RemotingCommand


@dataclass(frozen=True)
class Sleep(Action):
    kind = "sleep"
    ms: int


@dataclass(frozen=True)
class Close(Action):
    kind = "close"
    connection: str


def scenario_actions(scenario: dict[str, Any]) -> Iterator[Action]:
    """The steps as driver actions, then the closing of every heartbeat connection the scenario
    opened (conventions.requests). Transport-free: sync and async replays walk the same list."""
    for number, step in enumerate(scenario["steps"]):
        label = f"step {number} ({step.get('send', step.get('oneway', ''))})"
        if "sleep_ms" in step:
            yield Sleep(label, step["sleep_ms"])
        elif "close_heartbeat_connection_of" in step:
            yield Close(label, step["close_heartbeat_connection_of"])
        elif "oneway" in step:
            yield Oneway(label, connection_of(step), scenario_request(step, number + 1))
        else:
            yield Send(label, scenario_request(step, number + 1), step["expect"])
    for connection in sorted({connection_of(s) for s in scenario["steps"] if "oneway" in s}):
        yield Close("end of scenario", connection)


def replay_scenario(driver: ScenarioDriver, scenario: dict[str, Any]) -> list[str]:
    """Every problem of every step, each prefixed with the step number and request code."""
    problems = []
    for action in scenario_actions(scenario):
        if isinstance(action, Sleep):
            driver.sleep(action.ms)
        elif isinstance(action, Close):
            driver.close_connection(action.connection)
        elif isinstance(action, Oneway):
            driver.send_oneway(action.connection, action.request)
        elif isinstance(action, Send):
            problems += [f"{action.label}: {p}" for p in check_response(action.expect, driver.send(action.request))]
    return problems


async def replay_scenario_async(driver: AsyncScenarioDriver, scenario: dict[str, Any]) -> list[str]:
    """The same replay for a driver whose operations are coroutines (e.g. over TCP on Trio)."""
    problems = []
    for action in scenario_actions(scenario):
        if isinstance(action, Sleep):
            await driver.sleep(action.ms)
        elif isinstance(action, Close):
            await driver.close_connection(action.connection)
        elif isinstance(action, Oneway):
            await driver.send_oneway(action.connection, action.request)
        elif isinstance(action, Send):
            response = await driver.send(action.request)
            problems += [f"{action.label}: {p}" for p in check_response(action.expect, response)]
    return problems


