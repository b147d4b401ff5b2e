"""bench/bench_cpu_floor.py on a tiny load: the three minimal nodes answer every write, with the
flush in the loop and in rmqc's saver thread, for one client and several (group commit), and the
script prints each point's CPU per write and its ratio against etcd's quoted figures (no etcd
needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench._floor_node import take_frames
from bench._scn_writes import write_request_bytes
from bench.bench_cpu_floor import main, request_frame, target_at


def test_frames_are_taken_whole_and_a_partial_one_stays() -> None:
    buffer = bytearray(b"\x00\x00\x00\x02ab\x00\x00\x00\x01c\x00\x00\x00\x05de")
    assert take_frames(buffer) == [b"\x00\x00\x00\x02ab", b"\x00\x00\x00\x01c"]
    assert buffer == bytearray(b"\x00\x00\x00\x05de")
    assert take_frames(buffer) == []
    assert len(request_frame()) == write_request_bytes()  # as long as rmqc's 1013 frame
    assert (target_at(1), target_at(8), target_at(16), target_at(256)) == (0.7, 0.7, 0.5, 0.5)


@pytest.mark.slow
def test_a_tiny_run_prints_every_variants_cpu_per_write_and_the_ratios(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    main(["--clients", "1,3", "--rounds", "1", "--seconds", "0.3", "--saver-thread", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    for name in ("floor", "floor-saver"):
        for clients in (1, 3):
            line = next(line for line in out.splitlines()
                        if line.startswith(f"  {name:10s} clients {clients:4d}:") and "servers" in line)
            assert " 0/s" not in line
        assert f"{name}/etcd, CPU per write of the servers, against etcd's figures from another run" in out
    assert "errors; first" not in out
    assert "clients    1:" in out and "x of etcd, target <= 0.7x" in out
    assert "the saver thread's cost" in out
    assert list(tmp_path.iterdir()) == []  # the data went to a temporary directory, removed
