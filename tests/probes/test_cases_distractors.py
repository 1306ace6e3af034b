"""Distractors wired into the cases probe: a case file's distractors join its cells, go in at
their depths, and the grade names the distractor an answer repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from needlescope.config._file import load_config
from needlescope.config._sweep import FillerSpec
from needlescope.errors import ConfigError
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.cases import probe as cases
from needlescope.probes.registry import expand_grid

REPO = Path(__file__).resolve().parents[2]
PROSE = filler_from_spec(FillerSpec(kind="prose", language="en"))


def distractor_cell():
    (cell,) = [
        c
        for c in expand_grid(load_config(REPO / "configs" / "cases.yaml"))
        if c.params()["case"] == "morrow_stew_secrets"
    ]
    return cell


def test_shipped_run_has_a_distractor_cell() -> None:
    cell = distractor_cell()
    params = cell.params()
    assert len(params["distractors"]) == 4 and len(params["needles"]) == 3
    assert params["distractor_keywords"][:3] == [["fennel seed"], ["juniper"], ["sesame"]]
    assert (cell.depth, cell.length) == (25.0, 1024)


def test_needles_and_distractors_go_in_at_their_depths() -> None:
    cell = distractor_cell()
    rendered = cases.render(cell, PROSE, "prose", 5000)
    text, params = rendered.haystack_text, cell.params()
    for offset, needle in zip(rendered.offsets, params["needles"], strict=True):
        assert text[offset : offset + len(needle)] == needle
    positions = [text.index(d) / len(text) for d in params["distractors"]]
    depths = rendered.facts["distractor_depths"]
    assert len(depths) == 4
    for position, depth in zip(positions, depths, strict=True):
        assert abs(position - depth / 100) < 0.06  # at the nearest sentence boundary
    assert rendered.expected["distractor_keywords"] == params["distractor_keywords"]
    # The prompt is its render: rebuilt from the cell row alone, byte for byte.
    assert cases.rebuild(cell, PROSE, "prose", 5000, {}).prompt_text == rendered.prompt_text


@pytest.mark.parametrize(
    ("answer", "distractor", "matched"),
    [
        ("Smoked paprika, pickled samphire and bitter orange peel.", None, []),
        ("Sweet fennel seed and smoked paprika.", 1, [1]),
        ("Juniper, and some toasted sesame.", 2, [2, 3]),
        ("Wild sorrel from his sister.", 4, [4]),
    ],
)
def test_grade_names_the_distractor_repeated(
    answer: str, distractor: int | None, matched: list[int]
) -> None:
    rendered = cases.render(distractor_cell(), PROSE, "prose", 3000)
    graded = cases.grade(rendered.expected, rendered.facts, answer)
    assert graded.detail["distractor"] == distractor
    assert graded.detail["distractors_matched"] == matched


def test_a_case_without_distractors_grades_as_before() -> None:
    recipe = next(
        c
        for c in expand_grid(load_config(REPO / "configs" / "cases.yaml"))
        if c.params()["case"] == "plum_cake_secrets"
    )
    assert "distractors" not in recipe.params()
    rendered = cases.render(recipe, PROSE, "prose", 3000)
    assert "distractor_keywords" not in rendered.expected
    assert "distractor" not in cases.grade(rendered.expected, rendered.facts, "plums").detail


def test_bad_distractors_name_the_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "stew:\n  needles: [Paprika is in the stew.]\n  question: What is in the stew?\n"
        "  true_answer: Paprika.\n  distractors: [Juniper is in the pie.]\n"
        "  distractor_depths: [10, 20]\n"
    )
    (tmp_path / "s.yaml").write_text(
        "name: s\nmodels: [{name: m, provider: local}]\n"
        "probes: [{probe: cases, cases_file: c.yaml, lengths: [500], depths: [50]}]\n"
    )
    with pytest.raises(ConfigError, match=r"c\.yaml: case 'stew': distractor_depths"):
        expand_grid(load_config(tmp_path / "s.yaml"))
