"""The 904 fast paths give exactly what the generic ones give.

`heartbeat_of` (one regex over the six numbers) against `heartbeat_checked` (HEARTBEAT.decode field
by field); `ControllerProcessor.handle_heartbeat` against `handle` with a RequestContext: same
outcome, same table afterwards, on random valid and invalid headers. Examples are derandomized.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rmqc.controller import ControllerConfig, ControllerProcessor, MissingHeaderField, NoReply, Reply, RequestContext
from rmqc.controller._heartbeat import heartbeat_checked, heartbeat_of
from rmqc.fsm import ControllerState
from rmqc.liveness import BrokerKey, Heartbeat, HeartbeatTable, LivenessTableFull
from rmqc.remoting import RemotingCommand, make_request

FUZZ = settings(derandomize=True, max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NUMBER_KEYS = ["brokerId", "epoch", "maxOffset", "confirmOffset", "heartbeatTimeoutMills", "electionPriority"]
TEXT_KEYS = ["clusterName", "brokerAddr", "brokerName"]
EDGE_NUMBERS = [
    "0", "007", "2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "999999999999999999", "1000000000000000000",
    "0000000000000000001", "00000000000000000001", "+5", "-5", " 5", "5 ", "5_0", "1.5", "1e3", "",
    "\u0663", "\uff15", "1,2", "1,2,3,4,5,6", "None", "-", "+",
]
NUMBER_TEXT = (
    st.integers(0, 10**20).map(str)
    | st.integers(-(2**64), 2**64).map(str)
    | st.sampled_from(EDGE_NUMBERS)
    | st.text(alphabet="0123456789+-, _.\u0663", max_size=22)
)


@st.composite
def heartbeat_ext(draw: st.DrawFn) -> dict[str, str]:
    """Mostly complete, plain headers; often a field missing or odd."""
    ext: dict[str, str] = {}
    for key in TEXT_KEYS:
        if draw(st.integers(0, 9)):
            ext[key] = draw(st.sampled_from(["C", "broker-a", "10.0.0.1:30911", ""]) | st.text(max_size=5))
    for key in NUMBER_KEYS:
        if draw(st.integers(0, 9)):
            plain = draw(st.integers(0, 3)) > 0
            ext[key] = draw(st.from_regex(r"[0-9]{1,20}", fullmatch=True) if plain else NUMBER_TEXT)
    if draw(st.booleans()):
        ext["AccessKey"] = "ak"  # unknown keys are ignored
    return ext


def decoded(decode: object, request: RemotingCommand) -> Heartbeat | str | None:
    try:
        return decode(request)  # type: ignore[operator]
    except MissingHeaderField as exc:
        return f"missing {exc.name}"


@FUZZ
@given(heartbeat_ext())
def test_heartbeat_of_agrees_with_the_field_by_field_decode(ext: dict[str, str]) -> None:
    request = make_request(904, 1, ext, oneway=True)
    fast = decoded(heartbeat_of, request)
    assert fast == decoded(heartbeat_checked, request)
    if isinstance(fast, Heartbeat):  # the same types too, not just equal tuples
        assert type(fast) is Heartbeat and type(fast.key) is BrokerKey


def test_plain_heartbeats_take_the_fast_path_and_odd_ones_keep_the_java_defaults() -> None:
    ext = PLAIN
    assert heartbeat_of(make_request(904, 1, ext)) == Heartbeat(BrokerKey("C", "b", 2), "a:1", 5000, 3, 400, 300, 7)
    odd = {**ext, "epoch": "2147483648", "maxOffset": "+5", "confirmOffset": "9223372036854775807"}
    assert heartbeat_of(make_request(904, 1, odd)) == Heartbeat(
        BrokerKey("C", "b", 2), "a:1", 5000, -1, 5, 2**63 - 1, 7)
    assert heartbeat_of(make_request(904, 1, {**ext, "brokerId": "1,2"})) is None  # unparsable: 2005


PLAIN = {"clusterName": "C", "brokerAddr": "a:1", "brokerName": "b", "brokerId": "2", "epoch": "3",
         "maxOffset": "400", "confirmOffset": "300", "heartbeatTimeoutMills": "5000", "electionPriority": "7"}


@pytest.mark.parametrize("key", NUMBER_KEYS)
@pytest.mark.parametrize("text", EDGE_NUMBERS)
def test_each_number_at_its_edges_decodes_as_the_generic_path_does(key: str, text: str) -> None:
    request = make_request(904, 1, {**PLAIN, key: text})
    assert decoded(heartbeat_of, request) == decoded(heartbeat_checked, request)


def processor() -> ControllerProcessor:
    return ControllerProcessor(ControllerConfig(), ControllerState(), HeartbeatTable(max_brokers=3))


def table_rows(table: HeartbeatTable) -> list[tuple[BrokerKey, object]]:
    return sorted((key, table.live_info(key)) for key in table)


def reference_outcome(table: HeartbeatTable, request: RemotingCommand, now_ms: int, channel_id: int) -> object:
    """Spec 3.1 as the generic processor served it: decode field by field, 2005 without a
    brokerId, code 1 for a missing field or a full table, no answer to a one-way request."""
    heartbeat = None
    if request.ext_fields is not None:
        try:
            heartbeat = heartbeat_checked(request)
        except MissingHeaderField as exc:
            return None if request.is_oneway else (1, str(exc))
    if heartbeat is None:
        return None if request.is_oneway else (2005, "Heart beat with empty brokerId")
    try:
        table.update(heartbeat, now_ms, channel_id)
    except LivenessTableFull as exc:
        return None if request.is_oneway else (1, str(exc))
    return None if request.is_oneway else (0, "Heart beat success")


def answer_of(outcome: object, request: RemotingCommand) -> object:
    if isinstance(outcome, NoReply):
        return None
    assert isinstance(outcome, Reply) and outcome.response.opaque == request.opaque
    return (outcome.response.code, outcome.response.remark)


@FUZZ
@given(st.lists(st.tuples(heartbeat_ext() | st.none(), st.booleans(), st.integers(1, 3)), min_size=1, max_size=6))
def test_handle_and_handle_heartbeat_serve_904_as_the_generic_decode_did(
    requests: list[tuple[dict | None, bool, int]],
) -> None:
    reference, general, fast = HeartbeatTable(max_brokers=3), processor(), processor()  # the bound is hit too
    for now_ms, (ext, oneway, channel_id) in enumerate(requests, start=1_000):
        request = make_request(904, now_ms, ext, oneway=oneway)
        expected = reference_outcome(reference, request, now_ms, channel_id)
        assert answer_of(general.handle(request, RequestContext(now_ms, channel_id)), request) == expected
        assert answer_of(fast.handle_heartbeat(request, now_ms, channel_id), request) == expected
        assert table_rows(general.liveness) == table_rows(fast.liveness) == table_rows(reference)


def test_a_heartbeat_refused_by_the_full_table_answers_system_error() -> None:
    p = processor()
    for broker_id in range(1, 5):
        ext = {"clusterName": "C", "brokerAddr": "a:1", "brokerName": "b", "brokerId": str(broker_id)}
        outcome = p.handle_heartbeat(make_request(904, broker_id, ext), 0, None)
        assert isinstance(outcome, Reply)
        assert outcome.response.code == (0 if broker_id <= 3 else 1)
    assert len(p.liveness) == 3
