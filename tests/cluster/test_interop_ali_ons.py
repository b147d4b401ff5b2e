"""Interop with an independent remoting implementation: the npm package `ali-ons` (MIT, pure
JavaScript) sends 1005, 1012, 1013, 1003 and 1002 with its own channel and codec
(interop/ali_ons_probe.js) to a fresh rmqc node and must get correct answers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode
from rmqc.testing.cluster import free_ports

pytestmark = pytest.mark.slow
PROBE = Path(__file__).parent / "interop" / "ali_ons_probe.js"
ALI_ONS_VERSION = "3.12.0"


@pytest.fixture(scope="module")
def ali_ons_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm/node absent: the ali-ons interop test needs them to install and run ali-ons")
    folder = tmp_path_factory.mktemp("ali-ons")
    result = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", f"ali-ons@{ALI_ONS_VERSION}"],
                            cwd=folder, capture_output=True, timeout=600)
    assert result.returncode == 0, f"npm install ali-ons failed: {result.stderr.decode()[-2000:]}"
    shutil.copy(PROBE, folder / PROBE.name)
    return folder


async def test_ali_ons_client_gets_correct_answers(ali_ons_dir: Path, tmp_path: Path) -> None:
    (port,) = free_ports(1)
    config = NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0"))
    node = ControllerNode(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        with trio.fail_after(10):
            while node.replica is None or not node.replica.serving_as_leader:
                await trio.sleep(0.01)
        result = await trio.run_process(["node", PROBE.name, config.listen_address], cwd=ali_ons_dir,
                                        capture_stdout=True, capture_stderr=True, check=False)
        nursery.cancel_scope.cancel()
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    answers = {line["request"]: line for line in map(json.loads, result.stdout.decode().splitlines())}
    assert answers[1005]["code"] == 0
    assert answers[1005]["ext"]["controllerLeaderAddress"] == config.listen_address
    assert answers[1005]["ext"]["isLeader"] == "true"
    assert answers[1012]["ext"]["nextBrokerId"] == "1"
    assert answers[1013]["code"] == 0
    assert answers[1003]["code"] == 0
    assert json.loads(answers[1003]["body"]) == {"syncStateSet": [], "syncStateSetEpoch": 0}
    elected = answers[1002]
    assert elected["code"] == 0
    assert (elected["ext"]["masterBrokerId"], elected["ext"]["masterEpoch"]) == ("1", "1")
    assert elected["ext"]["masterAddress"] == "10.1.1.1:30911"
    assert '"syncStateSet":[1]' in elected["body"]
