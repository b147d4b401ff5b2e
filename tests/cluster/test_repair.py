"""`rmqc serve --repair` on real processes: a follower of a 3-node cluster under a writer is
SIGKILLed, the middle of its journal is damaged, and it is restarted. Without --repair it refuses to
serve; with it, the damaged journal is kept aside, the node rejoins, refuses every vote until it
holds the leader's commit index, and then holds every acknowledged write; the cluster never stops
acknowledging writes meanwhile."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.launcher import NodeStartFailed
from rmqc.storage._journal import JOURNAL_FILE_NAME
from rmqc.testing.cluster import Cluster, wait_until
from rmqc.testing.writer import WriteLoad

ACKS_BEFORE_KILL = 300
ACKS_WHILE_DOWN = 100


def damage_journal_middle(data_dir: Path) -> int:
    """Flip 16 bytes in the middle of the journal's records; the offset."""
    journal = data_dir / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    used = len(data.rstrip(b"\0"))
    assert used > 2000, f"the journal holds only {used} bytes of records"
    middle = used // 2
    data[middle:middle + 16] = bytes(byte ^ 0xFF for byte in data[middle:middle + 16])
    journal.write_bytes(bytes(data))
    return middle


async def acks_reach(load: WriteLoad, count: int, timeout_s: float = 60) -> None:
    with trio.fail_after(timeout_s):
        while len(load.ack_times) < count:
            await trio.sleep(0.01)


@pytest.mark.slow
async def test_a_follower_with_a_damaged_journal_rejoins_with_repair_and_loses_nothing(tmp_path: Path) -> None:
    cluster = Cluster.create(tmp_path, 3)
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=5000, max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            follower = next(node for node in cluster.nodes if node.address != leader)
            load = WriteLoad(cluster.addresses, prefix="r")
            async with trio.open_nursery() as nursery:
                await nursery.start(load.run)
                await acks_reach(load, ACKS_BEFORE_KILL)
                follower.kill(signal.SIGKILL)
                await follower.wait_exit()
                damage_journal_middle(follower.data_dir)
                acked_at_damage = len(load.ack_times)

                with pytest.raises(NodeStartFailed, match="journal is damaged"):
                    await follower.start()
                await acks_reach(load, acked_at_damage + ACKS_WHILE_DOWN)

                follower.repair = True
                await follower.start()
                await wait_until(lambda: _logged(follower, "REPAIR COMPLETE"), 60, "the repair to complete")
                acked_at_repair = len(load.ack_times)
                await acks_reach(load, acked_at_repair + ACKS_WHILE_DOWN)
                nursery.cancel_scope.cancel()

            log = follower.log_tail(400)
            assert re.search(r"--repair: .*journal is damaged at byte \d+", log), log
            assert "REPAIRING" in log and log.index("REPAIRING") < log.index("REPAIR COMPLETE")
            evidence = list(follower.data_dir.glob("damaged-*/journal"))
            assert len(evidence) == 1, "the damaged journal is kept for the investigation"
            assert len(load.ack_times) > acked_at_repair > acked_at_damage, "the cluster kept serving"
            async with ControllerClient([follower.address], timeout_ms=5000, max_retries=3,
                                        consistency="stale") as on_follower:
                await wait_until(lambda: _holds_every_ack(load, on_follower), 30, "the repaired node to apply all")
            assert await load.lost_writes(admin) == {}
    finally:
        await cluster.stop()


async def _logged(node: object, text: str) -> bool:
    return text in node.log_tail(400)  # type: ignore[attr-defined]


async def _holds_every_ack(load: WriteLoad, client: ControllerClient) -> bool:
    return await load.lost_writes(client) == {}
