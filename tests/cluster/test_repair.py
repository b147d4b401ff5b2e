"""`rmqc serve --repair` on real processes: a follower of a 3-node cluster under a writer is
SIGKILLed, the middle of its journal is damaged, and it is restarted. Without --repair it refuses to
serve; with it, the damaged journal is kept aside, the node rejoins, refuses every vote until it
holds the leader's commit index, and then holds every acknowledged write; the cluster never stops
acknowledging writes meanwhile."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.launcher import NodeStartFailed
from rmqc.storage import DATA_FILE_NAME
from rmqc.storage._journal import JOURNAL_FILE_NAME
from rmqc.testing.cluster import Cluster, wait_until
from rmqc.testing.writer import WriteLoad

ACKS_BEFORE_KILL = 300
ACKS_WHILE_DOWN = 100


def damage_journal_middle(data_dir: Path) -> None:
    """Flip 16 bytes in the middle of the journal's records."""
    journal = data_dir / JOURNAL_FILE_NAME
    data = bytearray(journal.read_bytes())
    used = len(data.rstrip(b"\0"))
    assert used > 2000, f"the journal holds only {used} bytes of records"
    middle = used // 2
    data[middle:middle + 16] = bytes(byte ^ 0xFF for byte in data[middle:middle + 16])
    journal.write_bytes(bytes(data))


def truncate_data_file(data_dir: Path) -> None:
    """`truncate -s 24576 data.mdb`: LMDB's pages beyond are gone (a SIGBUS once mapped)."""
    os.truncate(data_dir / DATA_FILE_NAME, 24576)


DAMAGE = {
    "journal": (damage_journal_middle, "journal is damaged", r"--repair: .*journal is damaged at byte \d+"),
    "data.mdb": (truncate_data_file, "data.mdb is damaged", r"--repair: .*data.mdb is damaged at byte 24576"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(DAMAGE))
async def test_a_damaged_follower_rejoins_with_repair_and_loses_nothing(tmp_path: Path, kind: str) -> None:
    damage, refusal, repaired = DAMAGE[kind]
    # snapshots every 200 entries: a repair that gave up the whole log catches up by snapshot
    cluster = Cluster.create(tmp_path, 3, settings=("snapshot_every_entries=200",))
    await cluster.start()
    try:
        async with ControllerClient(cluster.addresses, timeout_ms=5000, max_retries=10) as admin:
            leader = await cluster.wait_leader(admin)
            follower = next(node for node in cluster.nodes if node.address != leader)
            load = WriteLoad(cluster.addresses, prefix="r")
            async with trio.open_nursery() as nursery:
                await nursery.start(load.run)
                await load.wait_acks(ACKS_BEFORE_KILL, timeout_s=60)
                follower.kill(signal.SIGKILL if kind == "journal" else signal.SIGTERM)
                await follower.wait_exit()  # (a clean stop moves the journal's records into data.mdb)
                damage(follower.data_dir)
                acked_at_damage = len(load.ack_times)

                with pytest.raises(NodeStartFailed, match=refusal):
                    await follower.start()
                await load.wait_acks(acked_at_damage + ACKS_WHILE_DOWN, timeout_s=60)

                follower.repair = True
                await follower.start()
                await wait_until(lambda: _logged(follower, "REPAIR COMPLETE"), 60, "the repair to complete")
                acked_at_repair = len(load.ack_times)
                await load.wait_acks(acked_at_repair + ACKS_WHILE_DOWN, timeout_s=60)
                nursery.cancel_scope.cancel()

            log = follower.log_tail(400)
            assert re.search(repaired, log), log
            assert "REPAIRING" in log and log.index("REPAIRING") < log.index("REPAIR COMPLETE")
            evidence = list(follower.data_dir.glob(f"damaged-*/{kind}"))
            assert len(evidence) == 1, "the damaged file is kept for the investigation"
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
