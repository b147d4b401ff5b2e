"""The docs name commands that exist, and point users to nothing they cannot see."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from rmqc.cli.main import typer_app

ROOT = Path(__file__).resolve().parents[2]
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda path: path.name)
def test_every_rmqc_command_in_the_docs_exists(doc: Path) -> None:
    """`rmqc snapshot save` in operations.md was `rmqc admin snapshot save`."""
    root = typer.main.get_command(typer_app())
    wrong = []
    text = doc.read_text()
    code = "\n".join(re.findall(r"^```(?:sh|bash)?\n(.*?)^```", text, re.M | re.S))  # commands at line starts
    found = re.findall(r"^(?:\.venv/bin/)?rmqc((?: [a-z][a-z-]*(?!\w)){1,3})", code, re.M)
    found += re.findall(r"`(?:\.venv/bin/)?rmqc((?: [a-z][a-z-]*(?!\w)){1,3})", text)  # inline `rmqc ...`
    for words in found:
        command = root
        for word in words.split():
            subcommands = getattr(command, "commands", None)
            if not subcommands:
                break
            if word not in subcommands:
                wrong.append(f"rmqc{words}")
                break
            command = subcommands[word]
    assert wrong == [], doc.name


@pytest.mark.parametrize("doc", [ROOT / "README.md", ROOT / "docs" / "operations.md"], ids=lambda path: path.name)
def test_no_pointer_to_a_shared_folder(doc: Path) -> None:
    assert "shared folder" not in doc.read_text()
