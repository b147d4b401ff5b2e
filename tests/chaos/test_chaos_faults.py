"""The link faults cut exactly the links they should, on a mesh of proxies that is not running
(cutting only sets each proxy's state); the disk stall holds the chosen node's commits through the
storage layer's real fault hook."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmqc.chaos import FAULTS
from rmqc.chaos._faults import LOSS_PERCENT, set_disk_stall
from rmqc.chaos._tcp_proxy import ProxyMesh
from rmqc.raft._types import Entry, HardState
from rmqc.storage import FAULT_FILE_ENV, LmdbStorage


@dataclass
class LinkWorld:
    mesh: ProxyMesh
    leader: str = "n0"
    root: Path = Path("unused")

    def disk_file(self, node_id: str) -> Path:
        return self.root / f"{node_id}.storage-faults"

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


async def test_loss_makes_every_link_lossy_at_one_rate_until_healed() -> None:
    w = world(3)
    detail, heal = await FAULTS["loss"](w, random.Random(2))  # type: ignore[arg-type]
    rates = {proxy._loss_rate for proxy in w.mesh.proxies.values()}
    assert len(rates) == 1
    (rate,) = rates
    assert LOSS_PERCENT[0] / 100 <= rate <= LOSS_PERCENT[1] / 100 and f"{round(rate * 100)}%" in detail
    await heal()
    assert all(proxy._loss_rate == 0 for proxy in w.mesh.proxies.values())


async def test_disk_stall_holds_the_victims_commits_until_healed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    w = world(3)
    w.root, w.leader = tmp_path, "n2"
    detail, heal = await FAULTS["disk-stall"](w, random.Random(0))  # type: ignore[arg-type]
    victim = detail.split()[-1]
    monkeypatch.setenv(FAULT_FILE_ENV, str(w.disk_file(victim)))  # what the victim node is started with
    # opened before the stall, as the victim was: opening commits, and held by the stall it waited for
    # the hook's own bound (120 s), in this test's thread
    set_disk_stall(w.disk_file(victim), False)
    with LmdbStorage(tmp_path / "data") as storage:
        set_disk_stall(w.disk_file(victim), True)
        saved = threading.Event()
        writer = threading.Thread(target=lambda: (
            storage.save(HardState(term=1, vote="n0", commit=0), [Entry(index=1, term=1, data=b"x")]), saved.set()))
        writer.start()
        assert not saved.wait(0.3)
        await heal()
        writer.join(5)
        assert saved.is_set() and storage.last_index() == 1
