"""rmqc's live views (`status --watch`, `dev cluster`) off a terminal: every change is printed
below the last, and an unchanged view is not printed again (an idle dev cluster wrote its whole
table into its log every second)."""

from __future__ import annotations

import pytest

from rmqc.cli._render import LiveView


def test_off_a_terminal_only_changes_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with LiveView("n0 leader term 2") as view:
        view.update("n0 leader term 2")
        view.update("n0 leader term 2")
        view.update("n0 follower term 3")
        view.update("n0 follower term 3")
    assert capsys.readouterr().out.splitlines() == ["n0 leader term 2", "n0 follower term 3"]
