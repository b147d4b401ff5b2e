"""Issue 13 on real processes: the leader, then a follower, is paused with SIGSTOP under a
broker-like write load (1012 then 1013, moving to the next node after 250 ms) and resumed with
SIGCONT. The cluster must ride through: a new leader accepts writes within the election timeout
plus a margin, no node that was not paused stops answering its status request for more than
100 ms, no acknowledged write is lost and no linearizable or lease read is stale.
bench/_scn_pauses.py runs the same with 20 pauses."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqc.config import NodeConfig
from rmqc.testing.pauses import PauseConfig, PauseRun

pytestmark = pytest.mark.slow

DEFAULTS = NodeConfig()
# The randomised election timeout reaches twice election_tick; the margin is the issue's.
RECOVERY_BOUND_MS = 2 * DEFAULTS.election_tick * DEFAULTS.tick_ms + 500
# On the answers of each node, less the time the test's own loop was starved (rmqc.testing.pauses):
# the other sessions on this 2-core machine can stall the harness itself for over 100 ms. The
# issue's bound. It was 200 ms while a node saved in its event loop: a follower pause once showed
# both unpaused nodes silent 136 ms at once in CI (their fsyncs, on a disk shared with the resumed
# node's catch-up). Saves now run in the saver's thread; bench `pauses` on a quiet machine: worst
# 30 ms net over 6 pauses (raw 110 ms once, the harness itself late 105 ms then).
SILENCE_BOUND_MS = 100


async def test_paused_leader_and_follower_do_not_take_the_cluster_down(tmp_path: Path) -> None:
    run = PauseRun(tmp_path, PauseConfig(pauses=2, pause_s=2.0, writes_per_s=200.0))
    results = await run.run()
    described = "\n".join(str(result.as_dict()) for result in results)
    assert [result.kind for result in results] == ["leader", "follower"]
    assert run.lost == [], run.lost
    assert run.stale_reads == [], run.stale_reads
    leader_pause = results[0]
    assert leader_pause.recovery_ms <= RECOVERY_BOUND_MS, described
    for result in results:
        assert result.worst_silence_ms <= SILENCE_BOUND_MS, f"{described}\n{run.timeline}"
    assert sum(writer.acked_total for writer in run.writers) > 0
