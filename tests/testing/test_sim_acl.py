"""RocketMQ ACL in the simulator (`_simacl`, profile "acl"): signed brokers and admins pass the
gate `rmqc serve` runs (rmqc.acl.RequestGate), an intruder's forged requests are refused, and each
check that watches them can fail."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmqc.acl import AclRules, Allowed, RequestGate, SigningKey
from rmqc.remoting import RemotingCommand
from rmqc.testing import _simacl
from rmqc.testing._simacl import HONEST_ACL, SimAcl, acl_on
from rmqc.testing.sim import PROFILES, SeedResult, SimKnobs, mutant, nodes_for_seed, run_seed


def acl_run(seed: int, profile: str = "acl") -> SeedResult:
    return run_seed(seed, replace(PROFILES[profile], nodes=nodes_for_seed(seed, None)))


def test_acl_seeds_pass_and_every_kind_of_forgery_was_refused() -> None:
    counts: dict[str, int] = {}
    for seed in range(6):
        result = acl_run(seed)
        assert result.ok, (seed, result.violations, result.trace)
        assert result.counts["acl_intruder_refusals_answered"] > 0, (seed, result.counts)
        for what, n in result.counts.items():
            counts[what] = counts.get(what, 0) + n
    # the intruder's requests really reached the gates, refused for every reason, 904s dropped
    for reason in ("address_not_allowed", "unknown_access_key", "bad_signature", "not_admin"):
        assert counts[f"acl_refused_{reason}"] >= 10, (reason, counts)
    assert counts["acl_dropped_oneway"] >= 10
    assert counts["acl_intruder_refusals_answered"] >= 50
    # and everything else went through: the load is the default profile's
    assert counts["acl_seeds"] == 6 and counts["acl_admitted"] > 6 * 1000
    assert counts["controller_elections"] > 6 and counts["controller_routes_checked"] > 6 * 20


def test_acl_runs_replay_the_same_run() -> None:
    first, second = acl_run(5), acl_run(5)
    assert first.trace == second.trace and first.counts == second.counts


def test_the_mutant_accepting_any_signature_is_caught_at_seed_0() -> None:
    with mutant("acl-accepts-any-signature"):
        result = acl_run(0)
    assert not result.ok and result.violations[0].startswith("acl: intruder0's "), result.violations
    assert "not NO_PERMISSION (bad signature)" in result.violations[0]


def test_an_applied_command_of_the_intruder_is_caught_without_the_answer_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The state check on its own: answers to the intruder unchecked, any signature accepted."""
    monkeypatch.setattr(_simacl.SimIntruder, "on_answer", lambda self, opaque, answer: None)
    with mutant("acl-accepts-any-signature"):
        violations = [v for seed in range(3) for v in acl_run(seed).violations]
    assert violations and all(" from 10.9.0.1:40000 (key admin-key), an intruder" in v for v in violations), \
        violations


def test_an_intruders_heartbeat_reaching_the_replica_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-way check: a gate that lets every 904 through leaves the intruder's broker in the
    liveness tables."""
    check = RequestGate.check

    def oneway_open(self: RequestGate, rules: AclRules, request: RemotingCommand, host: str) -> object:
        return Allowed("anyone") if request.is_oneway else check(self, rules, request, host)

    monkeypatch.setattr(RequestGate, "check", oneway_open)
    result = acl_run(0)
    assert not result.ok and "liveness table holds BrokerKey" in result.violations[0], result.violations


def test_a_refused_honest_client_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SimAcl, "sign", lambda self, sender, request: None)  # nobody signs
    result = acl_run(0)
    assert not result.ok and "refused" in result.violations[0] and "signed request" in result.violations[0]
    assert "address not allowed" in result.violations[0]


def test_a_quarter_of_the_default_seeds_run_with_acl_and_decide_the_same() -> None:
    """Signed clients only (no intruder): the gate admits everything, so a seed with ACL on makes
    the decisions it makes without (the same trace and counts besides the ACL's own)."""
    on = [seed for seed in range(40) if acl_on(HONEST_ACL, seed)]
    assert 5 <= len(on) <= 15 and any(seed % 2 for seed in on) and any(seed % 2 == 0 for seed in on)
    assert PROFILES["default"].acl == HONEST_ACL and PROFILES["acl"].acl is not None
    seed = on[0]
    with_acl = acl_run(seed, "default")
    without = run_seed(seed, replace(SimKnobs(), acl=None, nodes=nodes_for_seed(seed, None)))
    assert with_acl.ok and without.ok
    assert with_acl.counts["acl_seeds"] == 1 and with_acl.counts["acl_admitted"] > 500
    assert not any(what.startswith("acl_refused") for what in with_acl.counts)
    assert {w: n for w, n in with_acl.counts.items() if not w.startswith("acl_")} == without.counts
    assert with_acl.trace == without.trace


def test_the_mutant_patches_the_check_the_node_runs() -> None:
    """One copy of the decision: the node's gate and the simulator's are the same RequestGate,
    whose signature check the mutant replaces."""
    from rmqc.node import _acl

    assert _acl.RequestGate is RequestGate
    real = SigningKey.matches
    with mutant("acl-accepts-any-signature"):
        assert SigningKey.matches is not real
    assert SigningKey.matches is real
