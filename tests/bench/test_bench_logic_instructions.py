"""bench/bench_logic_instructions.py: valgrind counts the same instructions per write in two runs of
the same tree (the A/B it exists for), and a tree that cannot run is a named error, not a figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_logic_instructions import REPO, InstructionCountError, main, per_write


@pytest.mark.slow
def test_the_count_per_write_repeats_and_is_printed_against_the_first_tree(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = (per_write(REPO / "src", 1, 150) for _ in range(2))
    assert 100_000 < first < 20_000_000  # a write's logic is a few hundred thousand to millions of instructions
    assert abs(second - first) / first < 0.02  # what makes the tool worth having: runs agree
    main(["--clients", "2", "--writes", "40", "--tree", f"a={REPO / 'src'}", "--least"])
    out = capsys.readouterr().out.splitlines()
    line = next(line for line in out if line.startswith("    2 clients  a "))
    assert line.endswith("1.000x of a")
    least = next(line for line in out if line.startswith("    2 clients  least logic"))
    assert 0 < float(least.split()[-3].rstrip("x")) < 1  # the least logic runs fewer instructions than rmqc's


@pytest.mark.slow
def test_a_tree_that_cannot_run_is_a_named_error(tmp_path: Path) -> None:
    (tmp_path / "rmqc").mkdir()
    (tmp_path / "rmqc" / "__init__.py").write_text("raise ImportError('a broken tree')\n")
    with pytest.raises(InstructionCountError, match="a broken tree"):
        per_write(tmp_path, 1, 30)
