"""rmqc.testing.pauses measures silences as the nodes' own: the pure parts of that arithmetic."""

from __future__ import annotations

from rmqc.testing.pauses import _Probe


def test_silence_is_the_longest_wait_less_the_harness_own_stall() -> None:
    probe = _Probe(samples=[(0.00, 0.01), (0.02, 0.03), (0.04, 0.30), (0.31, None)])
    raw, net = probe.silence_s(0.0, 0.35, lambda since, until: 0.0)
    assert abs(raw - 0.26) < 1e-9 and abs(net - 0.26) < 1e-9
    raw, net = probe.silence_s(0.0, 0.35, lambda since, until: 0.2 if since <= 0.1 <= until else 0.0)
    assert abs(raw - 0.26) < 1e-9 and abs(net - 0.06) < 1e-9


def test_a_request_still_unanswered_counts_until_the_window_ends() -> None:
    probe = _Probe(samples=[(0.0, 0.01), (1.0, None)])
    raw, _ = probe.silence_s(0.5, 1.5, lambda since, until: 0.0)
    assert abs(raw - 0.5) < 1e-9
