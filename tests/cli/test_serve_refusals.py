"""`rmqc serve` refuses, with the reason and what to type, a node that could never work: real
processes, as a user starts them."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from rmqc.launcher import Process, free_ports, rmqc_argv, serving_pattern

START_S = 60


def serve(tmp_path: Path, name: str, *args: str) -> Process:
    return Process(name, [*rmqc_argv(), "serve", *args], tmp_path / f"{name}.out", err_path=tmp_path / f"{name}.err")


def test_listen_without_peers_or_join_on_a_fresh_directory_is_refused(tmp_path: Path) -> None:
    """It used to print "serving on" and wait in term 0 for a leader that could not exist."""
    (port,) = free_ports(1)
    node = serve(tmp_path, "alone", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "d"))
    try:
        assert node.wait_exit_blocking(START_S) == 1
    finally:
        node.stop()
    assert "serving on" not in node.output_text()
    assert f"--peers n0-127.0.0.1:{port} (one node" in node.log_text() and "--join HOST:PORT" in node.log_text()


def test_a_member_restarted_with_its_data_directory_alone_does_not_move_to_the_default_port(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    address, data_dir = f"127.0.0.1:{port}", str(tmp_path / "d")
    first = serve(tmp_path, "first", "--peers", f"n0-{address}", "--data-dir", data_dir)
    try:
        first.wait_for_output_blocking(serving_pattern("n0", address), START_S)
    finally:
        assert first.stop() == 0
    again = serve(tmp_path, "again", "--data-dir", data_dir)
    try:
        assert again.wait_exit_blocking(START_S) == 1
    finally:
        again.stop()
    assert "serving on" not in again.output_text()
    assert f"records n0 at {address}, but it would listen on 127.0.0.1:9878" in again.log_text()
    assert f"--listen {address}" in again.log_text()
    listen = serve(tmp_path, "listen", "--listen", address, "--data-dir", data_dir)  # as the message says
    try:
        listen.wait_for_output_blocking(serving_pattern("n0", address), START_S)
    finally:
        assert listen.stop() == 0


def test_a_busy_port_is_named_as_such_and_no_data_directory_is_created(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        node = serve(tmp_path, "busy", "--peers", f"n0-{address}", "--data-dir", str(tmp_path / "d"))
        try:
            assert node.wait_exit_blocking(START_S) == 1
        finally:
            node.stop()
    assert f"cannot serve on {address}: {address} is in use by another process" in node.log_text()
    assert f"held by pid {os.getpid()} (" in node.log_text()  # this test's process holds it
    assert "stop it, or give this node another port" in node.log_text()
    assert not (tmp_path / "d").exists()
