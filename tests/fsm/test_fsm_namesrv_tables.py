"""The NameServer's replicated tables: a topic's queue data is replaced, never changed in place, so
a snapshot's capture can share it; the index of topics by broker name always agrees with the
tables; a capture encodes, a step at a time, exactly the state at the capture, and the stepped
decode of those bytes (or of the version-1 document they hold) is that state again."""

from __future__ import annotations

import sys

import orjson
from fsm_strategies import commands as group_commands
from hypothesis import given, settings, strategies as st

from rmqc.fsm import (
    Command,
    ControllerState,
    DeleteKvConfig,
    DeleteTopicRoute,
    PutKvConfig,
    RegisterBrokerRoute,
    RegisterTopicRoute,
    SetWritePermOfBroker,
    UnregisterBrokerRoute,
)

CLUSTERS = ("c1", "c2")
NAMES = ("broker-a", "broker-b", "broker-c")
TOPICS = ("t0", "t1", "t2", "t3")


def register(cluster: str, name: str, broker_id: int, topics: tuple[str, ...], counter: int = 1) -> RegisterBrokerRoute:
    address = f"{name}-{broker_id}:10911"
    return RegisterBrokerRoute(cluster, name, broker_id, address, address, 0, 1, counter,
                               tuple((topic, 4, 4, 6, 0) for topic in sorted(topics)), 0)


def unregister(cluster: str, name: str, broker_id: int) -> UnregisterBrokerRoute:
    return UnregisterBrokerRoute(cluster, name, broker_id, f"{name}-{broker_id}:10911", "request", 0)


commands = st.one_of(
    st.builds(register, st.sampled_from(CLUSTERS), st.sampled_from(NAMES), st.integers(0, 1),
              st.lists(st.sampled_from(TOPICS), unique=True).map(tuple), st.integers(1, 3)),
    st.builds(unregister, st.sampled_from(CLUSTERS), st.sampled_from(NAMES), st.integers(0, 1)),
    st.builds(DeleteTopicRoute, st.sampled_from(TOPICS), st.sampled_from((None, *CLUSTERS)), st.just(0)),
    st.builds(lambda topic, names: RegisterTopicRoute(topic, tuple((name, 2, 2, 6, 0) for name in names), 0),
              st.sampled_from(TOPICS), st.lists(st.sampled_from(NAMES), unique=True, min_size=1)),
    st.builds(SetWritePermOfBroker, st.sampled_from(NAMES), st.booleans(), st.just(0)),
)


kv_commands = st.one_of(
    st.builds(PutKvConfig, st.sampled_from(("ns1", "ns2")), st.sampled_from(("k1", "k2", "k3")), st.text(max_size=4),
              st.just(0)),
    st.builds(DeleteKvConfig, st.sampled_from(("ns1", "ns2")), st.sampled_from(("k1", "k2", "k3")), st.just(0)),
)


def topics_by_name(state: ControllerState) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for topic, queues in state.namesrv.topics.items():
        for name in queues:
            index.setdefault(name, set()).add(topic)
    return index


def index_of(state: ControllerState) -> dict[str, set[str]]:
    index = state.namesrv._topics_of_name
    assert all(len(topics) == len(set(topics)) for topics in index.values())  # no topic twice
    return {name: set(topics) for name, topics in index.items()}


def content(snapshot: bytes) -> dict[str, object]:
    """A snapshot's document without its chunk index (fsm._chunks): what version 1 holds."""
    return {key: value for key, value in orjson.loads(snapshot).items() if key != "chunks"}


def version_1(snapshot: bytes) -> bytes:
    """The version-1 document a chunked snapshot holds: the same bytes without the index."""
    return b'{"version":1' + snapshot[snapshot.index(b"]") + 1:]


def decoded(snapshot: bytes, items_per_step: int) -> ControllerState:
    *steps, state = ControllerState.decode_steps(snapshot, items_per_step)
    assert state is not None and all(step is None for step in steps)
    return state


@settings(max_examples=200, deadline=None)
@given(st.lists(commands | kv_commands | group_commands, max_size=30), st.integers(0, 30), st.integers(1, 4),
       st.integers(1, 4))
def test_index_agrees_and_a_capture_is_the_state_at_the_capture(history: list[Command], at: int, per_piece: int,
                                                                 per_step: int) -> None:
    state = ControllerState()
    capture, expected = None, None
    for position, command in enumerate(history):
        if position == at:
            capture, expected = state.capture(), state.snapshot()
        state.apply(command)
        assert index_of(state) == topics_by_name(state)
        assert all(state.namesrv.topics.values())  # a topic without queue data is gone
    if capture is None:
        capture, expected = state.capture(), state.snapshot()
    assert expected is not None
    steps = list(capture.encode_steps(groups_per_step=per_piece))  # pieces of 1 to 4 records
    data = steps[-1]
    assert isinstance(data, bytes) and all(step is None for step in steps[:-1])
    assert content(data) == content(expected) and orjson.dumps(orjson.loads(data)) == data
    # the stepped decode, of the chunked bytes and of the version-1 bytes they hold, is the captured state
    for snapshot in (data, version_1(data)):
        restored = decoded(snapshot, per_step)
        assert restored.snapshot() == expected
        assert index_of(restored) == topics_by_name(restored)
        assert all(name is sys.intern(name) for name in restored.namesrv.topics)
        assert {name: set(by_name) for name, by_name in restored.namesrv._by_name.items()} == {
            name: {key for key, r in restored.namesrv.registrations.items() if r.broker_name == name}
            for name in {r.broker_name for r in restored.namesrv.registrations.values()}}
    restored = ControllerState()
    restored.restore(state.snapshot())
    assert restored.snapshot() == state.snapshot()
    assert index_of(restored) == topics_by_name(state)


def test_a_wipe_touches_only_its_broker_names_topics() -> None:
    state = ControllerState()
    state.apply(register("c1", "broker-a", 0, ("t0", "t1")))
    state.apply(register("c1", "broker-b", 0, ("t1", "t2")))
    captured = state.capture()
    before = state.snapshot()
    result = state.apply(SetWritePermOfBroker("broker-a", True, 0))
    assert result.detail == 2
    assert {topic: queues["broker-a"].perm for topic, queues in state.namesrv.topics.items()
            if "broker-a" in queues} == {"t0": 4, "t1": 4}
    assert state.namesrv.topics["t2"]["broker-b"].perm == 6
    assert list(captured.encode_steps())[-1] == before  # the capture shares the tables: unchanged
