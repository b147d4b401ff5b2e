"""`rmqc serve` as a process: a Java controller.conf, warnings for unknown keys, bad values
refused with the option named, SIGINT shutting down cleanly."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
import trio

from rmqc.client import ControllerClient
from rmqc.testing.cluster import RMQC, NodeProcess, free_ports, wait_until

pytestmark = pytest.mark.slow


async def test_serve_reads_java_controller_conf_and_stops_on_sigint(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    conf = tmp_path / "controller.conf"
    conf.write_text(f"controllerDLegerGroup=group1\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp_path / 'store'}\n"
                    "enableElectUncleanMaster=false\nsomeUnknownKey=1\n")
    node = NodeProcess("n0", f"127.0.0.1:{port}", "", tmp_path / "store", tmp_path / "n0.log")
    node.command = lambda: [RMQC, "serve", "-c", str(conf)]  # type: ignore[method-assign]
    await node.start()
    try:
        async with ControllerClient([node.address]) as client:
            answers = []

            async def has_leader() -> bool:
                answers.append(await client.get_metadata())
                return answers[-1].ext("controllerLeaderId") is not None

            await wait_until(has_leader, 10, "n0 leading")
            assert (answers[-1].ext("group"), answers[-1].ext("controllerLeaderId")) == ("group1", "n0")
    finally:
        node.kill(signal.SIGINT)
        assert await node.wait_exit() == 0
    log = node.log_path.read_text()
    assert "unknown controller property 'someUnknownKey' ignored" in log
    assert "signal SIGINT, shutting down" in log
    assert (tmp_path / "store" / "data.mdb").exists()


def test_serve_refuses_a_bad_value_naming_the_option(tmp_path: Path) -> None:
    result = subprocess.run([RMQC, "serve", "--data-dir", str(tmp_path), "--set", "tick_ms=soon"],
                            capture_output=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert b"tick_ms: bad value 'soon' from command line" in result.stderr


def test_serve_refuses_a_second_node_on_the_same_data_dir(tmp_path: Path) -> None:
    async def scenario() -> None:
        first_port, second_port = free_ports(2)
        first = NodeProcess("n0", f"127.0.0.1:{first_port}", f"n0-127.0.0.1:{first_port}", tmp_path / "d",
                            tmp_path / "first.log")
        await first.start()
        try:
            result = subprocess.run([RMQC, "serve", "--peers", f"n0-127.0.0.1:{second_port}", "--data-dir",
                                     str(tmp_path / "d")], capture_output=True, timeout=60)
            assert result.returncode == 1
            assert b"serving on" not in result.stdout
            assert b"cannot serve" in result.stderr
        finally:
            first.kill(signal.SIGTERM)
            await first.wait_exit()

    trio.run(scenario)
