from __future__ import annotations

from hypothesis import given, strategies as st

from rmqc.raft._quorum import VoteResult, committed_index, has_quorum, vote_result


def test_committed_index_is_the_majority_match() -> None:
    voters = {"a", "b", "c"}
    assert committed_index(voters, {"a": 5, "b": 3, "c": 1}) == 3
    assert committed_index(voters, {"a": 5, "b": 3, "c": 1, "learner": 9}) == 3
    assert committed_index({"a", "b", "c", "d"}, {"a": 4, "b": 4, "c": 2, "d": 1}) == 2
    assert committed_index(set(), {}) == 0


@given(st.dictionaries(st.sampled_from("abcde"), st.integers(0, 50), min_size=1))
def test_committed_index_is_stored_on_a_majority(match: dict[str, int]) -> None:
    voters = set(match)
    ci = committed_index(voters, match)
    assert sum(1 for v in voters if match[v] >= ci) >= len(voters) // 2 + 1
    assert sum(1 for v in voters if match[v] >= ci + 1) < len(voters) // 2 + 1


def test_vote_result() -> None:
    voters = {"a", "b", "c"}
    assert vote_result(voters, {"a": True}) is VoteResult.PENDING
    assert vote_result(voters, {"a": True, "b": True}) is VoteResult.WON
    assert vote_result(voters, {"a": True, "b": False, "c": False}) is VoteResult.LOST
    assert vote_result(voters, {"a": True, "x": True}) is VoteResult.PENDING  # strangers never count


def test_has_quorum() -> None:
    assert has_quorum({"a", "b", "c"}, {"a", "c"})
    assert not has_quorum({"a", "b", "c"}, {"a", "learner"})
