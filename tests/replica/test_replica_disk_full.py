"""A write in flight when the leader's disk fills: answered at once with the disk's refusal when
its commit needs the leader's own write (one or two voters), committed by the followers when
they make a quorum without it (three voters)."""

from __future__ import annotations

from typing import Any

import pytest
from replica_harness import Cluster, leader
from test_replica_driver import get_next_id

from rmqc.remoting import ResponseCode
from rmqc.replica import Answer
from rmqc.storage import StorageFullError

IN_THE_LOG = "this request was already in the log, unsaved"


def fill_disk(storage: Any) -> None:
    def save(*_args: object) -> None:
        raise StorageFullError("MDB_MAP_FULL: Environment mapsize limit reached")

    storage.save = storage.ensure_space = save  # LmdbStorage's retry probe fails the same way


def test_a_sole_voters_write_in_flight_is_answered_at_once_with_the_disk_refusal() -> None:
    h = leader()
    fill_disk(h.replica.storage)
    h.outbox.clear()
    h.replica.client_request(get_next_id(1), 1, 1)
    h.settle()  # no time passes: not the request timeout's answer
    [answer] = [action for action in h.outbox if isinstance(action, Answer)]
    response = answer.response
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark.startswith("the controller's disk is full") and IN_THE_LOG in response.remark
    assert h.replica.disk.alarm is not None and h.replica.disk.alarm.refused_writes == 1
    assert h.replica.proposals.waiting == {}


@pytest.mark.parametrize("voters, answered_at_once", [(2, True), (3, False)])
def test_a_leaders_write_in_flight_waits_only_when_the_followers_can_commit_it(voters: int,
                                                                              answered_at_once: bool) -> None:
    cluster = Cluster(voters)
    cluster.run(3_000)
    leader_id = cluster.leader()
    assert leader_id is not None
    replica = cluster.replicas[leader_id]
    fill_disk(replica.storage)
    replica.client_request(get_next_id(7), 1, 7)
    cluster.settle()
    if not answered_at_once:
        cluster.run(500)  # not the request timeout (5 s): a few passes, the next disk retry at most
    response = cluster.answered[7]
    if answered_at_once:
        assert response.code == ResponseCode.SYSTEM_ERROR and IN_THE_LOG in response.remark
    else:  # the two followers saved it: committed and applied without the leader's write
        assert response.code == ResponseCode.SUCCESS, response.remark
    assert replica.disk.alarm is not None
