"""Committed entries into state, written once: the replica's apply path, `rmqc log compact`,
`rmqc log dump` and `rmqc log export` all step through `apply_entry`.

A NORMAL entry's commands go into the ControllerState (a leader's empty no-op changes nothing); a
CONF_CHANGE entry moves the membership by Raft's one rule (`rmqc.raft.conf_state_after`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rmqc.raft import ConfChange, ConfState, Entry, EntryType, conf_state_after, decode_conf_change

from ._commands import decode_commands
from ._state import ApplyResult, ControllerState


@dataclass(frozen=True, slots=True)
class Applied:
    """What one committed entry did."""

    results: list[ApplyResult]  # one per command, in order; empty for a no-op or a conf change
    conf_state: ConfState  # the membership after the entry
    conf_change: ConfChange | None = None  # the decoded change, for RawNode.apply_conf_change


def apply_entry(state: ControllerState, conf_state: ConfState, entry: Entry) -> Applied:
    """Apply one committed entry to `state` (in place) and to the membership `conf_state`.

    Raises CommandDecodeError / ProtocolError for a payload that does not decode; nothing of
    such an entry is applied. The replica hands `conf_change` to RawNode.apply_conf_change, which
    applies the same rule to the core's membership."""
    if entry.type == EntryType.CONF_CHANGE:
        change = decode_conf_change(entry.data)
        return Applied([], conf_state_after(conf_state, change) or conf_state, change)
    return Applied(state.apply_all(decode_commands(entry.data)), conf_state)


def replay(entries: Iterable[Entry], state: ControllerState, conf_state: ConfState,
           on_entry: Callable[[Entry], None] | None = None) -> ConfState:
    """Apply every entry in order; the membership after the last. `on_entry` runs after each
    (progress reports)."""
    for entry in entries:
        conf_state = apply_entry(state, conf_state, entry).conf_state
        if on_entry is not None:
            on_entry(entry)
    return conf_state
