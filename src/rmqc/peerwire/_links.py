"""The peer links' decisions, pure: which links a node keeps (LinkTable), when a lost link is dialled
again and when its peer counts as down (Reconnection), and what a connected link writes next
(LinkWrites). node/_peers.py holds the sockets, the tasks and the waiting; it asks these.

Each node dials every other member and writes its own traffic on that link; a member it has no link
to (it is outside the membership: joining, or removed and perhaps added again) is answered on the
connection that member opened to it (a return link)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeVar

from rmqc.raft import Message

from ._outbox import PeerOutbox

if TYPE_CHECKING:  # rmqc.config imports peerwire: the class is named here, never made
    from rmqc.config import Peer

# Reconnect forever to a configured peer (it is a member), but never faster than every 10 ms nor
# slower than every 100 ms (150 with jitter), so a link that comes back (a restarted peer, a healed
# REJECT partition) carries heartbeats again well inside a follower's election timeout (500 ms at
# the least); at a 500 ms cap the wait alone could reach 750 ms. An attempt costs a refused
# connect, or one waiting the shell's connect timeout: there is one at a time.
RECONNECT_MIN_S = 0.010
RECONNECT_MAX_S = 0.100
# A connection that lived this long was healthy: reconnect at once and reset the backoff. One that
# died sooner (e.g. refused at handshake) is retried with backoff so we never spin.
STABLE_CONNECTION_S = 1.0


class PeerLink(Protocol):
    peer: Peer
    outbox: PeerOutbox


LinkT = TypeVar("LinkT", bound=PeerLink)
InboundT = TypeVar("InboundT")


class MembershipChange(NamedTuple, Generic[LinkT, InboundT]):
    opened: list[LinkT]
    closed: list[LinkT]
    cut: list[InboundT]  # the inbound connections of peers no longer accepted


class LinkTable(Generic[LinkT, InboundT]):
    """The links of one node by peer id: one dialled link per member of the applied membership other
    than itself, return links, and the inbound connections of the peers accepted. What a link or a
    connection is (its socket, its task) is the shell's: the table says which exist, which to open
    and which to close."""

    def __init__(self, node_id: str) -> None:
        self._node_id = node_id
        self._dialled: dict[str, LinkT] = {}
        self._returns: dict[str, LinkT] = {}
        self._inbound: dict[str, set[InboundT]] = {}
        # the ids inbound connections are accepted from; None: any id of the group (a node outside
        # the membership does not know it until the leader's appends bring it)
        self.accepted: frozenset[str] | None = None
        self.connected: set[str] = set()  # the peers whose dialled link is up

    @property
    def members(self) -> dict[str, str]:
        """The members this node keeps links to (id -> host:port), itself excluded."""
        return {peer_id: link.peer.address for peer_id, link in self._dialled.items()}

    @property
    def dialled(self) -> list[LinkT]:
        return list(self._dialled.values())

    def set_members(self, addresses: Mapping[str, str], member: bool,
                    new_link: Callable[[str, str, int], LinkT]) -> MembershipChange[LinkT, InboundT]:
        """Keep links to exactly the members of `addresses` other than this node: the links opened
        (made by `new_link(id, host, port)`), the links closed, removed members' and those of a
        member whose address changed (dialled again at the new one), and the inbound connections
        cut, of the peers no longer accepted. A node that is not a `member` dials no one and
        accepts any id of its group: it learns the membership from the leader that dials it."""
        wanted = {peer_id: _host_port(address) for peer_id, address in addresses.items()
                  if peer_id != self._node_id and member}
        closed = [self._dialled.pop(peer_id) for peer_id, link in list(self._dialled.items())
                  if wanted.get(peer_id) != (link.peer.host, link.peer.port)]
        self.connected.difference_update(link.peer.id for link in closed)
        opened = [new_link(peer_id, *host_port) for peer_id, host_port in wanted.items()
                  if peer_id not in self._dialled]
        self._dialled.update((link.peer.id, link) for link in opened)
        self.accepted = frozenset(wanted) if member else None
        cut = [connection for peer_id in [peer_id for peer_id in self._inbound if not self.accepts(peer_id)]
               for connection in self._inbound.pop(peer_id)]
        return MembershipChange(opened, closed, cut)

    def accepts(self, peer_id: str) -> bool:
        return self.accepted is None or peer_id in self.accepted

    def dialled_to(self, peer_id: str) -> LinkT | None:
        return self._dialled.get(peer_id)

    def link_to(self, peer_id: str) -> LinkT | None:
        """Where traffic for `peer_id` goes: our link to it, else the connection it opened to us."""
        return self._dialled.get(peer_id) or self._returns.get(peer_id)

    def queue(self, messages: Iterable[Message]) -> tuple[list[LinkT], list[Message]]:
        """Put each message in the outbox of the link to its peer: the links that got any, in the
        order of their first message, and the messages to peers this node has no link to."""
        queued: dict[str, LinkT] = {}
        unknown: list[Message] = []
        for message in messages:
            link = self.link_to(message.to)
            if link is None:
                unknown.append(message)
                continue
            link.outbox.put_message(message)
            queued[message.to] = link
        return list(queued.values()), unknown

    def link_up(self, link: LinkT) -> None:
        self.connected.add(link.peer.id)

    def link_lost(self, link: LinkT) -> None:
        """`link`'s connection is gone: its queued Raft messages would be stale when it is back, and
        its peer is no longer connected unless `link` was closed by set_members meanwhile (the peer
        may be connected again on a newer link)."""
        if self._dialled.get(link.peer.id) is link:
            self.connected.discard(link.peer.id)
        link.outbox.clear_raft()

    def add_return(self, link: LinkT) -> None:
        self._returns[link.peer.id] = link

    def drop_return(self, link: LinkT) -> None:
        """Forget `link` unless a newer connection of its peer already replaced it."""
        if self._returns.get(link.peer.id) is link:
            del self._returns[link.peer.id]

    def add_inbound(self, peer_id: str, connection: InboundT) -> None:
        self._inbound.setdefault(peer_id, set()).add(connection)

    def drop_inbound(self, peer_id: str, connection: InboundT) -> None:
        self._inbound.get(peer_id, set()).discard(connection)


def _host_port(address: str) -> tuple[str, int]:
    host, _colon, port = address.rpartition(":")
    return host, int(port)


def return_address(remote: str) -> tuple[str, int]:
    """Where a return link's peer is: the address its connection came from (`remote`, host:port)."""
    host, _colon, port = remote.rpartition(":")
    return host, int(port) if port.isdigit() else 0


