"""`needlescope grade niah|variable_tracking|aggregation`: one JSON object, RULER's
string_match_all as `accuracy` 0-100, each expected string's outcome and the distractors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from needlescope.flows.cli._app import app

runner = CliRunner()


@pytest.mark.parametrize("probe", ["niah", "variable_tracking", "aggregation"])
def test_grade_prints_one_json_object(probe: str) -> None:
    done = runner.invoke(
        app,
        [
            "grade",
            probe,
            "--expected",
            '["QYIHX", "xtlhk", "ZZZZZ", "WWWWW"]',
            "--answer",
            "  qyihx, XTLHK and VVVVV\n",
            "--facts",
            '{"distractors": ["VVVVV", "UUUUU"]}',
        ],
    )
    assert done.exit_code == 0, done.output
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert (out["probe"], out["accuracy"], out["parse_ok"]) == (probe, 50.0, True)
    assert (out["correct"], out["missing"], out["wrong"]) == (2, 2, 1)
    assert [r["found"] for r in out["ruler_outcomes"] if r["role"] == "expected"] == [
        True,
        True,
        False,
        False,
    ]
    assert [r["text"] for r in out["ruler_outcomes"] if r["role"] == "distractor"] == ["VVVVV"]


def test_numbers_are_their_text_and_no_facts_is_fine() -> None:
    done = runner.invoke(
        app, ["grade", "niah", "--expected", "[8462931]", "--answer", "It is 8462931."]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["accuracy"] == 100.0


@pytest.mark.parametrize("expected", ['{"1": "a"}', "[]", "[true]", "[[1]]", "not json"], ids=str)
def test_bad_expected_is_one_line_exit_2(expected: str) -> None:
    done = runner.invoke(app, ["grade", "aggregation", "--expected", expected, "--answer", "x"])
    assert done.exit_code == 2
    assert "--expected" in done.output and len(done.output.strip().splitlines()) == 1
