"""Hypothesis strategies for fsm commands, shared by the fsm tests."""

from __future__ import annotations

from hypothesis import strategies as st

from rmqc.fsm import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ElectMaster,
    Origin,
    Trigger,
    UpdateBrokerAddress,
    UpdateControllerConfig,
)

C = "C"
names = st.sampled_from(["a", "b", "c"])
ids = st.integers(1, 5)
small_sets = st.frozensets(ids, max_size=5).map(lambda s: tuple(sorted(s)))
ts = st.integers(0, 2**62)
optional_text = st.none() | st.text(max_size=8)
origins = st.none() | st.builds(Origin, optional_text, optional_text, optional_text)
commands = st.one_of(
    st.builds(ApplyBrokerId, st.just(C), names, ids, st.text(max_size=8), st.sampled_from(["x;1", "y;2"]), ts,
              origins, st.booleans()),
    st.builds(UpdateBrokerAddress, st.just(C), names, ids, st.text(max_size=8), ts, origins),
    st.builds(ElectMaster, st.just(C), names, st.sampled_from(list(Trigger)), st.none() | ids,
              st.integers(0, 4), st.integers(0, 6), ts, st.none() | ids, st.booleans(), st.none() | ts,
              st.integers(1, 3), st.none() | ts, origins),
    st.builds(AlterSyncStateSet, names, ids, st.integers(0, 4), st.integers(0, 6), small_sets, ts, origins),
    st.builds(CleanBrokerData, st.none() | st.just(C), names, st.none() | small_sets, ts, origins),
    st.builds(UpdateControllerConfig, st.dictionaries(st.sampled_from(["electMasterMaxRetryCount", "x"]),
                                                      st.text(max_size=4), max_size=2)
              .map(lambda d: tuple(sorted(d.items()))), ts, origins),
)
