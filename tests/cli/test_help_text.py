"""Command help: each paragraph is one line that Rich wraps to the terminal (the docstrings'
source line breaks made ragged lines on a wide terminal); lists keep their lines."""

from __future__ import annotations

from typer.testing import CliRunner

from rmqc.cli._help import unwrap
from rmqc.cli.main import app


def test_paragraphs_are_joined_and_lists_kept() -> None:
    text = "Summary line\nits second half.\n\nBody one\nbody two.\n\nOptions:\n- a\n- b"
    assert unwrap(text) == "Summary line its second half.\n\nBody one body two.\n\nOptions:\n- a\n- b"


def test_a_wide_terminal_shows_a_paragraph_on_one_line() -> None:
    result = CliRunner().invoke(app, ["log", "verify", "--help"], env={"COLUMNS": "400"})
    lines = [line.strip() for line in result.output.splitlines()]
    assert any(line.startswith("Check what the node reads") and line.endswith("check its header, checksums and "
                                                                              "state instead.") for line in lines)
