"""scripts/asyncio_controller_example.py: an asyncio program registers a broker and gets it elected
through rmqc.client.asyncio_client (trio-asyncio), against a real `rmqc serve` process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rmqc.cli.dev import LocalCluster

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "asyncio_controller_example.py"
RUN_TIMEOUT_S = 120.0


def test_the_asyncio_example_registers_and_elects_a_broker(tmp_path: Path) -> None:
    with LocalCluster(1, data_dir=tmp_path) as cluster:
        cluster.wait_for_leader()
        done = subprocess.run([sys.executable, str(SCRIPT), "--controllers", cluster.controllers,
                               "--broker-name", "from-asyncio"], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["leader"] == cluster.addresses[0]
    assert (result["brokerId"], result["applyCode"], result["registerCode"], result["electCode"]) == (1, 0, 0, 0)
    assert (result["masterBrokerId"], result["masterEpoch"]) == ("1", "1")
    group = result["syncStateData"]["replicasInfoTable"]["from-asyncio"]
    assert group["masterBrokerId"] == 1 and group["inSyncReplicas"][0]["alive"] is True
