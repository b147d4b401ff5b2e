"""The peer protocol's bytes, as pure functions (no I/O): handshake, frames, Raft messages.

A peer connection shares the broker port. It opens with a handshake that a remoting frame can never
start with: `RMQP` read as a frame length is 0x524D5150 (> 1 GiB), above every frame bound we allow.

    handshake = "RMQP" | version u16 | len u8 | sender id | len u8 | group | len u8 | receiver id
                | nonce (32 bytes)
    frame     = length u32 (of kind + payload) | kind u8 | payload

The handshake opens the peer authentication exchange (peerwire/_auth.py): the receiver answers with
its own nonce and proof, the sender with its proof, and only then do frames count.

Kinds: RAFT carries a batch of Raft messages; FORWARD_REQUEST / FORWARD_RESPONSE carry a remoting
frame tagged with a u64 id chosen by the forwarding follower; DIGEST carries a liveness digest.
Integers are big-endian. Strings are UTF-8 with a length prefix; byte strings with a u32 length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from rmqc._hot import hot_record
from rmqc.errors import BoundExceeded, ProtocolError
from rmqc.raft import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)

PEER_MAGIC = b"RMQP"
# 3: a snapshot carries the membership's address book (a learner that joined empty and caught up
#    through a snapshot knew no peer address and refused every link: seen on real processes).
# 2: the handshake names the receiver and carries a nonce (peer authentication); 1 had neither.
PEER_PROTOCOL_VERSION = 3
NONCE_BYTES = 32
_U8 = struct.Struct(">B")
_NO_SNAPSHOT = b"\0"
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_FRAME_HEAD = struct.Struct(">IB")
# type, term, log_term, index, commit, reject, reject_hint
_MESSAGE_HEAD = struct.Struct(">BQQQQBQ")
_ENTRY_HEAD = struct.Struct(">QQBI")


class PeerProtocolError(ProtocolError):
    """Bytes from a peer that do not follow the peer protocol."""


class PeerFrameTooLarge(BoundExceeded):
    """A peer frame longer than max_peer_frame_bytes (bounded so a broken peer cannot exhaust memory)."""


class FrameKind(IntEnum):
    RAFT = 1
    FORWARD_REQUEST = 2
    FORWARD_RESPONSE = 3
    DIGEST = 4


@dataclass(frozen=True, slots=True)
class Handshake:
    sender_id: str
    group: str
    receiver_id: str
    nonce: bytes
    version: int = PEER_PROTOCOL_VERSION


# magic + version + three length-prefixed ids of at most 255 bytes + nonce: the longest handshake.
MAX_HANDSHAKE_BYTES = 4 + 2 + 3 * 256 + NONCE_BYTES


@hot_record
class PeerFrame:
    kind: FrameKind
    payload: bytes


def encode_handshake(handshake: Handshake) -> bytes:
    if len(handshake.nonce) != NONCE_BYTES:
        raise PeerProtocolError(f"handshake: nonce of {len(handshake.nonce)} bytes, want {NONCE_BYTES}")
    return (
        PEER_MAGIC
        + _U16.pack(handshake.version)
        + _short_text(handshake.sender_id, "sender id")
        + _short_text(handshake.group, "group")
        + _short_text(handshake.receiver_id, "receiver id")
        + handshake.nonce
    )


def decode_handshake(buffer: bytes | bytearray) -> tuple[Handshake, int] | None:
    """The handshake at the start of `buffer` and its length, or None when more bytes are needed."""
    view = memoryview(buffer)
    if len(view) >= len(PEER_MAGIC) and bytes(view[:4]) != PEER_MAGIC:
        raise PeerProtocolError(f"handshake: magic {bytes(view[:4])!r} is not {PEER_MAGIC!r}")
    reader = _Reader(view, incomplete_ok=True)
    reader.skip(len(PEER_MAGIC))
    version = reader.u16()
    if not reader.incomplete and version != PEER_PROTOCOL_VERSION:
        raise PeerProtocolError(f"handshake: version {version} not supported (want {PEER_PROTOCOL_VERSION})")
    sender_id = reader.short_text()
    group = reader.short_text()
    receiver_id = reader.short_text()
    nonce = reader.take(NONCE_BYTES)
    if reader.incomplete:
        return None
    return Handshake(sender_id, group, receiver_id, nonce, version), reader.offset


def encode_frame(kind: FrameKind, payload: bytes) -> bytes:
    return _FRAME_HEAD.pack(len(payload) + 1, kind) + payload


class PeerFrameDecoder:
    """Bytes in, whole frames out; a frame above the bound or of an unknown kind raises."""

    def __init__(self, max_frame_bytes: int) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray) -> list[PeerFrame]:
        self._buffer += data
        frames: list[PeerFrame] = []
        while len(self._buffer) >= _FRAME_HEAD.size:
            length, kind_value = _FRAME_HEAD.unpack_from(self._buffer)
            if length > self._max_frame_bytes:
                raise PeerFrameTooLarge(f"peer frame of {length} bytes exceeds {self._max_frame_bytes}")
            if length < 1:
                raise PeerProtocolError("peer frame length 0 has no kind byte")
            if len(self._buffer) < 4 + length:
                break
            frames.append(PeerFrame(_frame_kind(kind_value), bytes(self._buffer[5:4 + length])))
            del self._buffer[:4 + length]
        return frames


# a dict lookup: FrameKind(value) runs three Python frames of enum's, on every frame a peer sends
_FRAME_KINDS = {kind.value: kind for kind in FrameKind}


def _frame_kind(value: int) -> FrameKind:
    kind = _FRAME_KINDS.get(value)
    if kind is None:
        raise PeerProtocolError(f"peer frame kind {value} unknown")
    return kind


def encode_tagged(tag: int, data: bytes) -> bytes:
    """Payload of FORWARD_REQUEST / FORWARD_RESPONSE: the forwarding id, then the remoting frame."""
    return _U64.pack(tag) + data


def decode_tagged(payload: bytes) -> tuple[int, bytes]:
    if len(payload) < _U64.size:
        raise PeerProtocolError(f"forward payload of {len(payload)} bytes has no id")
    return _U64.unpack_from(payload)[0], payload[_U64.size:]


def encode_messages(messages: list[Message]) -> bytes:
    parts = [_U32.pack(len(messages))]
    for message in messages:
        _write_message(parts, message)
    return b"".join(parts)


def decode_messages(payload: bytes, stale_below: int = 0) -> list[Message]:
    """The batch of Raft messages in `payload`. An append of a term below `stale_below` (the term
    the node is known to be at) is decoded without its entries: Raft only answers it with the newer
    term, so a stale leader's backlog costs a walk over entry headers, not an Entry per entry.

    Every batch a node receives goes through here (a follower's appends, a leader's acks), so the
    common batch is read by `_decode_plain_batch`, a few unpacks and slices per message. Anything it
    does not read (a snapshot, bad input) is decoded again by the reader below, which names the
    problem: the two agree on every input they both take (tests/peerwire)."""
    try:
        return _decode_plain_batch(bytes(payload), stale_below)
    except _NOT_PLAIN:
        return _decode_batch(payload, stale_below)


# What makes _decode_plain_batch give up: short input (struct.error, IndexError), an unknown type
# (KeyError), bad UTF-8 (UnicodeDecodeError, a ValueError), a snapshot or trailing bytes (ValueError).
_NOT_PLAIN = (struct.error, IndexError, KeyError, ValueError)
_MESSAGE_TYPES = {member.value: member for member in MessageType}
_ENTRY_TYPES = {member.value: member for member in EntryType}
_APPEND = MessageType.APP  # read without the enum's lookup hook (rmqc._hot)


def _decode_plain_batch(data: bytes, stale_below: int) -> list[Message]:
    """decode_messages for a batch without snapshots, read with unpack_from and slices; raises one
    of _NOT_PLAIN on anything else."""
    unpack_head, unpack_entry, unpack_u32 = _MESSAGE_HEAD.unpack_from, _ENTRY_HEAD.unpack_from, _U32.unpack_from
    head_size, entry_head_size = _MESSAGE_HEAD.size, _ENTRY_HEAD.size
    (count,) = unpack_u32(data, 0)
    pos, messages = 4, []
    for _ in range(count):
        type_value, term, log_term, index, commit, reject, reject_hint = unpack_head(data, pos)
        message_type = _MESSAGE_TYPES[type_value]
        pos += head_size
        to_end = pos + 1 + data[pos]
        to = data[pos + 1:to_end].decode()
        frm_end = to_end + 1 + data[to_end]
        frm = data[to_end + 1:frm_end].decode()
        (context_length,) = unpack_u32(data, frm_end)
        pos = frm_end + 4 + context_length
        context = data[frm_end + 4:pos]
        (entry_count,) = unpack_u32(data, pos)
        pos += 4
        keep_entries = message_type is not _APPEND or term >= stale_below
        entries = []
        for _ in range(entry_count):
            entry_index, entry_term, entry_type, length = unpack_entry(data, pos)
            pos += entry_head_size + length
            if keep_entries:
                entries.append(Entry(entry_index, entry_term, _ENTRY_TYPES[entry_type],
                                     data[pos - length:pos]))
        # A slice past the end is silently short, but the read after it is not: a truncated field
        # always ends in an IndexError or struct.error at the next one, here at the latest.
        if data[pos]:  # a snapshot follows: the reader's path
            raise ValueError("not a plain message")
        pos += 1
        messages.append(Message(
            type=message_type, to=to, frm=frm, term=term, log_term=log_term, index=index,
            entries=tuple(entries), commit=commit, reject=bool(reject), reject_hint=reject_hint,
            snapshot=None, context=context,
        ))
    if pos != len(data):
        raise ValueError("trailing bytes")
    return messages


def _decode_batch(payload: bytes, stale_below: int) -> list[Message]:
    reader = _Reader(memoryview(payload))
    messages = [_read_message(reader, stale_below) for _ in range(reader.u32())]
    if reader.offset != len(payload):
        raise PeerProtocolError(f"raft batch: {len(payload) - reader.offset} trailing bytes")
    return messages


# A message's sender and receiver, encoded (node ids: as many as the members that ever were, so a
# bound only guards against a peer that invents ids).
_NODE_IDS: dict[str, bytes] = {}
MAX_CACHED_NODE_IDS = 1024


def _node_id(text: str, what: str) -> bytes:
    encoded = _NODE_IDS.get(text)
    if encoded is None:
        encoded = _short_text(text, what)
        if len(_NODE_IDS) < MAX_CACHED_NODE_IDS:
            _NODE_IDS[text] = encoded
    return encoded


def _write_message(parts: list[bytes], message: Message) -> None:
    entries, context = message.entries, message.context
    parts += (
        _MESSAGE_HEAD.pack(message.type, message.term, message.log_term, message.index, message.commit,
                           int(message.reject), message.reject_hint),
        _node_id(message.to, "to"),
        _node_id(message.frm, "frm"),
        _U32.pack(len(context)),
        context,
        _U32.pack(len(entries)),
    )
    for entry in entries:
        parts += (_ENTRY_HEAD.pack(entry.index, entry.term, entry.type, len(entry.data)), entry.data)
    if message.snapshot is None:
        parts.append(_NO_SNAPSHOT)
    else:
        parts.append(_U8.pack(1))
        _write_snapshot(parts, message.snapshot)


def _read_message(reader: _Reader, stale_below: int) -> Message:
    type_value, term, log_term, index, commit, reject, reject_hint = reader.struct(_MESSAGE_HEAD)
    message_type = _enum(MessageType, type_value, "message type")
    to = reader.short_text()
    frm = reader.short_text()
    context = reader.blob()
    count = reader.u32()
    if message_type is MessageType.APP and term < stale_below:
        _skip_entries(reader, count)
        entries: tuple[Entry, ...] = ()
    else:
        entries = tuple(_read_entry(reader) for _ in range(count))
    snapshot = _read_snapshot(reader) if reader.u8() else None
    return Message(
        type=message_type, to=to, frm=frm, term=term, log_term=log_term, index=index,
        entries=entries, commit=commit, reject=bool(reject), reject_hint=reject_hint,
        snapshot=snapshot, context=context,
    )


def _read_entry(reader: _Reader) -> Entry:
    index, term, type_value, length = reader.struct(_ENTRY_HEAD)
    return Entry(index, term, _enum(EntryType, type_value, "entry type"), reader.take(length))


def _skip_entries(reader: _Reader, count: int) -> None:
    for _ in range(count):
        reader.skip(_ENTRY_HEAD.unpack_from(reader.peek(_ENTRY_HEAD.size))[3] + _ENTRY_HEAD.size)


def _write_snapshot(parts: list[bytes], snapshot: Snapshot) -> None:
    meta = snapshot.meta
    parts.append(_U64.pack(meta.index) + _U64.pack(meta.term))
    for ids in (meta.conf_state.voters, meta.conf_state.learners):
        parts.append(_U16.pack(len(ids)))
        parts.extend(_short_text(node_id, "conf state id") for node_id in ids)
    # the address book: a node that joined empty knows its peers only from here (protocol 3)
    parts.append(_U16.pack(len(meta.conf_state.addresses)))
    for node_id, address in meta.conf_state.addresses:
        parts.append(_short_text(node_id, "conf state id") + _short_text(address, "member address"))
    parts.append(_blob(snapshot.data))


def _read_snapshot(reader: _Reader) -> Snapshot:
    index = reader.u64()
    term = reader.u64()
    voters = tuple(reader.short_text() for _ in range(reader.u16()))
    learners = tuple(reader.short_text() for _ in range(reader.u16()))
    addresses = tuple((reader.short_text(), reader.short_text()) for _ in range(reader.u16()))
    meta = SnapshotMeta(index=index, term=term,
                        conf_state=ConfState(voters=voters, learners=learners, addresses=addresses))
    return Snapshot(meta=meta, data=reader.blob())


def _enum(enum_type: type[IntEnum], value: int, what: str):  # type: ignore[no-untyped-def]
    try:
        return enum_type(value)
    except ValueError:
        raise PeerProtocolError(f"{what} {value} unknown") from None


def _short_text(text: str, what: str) -> bytes:
    data = text.encode()
    if len(data) > 255:
        raise PeerProtocolError(f"{what} {text[:40]!r}... longer than 255 bytes")
    return _U8.pack(len(data)) + data


def _blob(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


class _Reader:
    """Cursor over a buffer. Short input raises, or with incomplete_ok sets `incomplete` instead."""

    def __init__(self, view: memoryview, incomplete_ok: bool = False) -> None:
        self._view = view
        self.offset = 0
        self._incomplete_ok = incomplete_ok
        self.incomplete = False

    def take(self, length: int) -> bytes:
        end = self.offset + length
        if self.incomplete or end > len(self._view):
            if not self._incomplete_ok:
                raise PeerProtocolError(f"truncated: need {length} bytes at offset {self.offset}")
            self.incomplete = True
            return b"\0" * length
        data = bytes(self._view[self.offset:end])
        self.offset = end
        return data

    def skip(self, length: int) -> None:
        end = self.offset + length
        if end > len(self._view):
            self.take(length)  # raises, or marks the input incomplete
            return
        self.offset = end

    def peek(self, length: int) -> memoryview:
        """The next `length` bytes without consuming them (raises if there are fewer)."""
        if self.offset + length > len(self._view):
            raise PeerProtocolError(f"truncated: need {length} bytes at offset {self.offset}")
        return self._view[self.offset:self.offset + length]

    def struct(self, layout: struct.Struct) -> tuple[int, ...]:
        return layout.unpack(self.take(layout.size))

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        value: int = _U16.unpack(self.take(2))[0]
        return value

    def u32(self) -> int:
        value: int = _U32.unpack(self.take(4))[0]
        return value

    def u64(self) -> int:
        value: int = _U64.unpack(self.take(8))[0]
        return value

    def short_text(self) -> str:
        data = self.take(self.u8())
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise PeerProtocolError(f"invalid UTF-8 before offset {self.offset}") from None

    def blob(self) -> bytes:
        return self.take(self.u32())
