"""The replica's parts get their collaborators, not the whole Replica: no part's constructor (nor
the status functions) takes a Replica, the modules of rmqc.replica import each other without a
loop (TYPE_CHECKING imports included), and only the driver writes RaftFacts, whose decisions
(who serves, who is the sole voter, which address a member has) are checked here too."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from replica_harness import Cluster

import rmqc
from rmqc.raft import ConfState
from rmqc.replica import _status
from rmqc.replica._disk import Disk
from rmqc.replica._driver import Driver
from rmqc.replica._facts import FACT_FIELDS, RaftFacts
from rmqc.replica._membership import Membership
from rmqc.replica._operations import Operations
from rmqc.replica._reads import ReadPath

SRC = Path(rmqc.__file__).parent
REPLICA = SRC / "replica"
# the modules allowed to assign a RaftFacts field: the class itself, and its one writer
FACT_WRITERS = {REPLICA / "_facts.py", REPLICA / "_driver.py"}
PARTS: list[Callable[..., Any]] = [Driver, ReadPath, Membership, Operations, Disk, _status.build_status,
                                   _status.status_document, _status.status_answer]


@pytest.mark.parametrize("part", PARTS, ids=lambda part: part.__qualname__)
def test_no_part_takes_the_replica(part: Callable[..., Any]) -> None:
    signature = inspect.signature(part.__init__ if inspect.isclass(part) else part)  # type: ignore[misc]
    annotations = {name: str(parameter.annotation) for name, parameter in signature.parameters.items()}
    assert not [name for name, annotation in annotations.items() if "Replica" in re.findall(r"\w+", annotation)]


def relative_imports(path: Path) -> set[str]:
    """The sibling modules `path` imports, at run time or for type checking alone."""
    return {node.module or "__init__" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.level == 1}


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One loop of `graph` (module -> the modules it imports), or [] when there is none."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module):], module]
        if module in done:
            return []
        for imported in sorted(graph.get(module, ())):
            if cycle := visit(imported, [*path, module]):
                return cycle
        done.add(module)
        return []

    return next((cycle for module in sorted(graph) if (cycle := visit(module, []))), [])


def test_the_replica_modules_import_each_other_without_a_loop() -> None:
    graph = {path.stem: relative_imports(path) for path in REPLICA.glob("*.py") if path.stem != "__init__"}
    assert "_driver" in graph and "_replica" in graph["_runner"]  # the graph is read (runner: for types)
    assert import_cycle(graph) == []
    assert not [module for module, imported in graph.items() if "_replica" in imported and module != "_runner"]


def test_the_cycle_finder_finds_a_loop() -> None:
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def fact_writes(source: str) -> list[str]:
    """Every write of a RaftFacts field in `source`: `<...>facts.<field> = ...` (in a tuple too),
    `+=`, or a setattr on a facts object; as "line: what"."""
    writes = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if node.args and ast.unparse(node.args[0]).endswith("facts"):
                writes.append(f"{node.lineno}: {ast.unparse(node)}")
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple)
                                                                 else [target])]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        writes += [f"{node.lineno}: {ast.unparse(target)}" for target in targets
                   if isinstance(target, ast.Attribute) and target.attr in FACT_FIELDS
                   and ast.unparse(target.value).endswith("facts")]
    return writes


def test_only_the_driver_writes_the_facts() -> None:
    sources = {path: path.read_text() for path in SRC.rglob("*.py") if path not in FACT_WRITERS}
    writes = [f"{path.relative_to(SRC)}:{write}" for path, source in sources.items() if "facts" in source
              for write in fact_writes(source)]
    assert writes == []
    assert {write.rsplit(".", 1)[1] for write in fact_writes((REPLICA / "_driver.py").read_text())} == FACT_FIELDS


def test_the_fact_reader_sees_every_kind_of_write() -> None:
    source = ("self._facts.term = 1\nr.facts.leader_id, x = None, 2\nfacts.applied_index += 1\n"
              "setattr(self.facts, 'term', 3)\nchange.term = 4\nself.facts = facts\n")
    assert fact_writes(source) == ["1: self._facts.term", "2: r.facts.leader_id", "3: facts.applied_index",
                                   "4: setattr(self.facts, 'term', 3)"]


def test_the_replica_shows_the_facts_read_only() -> None:
    cluster = Cluster(1)
    cluster.run(2_000)
    [replica] = cluster.replicas.values()
    assert replica.leader_id == replica.facts.leader_id == replica.config.node_id and replica.serving_as_leader
    with pytest.raises(AttributeError):
        replica.leader_id = None  # type: ignore[misc]


# ----- the facts' own decisions -----

def test_facts_start_from_the_storage_with_no_leader() -> None:
    facts = RaftFacts("n1", 7, 120, 100, ConfState(voters=("n1",)))
    assert (facts.leader_id, facts.term, facts.applied_index, facts.snapshot_index) == (None, 7, 120, 100)
    assert not facts.serving_as_leader and facts.sole_voter


@pytest.mark.parametrize(("voters", "learners", "sole"), [
    (("n1",), (), True), (("n1",), ("n2",), True), (("n1", "n2"), (), False), (("n2",), ("n1",), False),
    ((), (), False)])
def test_a_sole_voter_is_the_only_voter(voters: tuple[str, ...], learners: tuple[str, ...], sole: bool) -> None:
    assert RaftFacts("n1", 0, 0, 0, ConfState(voters, learners)).sole_voter is sole


def test_a_members_address_comes_from_the_applied_book() -> None:
    facts = RaftFacts("n1", 0, 0, 0, ConfState(("n1", "n2"), (), (("n1", "h1:1"), ("n2", "h2:2"))))
    assert (facts.address_of("n2"), facts.address_of("n3")) == ("h2:2", None)


class _Host:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_soft_state(self, leader: str | None, previous: str | None) -> None:
        self.calls.append(("leader", leader, previous))

    def membership_applied(self, previous: ConfState, index: int) -> None:
        self.calls.append(("members", previous, index))


def bare_driver(facts: RaftFacts, host: _Host, peers: dict[str, str] | None = None) -> Driver:
    """A Driver with only what its fact writes use (a config, the facts, the host)."""
    driver = Driver.__new__(Driver)
    book = peers or {}

    def peer(member: str) -> SimpleNamespace | None:
        return SimpleNamespace(address=book[member]) if member in book else None

    driver._config = SimpleNamespace(node_id="n1", peer=peer)  # type: ignore[assignment]
    driver._facts, driver._host = facts, host  # type: ignore[assignment]
    return driver


@pytest.mark.parametrize(("previous", "leader", "serving_after"), [
    ("n1", "n1", True),  # the same leadership: it keeps serving
    ("n1", "n2", False), ("n1", None, False),  # lost
    ("n2", "n1", False), (None, "n1", False),  # won: serves once an entry of its term is applied
    ("n2", "n3", False)])
def test_a_leader_serves_on_only_while_its_leadership_goes_on(previous: str | None, leader: str | None,
                                                              serving_after: bool) -> None:
    facts, host = RaftFacts("n1", 3, 0, 0, ConfState()), _Host()
    facts.leader_id, facts.serving_as_leader = previous, True
    bare_driver(facts, host)._leader_seen(leader)
    assert (facts.leader_id, facts.serving_as_leader) == (leader, serving_after)
    assert host.calls == [("leader", leader, previous)]  # told after the facts say so


def test_an_applied_membership_gets_the_peers_addresses_it_lacks() -> None:
    before = ConfState(("n1", "n2"), (), (("n1", "h1:1"), ("n2", "h2:2")))
    facts, host = RaftFacts("n1", 3, 0, 0, before), _Host()
    bare_driver(facts, host, {"n3": "h3:3"})._adopt_membership(ConfState(("n1",), ("n3",), (("n1", "h1:1"),)), 9)
    assert facts.conf_state == ConfState(("n1",), ("n3",), (("n1", "h1:1"), ("n3", "h3:3")))
    assert facts.sole_voter
    assert host.calls == [("members", before, 9)]
