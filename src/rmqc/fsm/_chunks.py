"""The chunked snapshot layout (format 2): the version-1 document, cut into pieces that each parse
in one short call, with an index of the pieces in front.

Why: a follower installing a 36 MB snapshot spent about 2 s in ONE `orjson.loads`, which holds the
GIL throughout: the node's event loop ran nothing meanwhile, even with the decode in a worker thread
(the loop takes the GIL back between two bytecodes of that thread, never inside one C call). Here
every piece holds at most SNAPSHOT_STEP_ITEMS groups, registrations, queue data or KV entries, so a
decode is as many short calls, with the loop free in between (ControllerState.decode_steps).

Why this layout: it is still the version-1 document, byte for byte what `orjson.dumps` of the same
content gives, plus one key, "chunks", placed second. A release that knows only version 1 ignores
that key and reads the snapshot as before, so a rolling restart onto this release, or back, never
meets a snapshot a node cannot install, and whatever reads a snapshot as JSON (jq, tests) still
does. The document keeps `"version":1` for that reason; the index's first number (2) is the
layout's version.

    {"version":1,"chunks":[2,kind,length,crc32,kind,length,crc32,...],"groups":[G,G],"config":C,
     "namesrv":{"registrations":[R,R],"topics":{T,T},"kv":{N:{E,E},N:{E}}}}

Each G, R, T, E is a piece: the elements of its array or object, without the brackets (what
`orjson.dumps(part)[1:-1]` gives, so joining them with commas is one call's output); C is the config
object, N a namespace's name (a JSON string). The bytes between two pieces (the "glue": a comma,
`],"config":`, ...) follow from the two pieces' kinds alone (`glue`), so the index holds no offsets:
a reader walks the pieces in order, checks every glue byte and every piece's CRC-32, and parses each
piece on its own. Every byte of the document is thus checked: what the chunked reader builds is what
the version-1 reader builds from the same bytes. Sections are absent as in version 1 (config when no
1009 was applied, namesrv when the NameServer role holds nothing).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import TypeVar

import orjson

from ._errors import CommandDecodeError

CHUNKED_LAYOUT = 2
# The document's own version stays 1 (every release's reader checks it, and reads this document).
DOCUMENT_VERSION = 1
CHUNKED_HEAD = b'{"version":%d,"chunks":[' % DOCUMENT_VERSION

# How many records one piece holds (a group, a registration, a topic's queue data of one broker
# name, a KV entry; a topic is never cut, so one on more broker names is a piece alone): what one
# step of the encoder encodes and one step of the decoder parses, in one orjson call each (the
# decoder then builds the records DECODE_STEP_ITEMS a step). tests/fsm count them.
SNAPSHOT_STEP_ITEMS = 4_096
# A KV value may be 64 KB: a piece of KV entries also ends at about this many bytes of text.
SNAPSHOT_STEP_KV_BYTES = 1 << 20

# The pieces' kinds, numbered in the order their sections appear.
GROUPS, CONFIG, REGISTRATIONS, TOPICS, KV_NAMESPACE, KV_ENTRIES = 1, 2, 3, 4, 5, 6
_START, _END = 0, 7
KIND_NAMES = {GROUPS: "groups", CONFIG: "config", REGISTRATIONS: "registrations", TOPICS: "topics",
              KV_NAMESPACE: "KV namespace", KV_ENTRIES: "KV entries"}
_NAMESRV_KINDS = frozenset((REGISTRATIONS, TOPICS, KV_NAMESPACE, KV_ENTRIES))

# The sections in document order (the KV namespaces and their entries are one), what opens each
# before its first piece, and what stands for it when it has none. The NameServer's three sections
# are written together or not at all, as version 1 does; config only when it has its piece.
_SECTION_OF = {_START: -1, GROUPS: 0, CONFIG: 1, REGISTRATIONS: 2, TOPICS: 3, KV_NAMESPACE: 4,
               KV_ENTRIES: 4, _END: 5}
_OPEN = {GROUPS: b',"groups":[', CONFIG: b',"config":', REGISTRATIONS: b',"namesrv":{"registrations":[',
         TOPICS: b',"topics":{', KV_NAMESPACE: b',"kv":{', _END: b"}"}
_EMPTY = {0: b',"groups":[]', 2: b',"namesrv":{"registrations":[]', 3: b',"topics":{}', 4: b',"kv":{}}'}
# what ends a section after its last piece (the KV section also closes the namesrv object)
_CLOSE = {_START: b"", GROUPS: b"]", CONFIG: b"", REGISTRATIONS: b"]", TOPICS: b"}", KV_NAMESPACE: b":{}}}",
          KV_ENTRIES: b"}}}"}
# within one section
_WITHIN = {(GROUPS, GROUPS): b",", (REGISTRATIONS, REGISTRATIONS): b",", (TOPICS, TOPICS): b",",
           (KV_ENTRIES, KV_ENTRIES): b",", (KV_NAMESPACE, KV_ENTRIES): b":{", (KV_ENTRIES, KV_NAMESPACE): b"},",
           (KV_NAMESPACE, KV_NAMESPACE): b":{},"}


def follows(prev: int, kind: int) -> bool:
    """Whether a piece of `kind` may come after one of `prev` (_START first, _END last)."""
    if (prev, kind) in _WITHIN:
        return True
    return _SECTION_OF[prev] < _SECTION_OF[kind] and kind != KV_ENTRIES


def glue(prev: int, kind: int) -> bytes:
    """The bytes between a piece of `prev` and the next, of `kind` (follows(prev, kind) holds)."""
    within = _WITHIN.get((prev, kind))
    if within is not None:
        return within
    namesrv = prev in _NAMESRV_KINDS or kind in _NAMESRV_KINDS
    parts = [_CLOSE[prev]]
    for section in range(_SECTION_OF[prev] + 1, _SECTION_OF[kind]):
        if section == 0 or (section >= 2 and namesrv):  # config is absent when it has no piece
            parts.append(_EMPTY[section])
    parts.append(_OPEN[kind])
    return b"".join(parts)


class ChunkWriter:
    """Collects the pieces in order; `document()` is the snapshot."""

    __slots__ = ("_index", "_parts", "_prev")

    def __init__(self) -> None:
        self._index: list[int] = [CHUNKED_LAYOUT]
        self._parts: list[bytes] = []
        self._prev = _START

    def add(self, kind: int, piece: bytes) -> None:
        assert follows(self._prev, kind) and piece, (self._prev, kind)
        self._parts += (glue(self._prev, kind), piece)
        self._index += (kind, len(piece), zlib.crc32(piece))
        self._prev = kind

    def document(self) -> bytes:
        """One copy of what may be tens of MB (the caller pauses the collector)."""
        index = orjson.dumps(self._index)
        return b"".join([CHUNKED_HEAD, index[1:], *self._parts, glue(self._prev, _END)])


def read_index(data: bytes) -> tuple[list[tuple[int, int, int]], int] | None:
    """The pieces (kind, length, crc) of a chunked snapshot and where the first one's glue starts;
    None for a snapshot without an index (version 1 as written before format 2)."""
    if not data.startswith(CHUNKED_HEAD):
        return None
    start = len(CHUNKED_HEAD) - 1
    end = data.find(b"]", start) + 1  # the index holds numbers only
    try:
        index = orjson.loads(data[start:end]) if end else None
    except orjson.JSONDecodeError as exc:
        raise CommandDecodeError(f"snapshot's chunk index is not JSON: {exc}") from None
    if not (isinstance(index, list) and index and index[0] == CHUNKED_LAYOUT and len(index) % 3 == 1
            and all(type(n) is int and n >= 0 for n in index)):
        raise CommandDecodeError(f"snapshot's chunk index is malformed (expected layout {CHUNKED_LAYOUT} and "
                                 "(kind, length, crc) triples)")
    pieces = [(index[i], index[i + 1], index[i + 2]) for i in range(1, len(index), 3)]
    prev = _START
    for number, (kind, _length, _crc) in enumerate(pieces):
        if kind not in KIND_NAMES or not follows(prev, kind):
            raise CommandDecodeError(f"snapshot chunk {number}: kind {kind} cannot follow kind {prev}")
        prev = kind
    return pieces, end


def walk(data: bytes, pieces: Iterable[tuple[int, int, int]], offset: int) -> Iterable[tuple[int, int, memoryview]]:
    """(number, kind, bytes) of every piece, each checked (its glue, its length, its CRC) just
    before it is handed out; the document's end is checked after the last."""
    view = memoryview(data)
    prev = _START
    for number, (kind, length, crc) in enumerate(pieces):
        expected = glue(prev, kind)
        end = offset + len(expected)
        where = f"snapshot chunk {number} ({KIND_NAMES[kind]}, bytes {end}-{end + length})"
        if view[offset:end] != expected:
            raise CommandDecodeError(f"{where}: the bytes before it are not {expected.decode()!r}")
        piece = view[end:end + length]
        if length == 0 or len(piece) != length:
            raise CommandDecodeError(f"{where}: {len(piece)} bytes, the index says {length}")
        if zlib.crc32(piece) != crc:
            raise CommandDecodeError(f"{where}: CRC-32 mismatch")
        yield number, kind, piece
        offset, prev = end + length, kind
    if view[offset:] != glue(prev, _END):
        raise CommandDecodeError(f"snapshot does not end as its chunk index says (from byte {offset})")


T = TypeVar("T")


def batches(items: Iterable[T], limit: int, weight: Callable[[T], int]) -> Iterator[list[T]]:
    """`items` in order, in lists of at most `limit` by weight (an item heavier than that alone)."""
    batch: list[T] = []
    total = 0
    for item in items:
        heft = weight(item)
        if batch and total + heft > limit:
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += heft
    if batch:
        yield batch


def topic_weight(item: tuple[str, Sized]) -> int:
    """A topic's records: its queue data, one per broker name (at least one)."""
    return len(item[1]) or 1


def where(number: int, kind: int) -> str:
    return f"snapshot chunk {number} ({KIND_NAMES[kind]})"
