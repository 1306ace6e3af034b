"""Every command's --help prints its texts as written: brackets are text, not markup."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from needlescope.flows.cli._app import app

runner = CliRunner()
# Typer's own command group (typer ships its own copy of click): its commands by name.
COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


def _flat(text: str) -> str:
    # Wrapping may break a line after a hyphen ("uniah-" / "judge"): that is layout, not text.
    return re.sub(r"-\s+", "-", " ".join(text.split()))


def test_grade_help_prints_bracketed_text_literally() -> None:
    shown = runner.invoke(app, ["grade", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    flat = _flat(shown.output)
    assert "counting_stars [counts…];" in flat
    assert 'recall {"1": 1234, …} or [1234, …];' in flat


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_help_text_of_every_command_is_shown_as_written(name: str) -> None:
    command = COMMANDS[name]
    shown = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    flat = _flat(shown.output)
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    for text in filter(None, texts):
        assert _flat(text) in flat, f"{name}: {text!r} is not shown as written"