class Reconnection:
    """When one dialled link connects again: at once after a connection that lived `stable_s`, else
    after a wait that doubles from `min_s` up to `max_s`, jittered by `random` (x0.5 to x1.5) so links
    do not dial in step. A wait cut short because the peer dialled us starts over from `min_s`."""

    def __init__(self, *, min_s: float, max_s: float, stable_s: float, random: Callable[[], float]) -> None:
        self._min_s, self._max_s, self._stable_s = min_s, max_s, stable_s
        self._random = random
        self._delay_s = min_s
        self._was_up = False

    def connection_lost(self, lived_s: float) -> bool:
        """After a connection that lived `lived_s`: whether to dial again at once (it was healthy, and
        a refusal now tells that the peer's process is gone)."""
        self._was_up = True
        if lived_s < self._stable_s:
            return False
        self._delay_s = self._min_s
        return True

    def connect_failed(self, refused: bool) -> bool:
        """After a failed attempt: whether the peer is now down, its port refusing us since a
        connection we had was lost (told once per lost connection)."""
        down = refused and self._was_up
        if down:
            self._was_up = False
        return down

    def wait_s(self) -> float:
        return self._delay_s * (0.5 + self._random())

    def waited(self, *, cut_short: bool) -> None:
        self._delay_s = self._min_s if cut_short else min(self._max_s, self._delay_s * 2)


def is_refusal(error: BaseException) -> bool:
    """Whether a failed connect was refused by the peer's host (no listener: the process is gone).
    trio's open_tcp_stream wraps per-address failures; a refusal on every address means no listener."""
    if isinstance(error, ConnectionRefusedError):
        return True
    causes = getattr(error.__cause__, "exceptions", None)
    if not causes:
        return False
    return all(isinstance(cause, ConnectionRefusedError) for cause in causes)


def _unchanged(data: bytes) -> bytes:
    return data


TransportT = TypeVar("TransportT")


@dataclass(slots=True)
class LinkWrites(Generic[TransportT]):
    """What a connected link's two writers share: the driver writes straight to the socket `fd` as
    messages are queued (appends must be on their way while it saves to disk), the link's task
    sends the rest through `transport`. Bytes for the socket are `encode(batch)` (encrypted under
    TLS, as they are made, so in order). `rest` is what the socket did not take from a direct
    write: it goes out first, from the task, before anything else of this peer."""

    fd: int  # -1: a stream without a socket of its own; everything goes through the task
    transport: TransportT
    encode: Callable[[bytes], bytes] = _unchanged
    sending: bool = False  # the link's task is inside a send: nothing may be written around it
    rest: bytes = b""
    rest_snapshots: list[str] = field(default_factory=list)

    def may_write_directly(self) -> bool:
        return self.fd >= 0 and not self.sending and not self.rest

    def wrote_directly(self, data: bytes, written: int, snapshots: list[str]) -> bool:
        """After a direct write took `written` bytes of `data`: whether all went; else the rest,
        with the snapshots it carries, waits for the task."""
        if written == len(data):
            return True
        self.rest, self.rest_snapshots = data[written:], snapshots
        return False

    def idle(self, outbox: PeerOutbox) -> bool:
        return not self.rest and not len(outbox)

    def take_next(self, outbox: PeerOutbox) -> tuple[bytes, list[str]]:
        """What the task sends next, with the snapshot messages in it: the rest of a direct write
        first, else the outbox's next batch."""
        if self.rest:
            data, snapshots = self.rest, self.rest_snapshots
            self.rest, self.rest_snapshots = b"", []
            return data, snapshots
        data, snapshots = outbox.take_batch()
        return (self.encode(data) if data else data), snapshots
