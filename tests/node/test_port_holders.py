"""rmqc.node._port_holders on this machine's /proc, and on a /proc of files standing in for it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from rmqc.launcher import free_ports
from rmqc.node._port_holders import MAX_COMMAND_CHARS, port_holders


def test_the_process_listening_on_a_port_is_named_with_its_command_line() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        holders = port_holders(taken.getsockname()[1])
    assert len(holders) == 1 and holders[0].startswith(f"pid {os.getpid()} (")
    assert "python" in holders[0] and len(holders[0]) <= len(f"pid {os.getpid()} ()") + MAX_COMMAND_CHARS


def test_a_connections_local_port_counts_and_a_free_port_has_no_holder() -> None:
    (port,) = free_ports(1)
    assert port_holders(port) == []
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        accepted, _ = server.accept()
        with accepted:
            assert f"pid {os.getpid()} (" in port_holders(client.getsockname()[1])[0]


def _fake_proc(root: Path, tcp: str, processes: dict[str, tuple[str, list[str]]]) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
                                      "   uid  timeout inode\n" + tcp)
    for pid, (cmdline, targets) in processes.items():
        (root / pid / "fd").mkdir(parents=True)
        (root / pid / "cmdline").write_bytes(cmdline.encode().replace(b" ", b"\0") + b"\0")
        for fd, target in enumerate(targets):
            os.symlink(target, root / pid / "fd" / str(fd))
    return root


def test_time_wait_sockets_have_no_holder_and_long_command_lines_are_cut(tmp_path: Path) -> None:
    line = "   0: 0100007F:5CE3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 {inode}\n"
    proc = _fake_proc(tmp_path, line.format(inode=0) + line.format(inode=777), {
        "12": ("java " + "-Dx=y " * 40, ["/dev/null", "socket:[777]"]),
        "13": ("sleep 1", ["socket:[778]"]),
    })
    (holder,) = port_holders(0x5CE3, proc)
    assert holder.startswith("pid 12 (java -Dx=y") and holder.endswith("...)")
    assert port_holders(0x5CE4, proc) == [] and port_holders(0x5CE3, tmp_path / "nothing") == []
