"""Issue 13 in the simulator: replicas (the leader most often) paused for 1 to 2.5 s under a
write-heavy load (masters changing their SyncStateSets every 10 ms, busy admins). A paused replica
finds its clock jumped when it resumes and the peer messages that reached it waiting, which its
driver works off in slices (rmqc.replica): at most what each peer's outbox holds
(`peer_outbox_messages`; here 64, an operator's choice, so that the pauses outlast it: the default
4096 would take over 20 s of heartbeats to fill). Links are FIFO here (a fixed delay, no loss), as TCP is,
so every append sent again is the leader's doing: after a real rejection, or (the bug of issue 13)
once per heartbeat reply of a backlog while a probe is still on its way, which the mutant test must
catch."""

from __future__ import annotations

from dataclasses import replace

import pytest

import rmqc.raft._core as raft_core
from rmqc.raft._progress import Progress
from rmqc.testing._simadmin import AdminKnobs
from rmqc.testing._simbrokers import BrokerKnobs
from rmqc.testing._simnemesis import NemesisKnobs
from rmqc.testing._simnet import LinkFaults
from rmqc.testing._simworld import World
from rmqc.testing.sim import SimKnobs

LONG_PAUSES = replace(
    SimKnobs(),
    nodes=3,
    active_us=3_000_000,
    quiet_us=500_000,
    faults=LinkFaults(drop_p=0.0, duplicate_p=0.0, spike_p=0.0, delay_min_us=1_000, delay_max_us=1_000),
    brokers=BrokerKnobs(groups=4, alter_us=10_000),
    admins=AdminKnobs(count=3, think_min_us=5_000, think_max_us=20_000, weights=(1, 0, 0)),
    nemesis=NemesisKnobs(interval_min_us=300_000, interval_max_us=600_000, pause_min_us=1_000_000,
                         pause_max_us=2_500_000, weights={"pause_leader": 3, "pause": 1, "heal": 1}),
    node=replace(SimKnobs().node, peer_outbox_messages=64),
)
SEEDS = range(30)
# Share of the entries sent in appends that went to a follower again in the same term. What a
# correct leader resends here is at most one window (PROBE_ENTRIES, 16) per follower and term: a new
# leader repairing a follower that refused its first append (its log diverged or fell behind in the
# pause), and a deposed leader resuming from a pause that resends its outstanding probe (its retry
# came due in the pause) before it reads the newer term waiting for it. Measured on seeds 0-29:
# 0-10.3 % per seed (worst seed 14: 35 of 339; 2.0 % of all 14,784 entries); at rmqc serve's
# default outbox of 4096, 0-11.0 % on seeds 0-21. One window is 2-6 % of a seed's 250-1,000
# entries, so a seed with few entries and a few windows passed 15 % once (seed 14 at de7d094: 38 of
# 247, 15.4 %), which had the bound raised to 25 %; it is back at 15 %. The bug costs 21 % at seed 2
# (the first above 15 %), 51 % at seed 4.
MAX_RESENT_SHARE = 0.15


def resent_share(seed: int) -> tuple[float, World]:
    world = World(seed, LONG_PAUSES)
    result = world.run()
    assert result.ok, f"seed {seed}: {result.violations[0]}\n" + "\n".join(result.trace)
    sent = world.counts.get("append_entries_sent", 0)
    return world.counts.get("append_entries_resent", 0) / max(1, sent), world


def test_long_pauses_keep_safety_progress_and_resend_little() -> None:
    dropped = 0
    for seed in SEEDS:
        share, world = resent_share(seed)
        counts = world.counts
        assert counts.get("nemesis_pause_leader", 0) + counts.get("nemesis_pause", 0) > 0, f"seed {seed}"
        assert len(world.controller_history.alters) > 50, f"seed {seed}: {len(world.controller_history.alters)}"
        assert share <= MAX_RESENT_SHARE, f"seed {seed}: {share:.0%} of the entries sent were resent"
        dropped += counts.get("paused_backlog_dropped", 0)
    assert dropped > 0  # some pauses outlast a peer outbox's worth of messages: the bound is exercised


def test_catches_a_leader_that_resends_its_probe_on_every_heartbeat_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    def resume_at_once(self: Progress, tick: int, heartbeat_round: int | None, probe_retry_ticks: int) -> None:
        self.flow_paused = False  # the old rule: any heartbeat reply resends an outstanding probe

    monkeypatch.setattr(Progress, "may_resume", resume_at_once)
    monkeypatch.setattr(raft_core, "PROBE_ENTRIES", 1024)
    for seed in SEEDS:
        share, _ = resent_share(seed)
        if share > MAX_RESENT_SHARE:
            print(f"caught by seed {seed}: {share:.0%} of the entries sent were resent")
            return
    pytest.fail(f"no seed in {SEEDS} shows the resend storm")
