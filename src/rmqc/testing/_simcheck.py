"""Safety invariants the simulator checks after every step.

The checker is fed by the simulated node shells (what they persist, apply and observe) and keeps
global registries of what the whole cluster has done:

- election safety: at most one leader per term;
- log matching: every persisted entry (index, term) has one content and one predecessor term
  everywhere, which by induction makes logs that share an (index, term) identical up to it;
- durability: an entry applied anywhere (so committed) is never overwritten in any durable log;
- leader completeness: a leader's log holds every entry committed before it was elected;
- state-machine safety: every node applies the same entry at each index and reaches the same
  key-value state there (also after installing a snapshot);
- apply after persist: a node applies an entry only once its own durable log holds it;
- membership: every node applies the same membership (voters, learners, addresses) at each index.

Storage faults (the corruption profile): a node whose disk was damaged or lost its tail no longer
holds intact copies of what it lost; a node found damaged is repairing ("fenced") until it ends its
repair, and votes for nobody meanwhile, so it protects every entry as an intact copy would. At each
fault, every committed entry the node lost is looked at, and when a node ends its repair, every
committed entry it does not hold: if fewer than a majority of the voters (or of all the nodes) hold
it intact or are fenced, its loss is allowed (`forgiven`), since no protocol keeps what no majority
holds or protects. A node that ends its repair must hold again every committed entry it lost since
it was found damaged (unless that loss was allowed meanwhile): the commit index a leader gives it
covers them all, when that leader leads. Durability, leader
completeness, state-machine safety and the final durable-majority check then let another entry
take that index; the history forks there (`forked_at`), and from that index on those checks are
off for the rest of the run (the two branches differ everywhere after it). Every other committed
entry, and every index before the fork, stays checked as before: a committed entry that a
majority held intact is never lost.

The first violation is recorded as text; the run stops at it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from rmqc.errors import CompactedError, UnavailableError
from rmqc.raft import Entry, Storage, has_quorum

# What a node's state machine looks like at an index: any value that compares equal on equal states.
KvState = object


@dataclass(slots=True)
class _Applied:
    term: int
    type: int
    data: bytes
    kv: KvState


@dataclass(slots=True)
class SafetyChecker:
    violations: list[str] = field(default_factory=list)
    leader_of_term: dict[int, str] = field(default_factory=dict)
    # (index, term) -> (content, predecessor term or None when unknown)
    entries_seen: dict[tuple[int, int], tuple[tuple[int, bytes], int | None]] = field(default_factory=dict)
    applied: dict[int, _Applied] = field(default_factory=dict)
    committed_max: int = 0
    # node -> (term, committed_max when it was seen leading): checked once its log is persisted
    leaders_to_check: dict[str, tuple[int, int]] = field(default_factory=dict)
    membership_at: dict[int, object] = field(default_factory=dict)  # index -> the membership applied there
    # committed indexes whose intact copies fell below a majority at a storage fault (their loss is allowed)
    forgiven: set[int] = field(default_factory=set)
    forked_at: int | None = None  # the first forgiven index where another entry was then taken
    # repairing node -> committed indexes it lost since it was found damaged: held again when it ends
    lost_while_repairing: dict[str, set[int]] = field(default_factory=dict)

    def fail(self, what: str) -> None:
        self.violations.append(what)

    @property
    def ok(self) -> bool:
        return not self.violations

    def on_membership(self, node: str, index: int, membership: object) -> None:
        """Every node applies the same membership (voters, learners, addresses) at each index."""
        seen = self.membership_at.setdefault(index, membership)
        if seen != membership:
            self.fail(f"membership: {node} applied {membership} at index {index}, another node {seen}")

    # -- elections ----------------------------------------------------------------------------
    def observe_leader(self, node: str, term: int) -> None:
        holder = self.leader_of_term.get(term)
        if holder is None:
            # First sighting of this leader: what is committed now must already be in its log. A
            # leader first seen after a later term's leader (it was paused between winning and
            # noticing) need not hold what that later term committed: what was committed before
            # its own term began is not known any more, so it is not checked.
            stale = any(other > term for other in self.leader_of_term)
            self.leader_of_term[term] = node
            if not stale:
                self.leaders_to_check[node] = (term, self.committed_max)
        elif holder != node:
            self.fail(f"election safety: {holder} and {node} both lead term {term}")

    def check_leader_log(self, node: str, term: int, storage: Storage) -> None:
        """Leader completeness, checked once the leader's election-time log is durable."""
        pending = self.leaders_to_check.get(node)
        if pending is None or pending[0] != term:
            return
        del self.leaders_to_check[node]
        first = storage.first_index()
        for index in range(first, pending[1] + 1):
            want = self.applied[index].term if index in self.applied else None
            have = _term_or_none(storage, index)
            if want is not None and have != want:
                if self.may_fork(index):
                    return
                self.fail(
                    f"leader completeness: {node} leads term {term} but holds term {have} at "
                    f"index {index}, committed in term {want}"
                )
                return

    # -- persistence --------------------------------------------------------------------------
    def before_save(self, node: str, storage: Storage, entries: Sequence[Entry]) -> None:
        """Durability: the entries about to be written must not replace a committed entry."""
        for entry in entries:
            old = _term_or_none(storage, entry.index)
            if old is None or old == entry.term:
                continue
            committed = self.applied.get(entry.index)
            if committed is not None and committed.term == old and not self.may_fork(entry.index):
                self.fail(
                    f"durability: {node} overwrites committed entry {entry.index} (term {old}) "
                    f"with term {entry.term}"
                )
            return  # everything after the first conflict is replaced; one report is enough

    def after_save(self, node: str, storage: Storage, entries: Sequence[Entry]) -> None:
        """Log matching, inductively: same (index, term) -> same content and predecessor term."""
        for entry in entries:
            prev_term = _term_or_none(storage, entry.index - 1)
            content = (int(entry.type), entry.data)
            key = (entry.index, entry.term)
            seen = self.entries_seen.get(key)
            if seen is None:
                self.entries_seen[key] = (content, prev_term)
                continue
            if seen[0] != content:
                self.fail(f"log matching: {node} holds a different entry at index {entry.index} term {entry.term}")
                return
            if seen[1] is not None and prev_term is not None and seen[1] != prev_term:
                self.fail(
                    f"log matching: {node} has term {prev_term} before ({entry.index}, {entry.term}), "
                    f"another node has term {seen[1]}"
                )
                return
            if seen[1] is None and prev_term is not None:
                self.entries_seen[key] = (content, prev_term)

    # -- apply --------------------------------------------------------------------------------
    def on_apply(self, node: str, entry: Entry, kv: KvState) -> None:
        record = self.applied.get(entry.index)
        if record is None:
            self.applied[entry.index] = _Applied(entry.term, int(entry.type), entry.data, kv)
            self.committed_max = max(self.committed_max, entry.index)
            return
        if (record.term, record.type, record.data) != (entry.term, int(entry.type), entry.data):
            if self.may_fork(entry.index):
                return
            self.fail(
                f"state-machine safety: {node} applies term {entry.term} at index {entry.index}, "
                f"another node applied term {record.term} there"
            )
        elif record.kv != kv and not self.may_fork(entry.index):
            self.fail(f"state-machine safety: {node} reaches a different state at index {entry.index}")

    def check_applied_durable(self, node: str, storage: Storage, index: int, term: int,
                              full_disk_voters: Mapping[str, Storage] | None = None,
                              voters: Sequence[str] = ()) -> None:
        """The Ready contract: a node applies (and answers from) an entry only once it is in its
        own durable log (or behind its snapshot). One exception, for a node whose disk-full alarm is
        raised (`full_disk_voters`: the storages of every node; `voters`: its own): an entry already
        durable on a majority of its voters without it, which no leader can lose (a node that
        cannot persist applies what the others committed; otherwise a leader with a full disk would
        never answer a write its followers committed). The entry may have been committed under the
        membership before the latest change (its apply may be that change): a majority of the
        voters with one node more or one less counts too. State-machine safety is checked apart."""
        if _holds(storage, index, term):
            return
        if full_disk_voters is not None and _durable_on_a_majority(full_disk_voters, voters, index, term):
            return
        self.fail(f"{node} applies entry {index} (term {term}) before it is durable in its own log")

    def on_snapshot_installed(self, node: str, index: int, term: int, kv: KvState) -> None:
        record = self.applied.get(index)
        if record is None:
            return  # nobody applied that index through entries yet; later applies are compared
        if (record.term != term or record.kv != kv) and not self.may_fork(index):
            self.fail(f"state-machine safety: {node} installs a snapshot at {index} "
                      "that differs from the applied state")

    # -- storage faults -----------------------------------------------------------------------
    def held_committed(self, storage: Storage) -> set[int]:
        """The committed indexes `storage` holds (in its log or behind its snapshot)."""
        return {index for index, record in self.applied.items() if _holds(storage, index, record.term)}

    def on_copies_lost(self, node: str, held_before: set[int], storages: Mapping[str, Storage],
                       quorums: Sequence[tuple[Sequence[str], int]], fenced: Set[str] = frozenset()) -> list[int]:
        """`node`'s storage was damaged or lost its tail: each committed entry it held before and
        lost is forgiven when, for one of `quorums` (ids, need), fewer than `need` of those ids
        still hold it intact or are `fenced` (repairing: they cannot vote for a leader that lacks
        it). Returns the indexes newly forgiven."""
        lost = [index for index in sorted(held_before)
                if index not in self.forgiven and not _holds(storages[node], index, self.applied[index].term)]
        if node in fenced:
            self.lost_while_repairing.setdefault(node, set()).update(lost)
        return self._forgive_unprotected(lost, storages, quorums, fenced)

    def on_unfenced(self, node: str, storages: Mapping[str, Storage], quorums: Sequence[tuple[Sequence[str], int]],
                    fenced: Set[str]) -> list[int]:
        """`node` ended its repair and votes again. It must hold again every committed entry it lost
        since it was found damaged (a leader that committed in its term gave it a commit index at
        least that high), unless that loss was allowed meanwhile; what else it does not hold loses
        its protection."""
        early = sorted(index for index in self.lost_while_repairing.pop(node, set())
                       if index not in self.forgiven and not _holds(storages[node], index, self.applied[index].term))
        if early:
            self.fail(f"repair: {node} ends its repair without committed entry {early[0]} "
                      f"(term {self.applied[early[0]].term}), which it lost when its storage was damaged")
            return []
        missing = [index for index, record in sorted(self.applied.items())
                   if index not in self.forgiven and not _holds(storages[node], index, record.term)]
        return self._forgive_unprotected(missing, storages, quorums, fenced)

    def _forgive_unprotected(self, indexes: Sequence[int], storages: Mapping[str, Storage],
                             quorums: Sequence[tuple[Sequence[str], int]], fenced: Set[str]) -> list[int]:
        forgiven = []
        for index in indexes:
            term = self.applied[index].term
            for ids, need in quorums:
                protecting = [n for n in ids if n in fenced or (n in storages and _holds(storages[n], index, term))]
                if len(protecting) < need:
                    self.forgiven.add(index)
                    forgiven.append(index)
                    break
        return forgiven

    def may_fork(self, index: int) -> bool:
        """Whether another entry may take `index` (a forgiven loss, or after the fork); it then forks there."""
        if index in self.forgiven or (self.forked_at is not None and index >= self.forked_at):
            self.forked_at = index if self.forked_at is None else min(self.forked_at, index)
            return True
        return False

    def check_durable_majority(self, storages: dict[str, Storage], *, needed: int | None = None,
                               fenced: Set[str] = frozenset()) -> None:
        """Durability at the end of a run: every committed entry is in the durable log of `needed`
        of the given nodes (or behind their snapshot); by default a majority of them. Single-server
        changes keep any quorum a majority of all nodes, since at most one node is ever outside the
        voters. A `fenced` node (repairing damaged storage, so it votes for no leader lacking the
        entry) counts as a holder: it gets the entry back before it votes again."""
        needed = len(storages) // 2 + 1 if needed is None else needed
        for index in sorted(self.applied):
            if index in self.forgiven or (self.forked_at is not None and index >= self.forked_at):
                continue
            term = self.applied[index].term
            holders = [n for n in sorted(storages) if _holds(storages[n], index, term)]
            if len(holders) + len((fenced & storages.keys()) - set(holders)) < needed:
                self.fail(
                    f"durability: committed entry {index} (term {term}) is durable only on "
                    f"{holders or 'no node'}"
                )
                return


def _durable_on_a_majority(storages: Mapping[str, Storage], voters: Sequence[str], index: int, term: int) -> bool:
    """Whether a majority of `voters`, or of `voters` with one node of `storages` more or less, hold
    the entry durably."""
    holders = [node for node, storage in storages.items() if _holds(storage, index, term)]
    memberships = [set(voters), *(set(voters) | {node} for node in storages),
                   *(set(voters) - {node} for node in voters)]
    return any(members and has_quorum(sorted(members), holders) for members in memberships)


def _holds(storage: Storage, index: int, term: int) -> bool:
    snapshot = storage.snapshot()
    if not snapshot.is_empty and snapshot.meta.index >= index:
        return True
    return _term_or_none(storage, index) == term


def _term_or_none(storage: Storage, index: int) -> int | None:
    if index <= 0:
        return 0 if index == 0 else None
    try:
        return storage.term(index)
    except (CompactedError, UnavailableError):
        return None
