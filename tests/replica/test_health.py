"""The readiness checks a replica's status gives, and their rendering as /livez and /readyz answer
(etcd's and Kubernetes' format: [+]/[-] lines, verbose, exclude)."""

from __future__ import annotations

import dataclasses

from rmqc.replica import (
    READINESS_CHECKS,
    READY_MAX_LAG_ENTRIES,
    HealthCheck,
    ReplicaStatus,
    health_verdict,
    readiness_checks as checks_of,
)

FOLLOWER = ReplicaStatus(node_id="n1", role="follower", leader="n0", term=3, commit=100, applied=100, last_index=100,
                         serving=False, voters=("n0", "n1", "n2"), learners=(), transferring_to=None,
                         pending_conf_change=None, peers={}, broker_groups=0, live_brokers=0, alarms=(),
                         leader_commit=100)


def failed(status: ReplicaStatus) -> dict[str, str]:
    return {check.name: check.detail for check in checks_of(status) if not check.ok}


def test_a_caught_up_voter_with_a_leader_and_no_alarm_is_ready() -> None:
    assert [check.name for check in checks_of(FOLLOWER)] == list(READINESS_CHECKS)
    assert failed(FOLLOWER) == {}
    leader = dataclasses.replace(FOLLOWER, node_id="n0", role="leader", serving=True, leader_commit=0)
    assert failed(leader) == {}


def test_each_check_fails_for_its_reason() -> None:
    assert "no leader known" in failed(dataclasses.replace(FOLLOWER, leader=None))["leader"]
    elected = dataclasses.replace(FOLLOWER, node_id="n0", leader="n0", serving=False)
    assert "does not serve yet" in failed(elected)["leader"]
    behind = dataclasses.replace(FOLLOWER, leader_commit=100 + READY_MAX_LAG_ENTRIES + 1)
    assert failed(behind) == {"lag": f"applied 100, the leader's commit {100 + READY_MAX_LAG_ENTRIES + 1}: "
                                     f"{READY_MAX_LAG_ENTRIES + 1} entries behind (more than {READY_MAX_LAG_ENTRIES})"}
    assert failed(dataclasses.replace(FOLLOWER, leader_commit=100 + READY_MAX_LAG_ENTRIES)) == {}
    full = dataclasses.replace(FOLLOWER, alarms=({"alarm": "disk_full", "detail": "ENOSPC"},))
    assert failed(full) == {"disk_full": "alarm raised: ENOSPC"}
    repairing = dataclasses.replace(FOLLOWER, alarms=({"alarm": "repairing", "detail": "journal damaged"},))
    assert failed(repairing) == {"repairing": "alarm raised: journal damaged"}
    learner = dataclasses.replace(FOLLOWER, voters=("n0", "n2"), learners=("n1",))
    assert "is a learner" in failed(learner)["voter"]
    outsider = dataclasses.replace(FOLLOWER, voters=("n0", "n2"))
    assert "not a member" in failed(outsider)["voter"]


CHECKS = (HealthCheck("loop", True, "ran"), HealthCheck("leader", False, "no leader known"),
          HealthCheck("lag", True, "0 behind"))


def test_verdicts_are_rendered_as_etcd_and_kubernetes_do() -> None:
    passing = health_verdict("livez", CHECKS[:1])
    assert passing.ok and passing.text == "ok\n"
    assert health_verdict("livez", CHECKS[:1], verbose=True).text == "[+]loop ok\nlivez check passed\n"
    failing = health_verdict("readyz", CHECKS)
    assert not failing.ok  # the failure lists every check, verbose or not
    assert failing.text == "[+]loop ok\n[-]leader failed: no leader known\n[+]lag ok\nreadyz check failed\n"
    excluded = health_verdict("readyz", CHECKS, verbose=True, exclude=["leader"])
    assert excluded.ok and excluded.text == "[+]loop ok\n[+]leader excluded: ok\n[+]lag ok\nreadyz check passed\n"
    unknown = health_verdict("readyz", CHECKS, exclude=["leader", "nosuch"])
    assert unknown.ok
    assert unknown.text == 'warn: some health checks cannot be excluded: no matches for "nosuch"\nok\n'
    assert not health_verdict("readyz", CHECKS, exclude=["nosuch"]).ok
