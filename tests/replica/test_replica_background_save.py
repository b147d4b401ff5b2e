"""Saves the Saver leaves to the background (a stalled disk): the Ready stays outstanding, the
node goes on sending what needs no write (a leader its heartbeats and appends: no election; a
follower its heartbeat answers), and nothing that the save makes true leaves before it ends (no
append acknowledgement, no apply, no answer); a full disk found by a background save is the
disk-full alarm, as when the driver saved itself."""

from __future__ import annotations

from typing import Any

from replica_harness import Cluster
from test_replica_driver import get_next_id

from rmqc.raft import Entry, HardState, MessageType, Snapshot
from rmqc.remoting import ResponseCode
from rmqc.replica import Replica, SendRaft
from rmqc.storage import StorageFullError

ELECTION_TIMEOUTS_MS = 3 * 10 * 50  # three of the harness's election timeouts (10 ticks of 50 ms)


class HeldSaver:
    """Saves now until `hold()`; then each save waits until `finish()` (or `fail()`)."""

    def __init__(self, replica: Replica) -> None:
        self.replica, self.storage = replica, replica.storage
        self.holding = False
        self.held: list[tuple[HardState | None, list[Entry], Snapshot | None]] = []
        replica.saver = self

    def save(self, hard_state: HardState | None, entries: list[Entry], snapshot: Snapshot | None) -> bool:
        if not self.holding:
            self.storage.save(hard_state, entries, snapshot)
            return True
        self.held.append((hard_state, entries, snapshot))
        return False

    def finish(self) -> None:
        self.holding = False
        [save] = self.held
        self.held.clear()
        self.storage.save(*save)
        self.replica.save_finished(None)

    def fail(self, error: Exception) -> None:
        self.holding = False
        self.held.clear()
        self.replica.save_finished(error)


def started() -> tuple[Cluster, str]:
    cluster = Cluster(3)
    cluster.run(3_000)
    leader_id = cluster.leader()
    assert leader_id is not None
    return cluster, leader_id


def sent_by(cluster: Cluster, node_id: str) -> list[Any]:
    """Every Raft message `node_id` sends from now on, recorded as the harness delivers them."""
    sent: list[Any] = []
    deliver = cluster._deliver

    def recording(sender: str) -> bool:
        if sender == node_id:
            sent.extend(m for action in cluster.outboxes[sender] if isinstance(action, SendRaft)
                        for m in action.messages)
        return deliver(sender)

    cluster._deliver = recording  # type: ignore[method-assign]
    return sent


def test_a_leader_whose_save_is_held_keeps_its_term_and_answers_once_the_save_ends() -> None:
    cluster, leader_id = started()
    leader = cluster.replicas[leader_id]
    term = leader.term
    saver = HeldSaver(leader)
    saver.holding = True
    leader.client_request(get_next_id(7), 1, 7)
    cluster.run(ELECTION_TIMEOUTS_MS)
    assert saver.held, "the leader's save of the write is held"
    assert cluster.leader() == leader_id and all(r.term == term for r in cluster.replicas.values())
    assert 7 not in cluster.answered  # applied only once the leader's own save ends
    followers = [r for node_id, r in cluster.replicas.items() if node_id != leader_id]
    index = leader.raw.last_index()
    assert all(r.storage.last_index() >= index for r in followers)  # the appends went on
    saver.finish()
    cluster.settle()
    assert cluster.answered[7].code == ResponseCode.SUCCESS


def test_a_follower_acknowledges_an_append_only_once_its_save_ends() -> None:
    cluster, leader_id = started()
    follower_id = next(node_id for node_id in cluster.replicas if node_id != leader_id)
    follower = cluster.replicas[follower_id]
    saver = HeldSaver(follower)
    saver.holding = True
    sent = sent_by(cluster, follower_id)
    cluster.replicas[leader_id].client_request(get_next_id(8), 1, 8)
    cluster.run(ELECTION_TIMEOUTS_MS)
    assert saver.held
    index = saver.held[0][1][-1].index
    kinds = {message.type for message in sent}
    assert MessageType.HEARTBEAT_RESP in kinds  # the follower keeps answering the leader
    assert not [m for m in sent if m.type is MessageType.APP_RESP and not m.reject and m.index >= index]
    assert cluster.answered[8].code == ResponseCode.SUCCESS  # the leader and the other follower committed it
    saver.finish()
    cluster.settle()
    assert [m for m in sent if m.type is MessageType.APP_RESP and not m.reject and m.index >= index]


def test_a_background_save_that_finds_the_disk_full_raises_the_alarm_and_is_offered_again() -> None:
    cluster, leader_id = started()
    follower_id = next(node_id for node_id in cluster.replicas if node_id != leader_id)
    follower = cluster.replicas[follower_id]
    saver = HeldSaver(follower)
    saver.holding = True
    cluster.replicas[leader_id].client_request(get_next_id(9), 1, 9)
    cluster.run(100)
    [(_, entries, _)] = saver.held
    follower.storage.ensure_space = lambda needed_bytes=0: None  # type: ignore[attr-defined]  # room at the retry
    saver.fail(StorageFullError("MDB_MAP_FULL: Environment mapsize limit reached"))
    assert follower.disk.alarm is not None
    cluster.run(2_000)  # the disk answers the next retry: the same entries are saved then
    assert follower.disk.alarm is None
    assert follower.storage.last_index() >= entries[-1].index
