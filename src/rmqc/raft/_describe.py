"""One-line, human-readable descriptions of Raft values, for logs, traces and test failures."""

from __future__ import annotations

from ._confchange import decode_conf_change
from ._ready import Ready
from ._types import Entry, EntryType, HardState, Message


def describe_entry(entry: Entry) -> str:
    if entry.type is EntryType.CONF_CHANGE:
        cc = decode_conf_change(entry.data)
        return f"{entry.term}/{entry.index} {cc.type.name} {cc.node_id}"
    payload = "no-op" if not entry.data else f"{len(entry.data)}B"
    return f"{entry.term}/{entry.index} {payload}"


def describe_hard_state(hs: HardState) -> str:
    return f"term={hs.term} vote={hs.vote} commit={hs.commit}"


def describe_message(m: Message) -> str:
    parts = [f"{m.frm}->{m.to} {m.type.name} term={m.term}"]
    if m.index or m.log_term:
        parts.append(f"log={m.log_term}/{m.index}")
    if m.commit:
        parts.append(f"commit={m.commit}")
    if m.entries:
        parts.append("entries=[" + ", ".join(describe_entry(e) for e in m.entries) + "]")
    if m.reject:
        parts.append(f"REJECT hint={m.reject_hint}")
    if m.snapshot is not None:
        parts.append(f"snapshot={m.snapshot.meta.term}/{m.snapshot.meta.index}")
    if m.context:
        parts.append(f"ctx={m.context.hex()}")
    return " ".join(parts)


def describe_ready(rd: Ready) -> str:
    lines = []
    if rd.soft_state is not None:
        lines.append(f"soft: leader={rd.soft_state.leader} role={rd.soft_state.role.value}")
    if rd.hard_state is not None:
        lines.append("hard: " + describe_hard_state(rd.hard_state))
    if rd.entries:
        lines.append("entries: " + ", ".join(describe_entry(e) for e in rd.entries))
    if rd.snapshot is not None:
        lines.append(f"snapshot: {rd.snapshot.meta.term}/{rd.snapshot.meta.index}")
    if rd.committed_entries:
        lines.append("committed: " + ", ".join(describe_entry(e) for e in rd.committed_entries))
    lines.extend("send: " + describe_message(m) for m in rd.messages)
    lines.extend("send after persist: " + describe_message(m) for m in rd.persist_messages)
    lines.extend(f"read: {s.index} ctx={s.context.hex()}" for s in rd.read_states)
    return "\n".join(lines) if lines else "(empty)"
