"""The readiness checks a replica's status gives, the liveness checks judged from what the shell
measured, and their rendering as /livez and /readyz answer (etcd's and Kubernetes' format: [+]/[-]
lines, verbose, exclude)."""

from __future__ import annotations

import dataclasses

from rmqc.replica import (
    DISK_PROBE_BOUND_S,
    LIVENESS_CHECKS,
    LOOP_BOUND_S,
    READINESS_CHECKS,
    READY_MAX_LAG_ENTRIES,
    WRITE_BOUND_S,
    DiskProbe,
    HealthCheck,
    ReplicaStatus,
    disk_check,
    endpoint_checks,
    health_verdict,
    loop_check,
    readiness_checks as checks_of,
    writes_check,
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


def test_the_liveness_checks_judge_the_shells_measurements_against_their_bounds() -> None:
    assert not loop_check(None, 10.0).ok  # the loop has not published yet
    assert loop_check(10.0 - LOOP_BOUND_S, 10.0).ok
    assert "has not run for 3.5 s" in loop_check(10.0 - LOOP_BOUND_S - 0.5, 10.0).detail
    assert writes_check(None, 10.0, "/d") == HealthCheck("writes", True, "no write under way")
    assert writes_check(10.0 - WRITE_BOUND_S, 10.0, "/d").ok
    assert "a write to /d has been under way" in writes_check(10.0 - WRITE_BOUND_S - 1, 10.0, "/d").detail
    done = DiskProbe(8.0, 8.002)
    assert disk_check("/d", done, done, 10.0, probed=True).detail == "/d answered in 2.0 ms, 2.0 s ago"
    assert disk_check("/d", None, None, 10.0, probed=True).detail == "the first probe of /d is under way"
    assert "is not probed" in disk_check("/d", None, None, 10.0, probed=False).detail
    hung = DiskProbe(10.0 - DISK_PROBE_BOUND_S - 0.5)
    assert not disk_check("/d", hung, done, 10.0, probed=True).ok  # in flight too long, whatever came before
    assert disk_check("/d", DiskProbe(9.5), done, 10.0, probed=True).ok  # in flight, within the bound
    failed_probe = DiskProbe(9.0, 9.001, "OSError: [Errno 5] EIO")
    assert disk_check("/d", failed_probe, failed_probe, 10.0, probed=True).detail == \
        "a probe of /d failed: OSError: [Errno 5] EIO"


def test_readyz_adds_the_published_readiness_or_says_the_node_is_starting() -> None:
    liveness = tuple(HealthCheck(name, True, "fine") for name in LIVENESS_CHECKS)
    readiness = checks_of(FOLLOWER)
    assert endpoint_checks("livez", liveness, readiness) == liveness
    assert endpoint_checks("readyz", liveness, readiness) == liveness + readiness
    for published in (None, ()):
        starting = endpoint_checks("readyz", liveness, published)[len(liveness):]
        assert [(check.name, check.ok, check.detail) for check in starting] == \
            [(name, False, "the node is starting") for name in READINESS_CHECKS]
