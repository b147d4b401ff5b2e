from __future__ import annotations

from collections.abc import Collection

import pytest

from rmqc.reads import ReadIndexTracker, ReadQueueFull, decode_round_id, encode_round_id

VOTERS = {"a", "b", "c"}


def quorum(acks: Collection[str]) -> bool:
    return sum(1 for v in VOTERS if v in acks) >= 2


def test_one_round_carries_every_read_queued_meanwhile() -> None:
    t = ReadIndexTracker()
    t.add(b"r1", "a", 5, True)
    t.add(b"r2", "b", 6, True)
    round_id = t.begin_round(sent_tick=10)
    assert not t.has_queued()
    assert t.ack(round_id, "a", quorum) is None
    confirmed = t.ack(round_id, "b", quorum)
    assert confirmed is not None and confirmed.sent_tick == 10
    assert [(r.context, r.index) for r in confirmed.reads] == [(b"r1", 5), (b"r2", 6)]
    assert t.pending_reads == 0


def test_an_old_round_ack_never_releases_a_newer_read() -> None:
    t = ReadIndexTracker()
    t.add(b"old", "a", 5, True)
    r1 = t.begin_round(1)
    t.add(b"new", "a", 6, True)
    r2 = t.begin_round(2)
    t.ack(r1, "a", quorum)
    confirmed = t.ack(r1, "b", quorum)
    assert confirmed is not None and [r.context for r in confirmed.reads] == [b"old"]
    t.ack(r2, "a", quorum)
    assert t.pending_reads == 1


def test_a_newer_round_confirms_older_ones() -> None:
    t = ReadIndexTracker()
    t.add(b"x", "a", 1, True)
    r1 = t.begin_round(1)
    t.add(b"y", "a", 2, True)
    r2 = t.begin_round(2)
    t.ack(r2, "a", quorum)
    confirmed = t.ack(r2, "c", quorum)
    assert confirmed is not None and [r.context for r in confirmed.reads] == [b"x", b"y"]
    assert t.ack(r1, "b", quorum) is None


def test_reads_held_until_own_term_commit_get_that_index() -> None:
    t = ReadIndexTracker()
    t.add(b"early", "a", 3, own_term_committed=False)
    assert not t.has_queued()
    t.release_held(commit_index=10)
    round_id = t.begin_round(1)
    t.ack(round_id, "a", quorum)
    confirmed = t.ack(round_id, "b", quorum)
    assert confirmed is not None and confirmed.reads[0].index == 10


def test_outstanding_rounds_are_folded_not_lost() -> None:
    t = ReadIndexTracker(max_outstanding_rounds=2)
    t.add(b"first", "a", 1, True)
    t.begin_round(1)
    t.begin_round(2)
    last = t.begin_round(3)
    t.ack(last, "a", quorum)
    confirmed = t.ack(last, "b", quorum)
    assert confirmed is not None and [r.context for r in confirmed.reads] == [b"first"]


def test_pending_reads_are_bounded() -> None:
    t = ReadIndexTracker(max_pending_reads=2)
    t.add(b"1", "a", 1, True)
    t.add(b"2", "a", 1, False)
    with pytest.raises(ReadQueueFull):
        t.add(b"3", "a", 1, True)
    assert t.reset() == 2 and t.pending_reads == 0


def test_round_id_codec() -> None:
    assert decode_round_id(encode_round_id(12345)) == 12345
    assert decode_round_id(b"") is None and decode_round_id(b"short") is None
