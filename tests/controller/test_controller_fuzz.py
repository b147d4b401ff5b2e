"""Random requests through the processor: always an answer with a code, and the state's epochs
only move forward (hypothesis prints the failing example)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from rmqc.controller import NoReply, Propose, Reply, RequestContext
from rmqc.remoting import make_request
from rmqc.testing.controller_harness import ControllerHarness

CODES = [904, 1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011, 1012, 1013, 1007, 7]
KEYS = ["clusterName", "brokerName", "brokerId", "brokerAddr", "brokerAddress", "appliedBrokerId",
        "registerCheckCode", "designateElect", "masterBrokerId", "masterEpoch", "heartbeatTimeoutMills",
        "epoch", "maxOffset", "brokerControllerIdsToClean", "isCleanLivingBroker"]
values = st.one_of(st.sampled_from(["b", "C", "1", "2", "3", "-1", "0", "true", "1;2", "h:1;0", "x", "99999999999"]),
                   st.text(max_size=6))
bodies = st.one_of(st.none(), st.sampled_from([b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}', b'["b"]',
                                               b"electMasterMaxRetryCount=1\n", b"{", b"[1]"]),
                   st.binary(max_size=16))
requests = st.tuples(st.sampled_from(CODES), st.none() | st.dictionaries(st.sampled_from(KEYS), values),
                     bodies, st.booleans(), st.integers(0, 20_000))


@settings(max_examples=150, deadline=None)
@given(st.lists(requests, max_size=30))
def test_any_request_sequence_is_answered_and_epochs_never_go_back(sequence) -> None:
    h = ControllerHarness()
    for address in ("h:1", "h:2"):  # a group named "b" exists, so requests can reach deep paths
        h.register("C", "b", address)
        h.heartbeat("C", "b", int(address[-1]), address)
    seen: dict[str, tuple[int, int]] = {}
    for opaque, (code, ext, body, oneway, advance_ms) in enumerate(sequence):
        h.advance(advance_ms)
        request = make_request(code, opaque, ext, body, oneway=oneway)
        outcome = h.processor.handle(request, RequestContext(h.now_ms, channel_id=opaque % 3))
        if isinstance(outcome, Propose):
            response = outcome.finish(h.commit(list(outcome.commands)))
            assert response.opaque == opaque and response.is_response
        elif isinstance(outcome, Reply):
            assert not oneway and outcome.response.opaque == opaque and outcome.response.is_response
        else:
            assert isinstance(outcome, NoReply) and oneway
        seen = {name: epochs for name, epochs in seen.items() if h.state.group(name) is not None}
        for group in h.state.groups():  # (a cleaned and re-created group starts again at 0)
            epochs = (group.master_epoch, group.sync_state_set_epoch)
            old = seen.get(group.broker_name, (0, 0))
            assert epochs[0] >= old[0] and epochs[1] >= old[1]
            assert group.master_id is None or group.master_epoch > 0
            seen[group.broker_name] = epochs
