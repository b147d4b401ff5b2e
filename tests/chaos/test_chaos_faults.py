"""The link faults cut exactly the links they should, on a mesh of proxies that is not running
(cutting only sets each proxy's state)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from rmqc.chaos import FAULTS
from rmqc.chaos._tcp_proxy import ProxyMesh


@dataclass
class LinkWorld:
    mesh: ProxyMesh
    leader: str = "n0"

    @property
    def node_ids(self) -> list[str]:
        return list(self.mesh.listen_ports)

    async def leader_or_random(self, rng: random.Random) -> str:
        return self.leader


def world(nodes: int) -> LinkWorld:
    return LinkWorld(ProxyMesh({f"n{i}": 20000 + i for i in range(nodes)}))


def cut_links(mesh: ProxyMesh) -> set[tuple[str, str]]:
    return {pair for pair, proxy in mesh.proxies.items() if proxy.is_cut}


def can_talk(mesh: ProxyMesh, a: str, b: str) -> bool:
    return not mesh.proxies[(a, b)].is_cut and not mesh.proxies[(b, a)].is_cut


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("kind", ["partition", "partition-reject"])
async def test_a_partition_cuts_a_minority_off_both_ways(kind: str, seed: int) -> None:
    w = world(5)
    await FAULTS[kind](w, random.Random(seed))  # type: ignore[arg-type]
    cut = cut_links(w.mesh)
    assert cut and all((b, a) in cut for a, b in cut)
    isolated = {a for a, _ in cut}
    groups = {frozenset(n for n in w.node_ids if n == a or can_talk(w.mesh, a, n)) for a in w.node_ids}
    assert len(groups) == 2 and min(len(g) for g in groups) <= 2, groups
    assert isolated == set(w.node_ids)


async def test_partition_leader_isolates_the_leader() -> None:
    w = world(3)
    w.leader = "n1"
    await FAULTS["partition-leader"](w, random.Random(1))  # type: ignore[arg-type]
    assert cut_links(w.mesh) == {("n1", "n0"), ("n1", "n2"), ("n0", "n1"), ("n2", "n1")}


async def test_a_ring_leaves_each_node_its_two_neighbours() -> None:
    w = world(5)
    await FAULTS["ring"](w, random.Random(3))  # type: ignore[arg-type]
    for node in w.node_ids:
        assert sum(can_talk(w.mesh, node, other) for other in w.node_ids if other != node) == 2


async def test_a_bridge_has_one_node_that_sees_everyone() -> None:
    w = world(5)
    await FAULTS["bridge"](w, random.Random(4))  # type: ignore[arg-type]
    sees_all = [n for n in w.node_ids if all(can_talk(w.mesh, n, o) for o in w.node_ids if o != n)]
    assert len(sees_all) == 1
    assert len(cut_links(w.mesh)) == 2 * 2 * 2  # two pairs of two, both directions


async def test_asymmetric_loses_only_what_the_victim_sends() -> None:
    w = world(3)
    _, heal = await FAULTS["asymmetric"](w, random.Random(0))  # type: ignore[arg-type]
    victim = next(a for (a, _b), p in w.mesh.proxies.items() if p.is_cut and p._cut["forward"])
    for other in (n for n in w.node_ids if n != victim):
        assert w.mesh.proxies[(victim, other)]._cut == {"forward": True, "backward": False}
        assert w.mesh.proxies[(other, victim)]._cut == {"forward": False, "backward": True}
    await heal()
    assert not cut_links(w.mesh)
