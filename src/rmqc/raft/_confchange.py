"""CONF_CHANGE entries: their payload codec (a small JSON object; the context travels as hex) and
the membership rule, `conf_state_after`, which the Raft core and every offline replay apply."""

from __future__ import annotations

import orjson

from rmqc.errors import ProtocolError

from ._types import ConfChange, ConfChangeType, ConfState

# Where a member stands after each kind of change: (is a voter, is a learner).
MEMBERSHIP_AFTER = {
    ConfChangeType.ADD_VOTER: (True, False),
    ConfChangeType.ADD_LEARNER: (False, True),  # also demotes a voter
    ConfChangeType.REMOVE_NODE: (False, False),
}


def encode_conf_change(cc: ConfChange) -> bytes:
    return orjson.dumps({"type": int(cc.type), "node_id": cc.node_id, "context": cc.context.hex()})


def decode_conf_change(data: bytes) -> ConfChange:
    try:
        obj = orjson.loads(data)
        return ConfChange(
            type=ConfChangeType(obj["type"]),
            node_id=str(obj["node_id"]),
            context=bytes.fromhex(obj["context"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"bad conf change payload {data[:64]!r}: {exc}") from exc


def conf_state_after(conf_state: ConfState, cc: ConfChange) -> ConfState | None:
    """The membership once `cc` is applied (sorted), or None when it would leave no voter: such a
    change is refused at proposal, and applying one keeps the membership as it was."""
    is_voter, is_learner = MEMBERSHIP_AFTER[cc.type]
    voters = {v for v in conf_state.voters if v != cc.node_id}
    learners = {n for n in conf_state.learners if n != cc.node_id}
    if is_voter:
        voters.add(cc.node_id)
    if is_learner:
        learners.add(cc.node_id)
    if not voters:
        return None
    return ConfState(voters=tuple(sorted(voters)), learners=tuple(sorted(learners)))
