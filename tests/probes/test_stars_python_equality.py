"""Counting-Stars grading: which values an answered count equals. The paper's code (its
notebook: ``list(set(predicted[:m]))``, then ``ref in predicted``) compares JSON values as Python
does, so ``true == 1``; the paper's templates (``stars-*-paper``) score that way, through the
flag their cells carry in ``facts``. needlescope's own templates keep "a boolean is never a
count", as do facts stored without the flag."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._sweep import parse_config
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.base import Grade
from needlescope.probes.counting_stars import probe as stars
from needlescope.probes.counting_stars.templates import TEMPLATES
from needlescope.probes.registry import expand_grid

PAPER = dict(stars.PAPER_SCORING)
OWN: dict[str, Any] = {}
PAPER_PROMPTS = sorted(name for name in TEMPLATES if name.endswith("-paper"))
OWN_PROMPTS = sorted(name for name in TEMPLATES if not name.endswith("-paper"))


def rendered_facts(prompt: str) -> dict[str, Any]:
    """The facts a four-star cell of ``prompt`` stores, as the sweep renders it."""
    filler = f"prose-{TEMPLATES[prompt].language}"
    config = parse_config(
        {
            "name": "t",
            "seed": 3,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {
                    "probe": "counting_stars",
                    "lengths": [2000],
                    "stars": 4,
                    "prompts": [prompt],
                    "fillers": [filler],
                }
            ],
        }
    )
    (cell,) = expand_grid(config)
    assert cell.prompt_version == prompt
    rendered = stars.render(cell, filler_from_spec(config.filler_spec(filler)), "prose", 2000)
    return dict(rendered.facts)


def answer(values: Sequence[Any]) -> str:
    return json.dumps({"little_penguin": list(values)})


def scores(grade: Grade) -> list[float]:
    return list(grade.detail["scores"])


# --- which cells carry the paper's rule -----------------------------------------------------


@pytest.mark.parametrize("prompt", PAPER_PROMPTS)
def test_every_paper_template_flags_the_papers_comparison(prompt: str) -> None:
    assert rendered_facts(prompt)["scoring"] == "paper"


@pytest.mark.parametrize("prompt", OWN_PROMPTS)
def test_needlescope_s_own_templates_carry_no_flag(prompt: str) -> None:
    assert "scoring" not in rendered_facts(prompt)


# --- true == 1 ------------------------------------------------------------------------------

TRUTH = [1, 6, 11, 14]  # M = 4
WITH_TRUE = '{"little_penguin": [true, 6, 3, 20]}'


@pytest.mark.parametrize(
    ("prompt", "accuracy"),
    [
        ("stars-en-paper", 50.0),
        ("stars-zh-paper", 50.0),
        ("stars-en-v1", 25.0),
        ("stars-zh-v1", 25.0),
    ],
)
def test_an_answered_true_is_the_count_1_under_the_paper_s_templates(
    prompt: str, accuracy: float
) -> None:
    # The paper's code: 1 in [True, 6, 3, 20] is True, so stars 1 and 2 score; needlescope's own
    # rule: only 6.
    grade = stars.grade(TRUTH, rendered_facts(prompt), WITH_TRUE)
    assert grade.parse_ok and grade.accuracy == accuracy
    assert grade.answered == [True, 6, 3, 20]  # what was answered is kept as it was


def test_facts_stored_before_the_flag_keep_needlescope_s_rule() -> None:
    # A paper-template cell's facts as stored before the flag: nothing says "paper".
    legacy = {"order": None, "language": "en", "reasoning": False, "counts": "paper"}
    assert stars.grade(TRUTH, legacy, WITH_TRUE).accuracy == 25.0
    assert stars.grade(TRUTH, {**legacy, "scoring": "something else"}, WITH_TRUE).accuracy == 25.0
    assert stars.grade(TRUTH, {**legacy, **PAPER}, WITH_TRUE).accuracy == 50.0


def test_a_true_answer_is_no_stray_under_the_paper_s_rule() -> None:
    paper = stars.grade(TRUTH, PAPER, WITH_TRUE)
    own = stars.grade(TRUTH, OWN, WITH_TRUE)
    assert scores(paper) == [1, 1, 0, 0] and scores(own) == [0, 1, 0, 0]
    assert paper.figures == {"correct": 2, "missing": 2, "extra": 2}  # 3 and 20
    assert own.figures == {"correct": 1, "missing": 3, "extra": 3}  # true, 3 and 20
    assert [n.outcome for n in paper.needles] == ["correct", "correct", "missing", "missing"]


def test_false_is_0_and_true_no_other_count() -> None:
    assert scores(stars.grade([0, 2], PAPER, answer([False, 2]))) == [1, 1]
    assert scores(stars.grade([0, 2], OWN, answer([False, 2]))) == [0, 1]
    # false equals 0 only, true 1 only (1 != False, 2 != True)
    assert scores(stars.grade([1, 2], PAPER, answer([False, False]))) == [0, 0]
    assert scores(stars.grade([2, 3], PAPER, answer([True, True]))) == [0, 0]


def test_a_string_is_never_a_count_under_either_rule() -> None:
    for facts in (PAPER, OWN):  # "1" != 1 in Python too
        assert scores(stars.grade([1, 6], facts, answer(["1", "6"]))) == [0, 0]


# --- floats ---------------------------------------------------------------------------------


@pytest.mark.parametrize("facts", [PAPER, OWN], ids=["paper", "own"])
def test_a_float_equal_to_a_count_is_the_count(facts: dict[str, Any]) -> None:
    # 6.0 == 6 and 1e0 == 1 in Python; 14.5 equals no count.
    grade = stars.grade(TRUTH, facts, '{"little_penguin": [6.0, 11.0, 14.5, 1e0]}')
    assert scores(grade) == [1, 1, 1, 0]
    assert grade.answered == [6, 11, 14.5, 1]
    assert grade.figures["extra"] == 1  # 14.5


def test_a_float_and_true_and_an_int_are_one_item_under_the_paper_s_rule() -> None:
    # {1.0, True, 1} is one item in a Python set: three answers, one count, two duplicates.
    grade = stars.grade([1, 6, 9], PAPER, answer([1.0, True, 1, 6]))
    assert scores(grade) == [1, 0, 0]  # truncated to M = 3 before 6 comes
    assert grade.detail["duplicates"] == 2


# --- duplicates: [1, true] ------------------------------------------------------------------


@pytest.mark.parametrize("pair", [[1, True], [True, 1]])
def test_one_and_true_are_one_item_twice_under_the_paper_s_rule(pair: list[Any]) -> None:
    # M = 2: the window is [1, true] (or [true, 1]), one item in a Python set; 6 comes too late.
    reply = answer([*pair, 6])
    paper = stars.grade([1, 6], PAPER, reply)
    assert scores(paper) == [1, 0]
    assert paper.detail["duplicates"] == 1 and paper.detail["out_of_truth"] == 0
    assert paper.figures == {"correct": 1, "missing": 1, "extra": 0}
    own = stars.grade([1, 6], OWN, reply)
    assert scores(own) == [1, 0]
    assert own.detail["duplicates"] == 0 and own.detail["out_of_truth"] == 1  # true, a stray


def test_true_twice_scores_1_once_under_the_paper_s_rule() -> None:
    reply = answer([True, True, 6])  # truncated to M = 2 first: [true, true], i.e. {1}
    assert scores(stars.grade([1, 6], PAPER, reply)) == [1, 0]
    assert scores(stars.grade([1, 6], OWN, reply)) == [0, 0]


# --- the reasoning variant ------------------------------------------------------------------


def test_the_reasoning_variant_compares_the_same_way() -> None:
    paper = {**rendered_facts("stars-reasoning-en-paper"), "mistaken": [2, 19]}
    own = {**rendered_facts("stars-reasoning-en-v1"), "mistaken": [2, 19]}
    # true is the corrected count 1 (alone: 1) under the paper's rule; 19 is star 2's mistake.
    assert scores(stars.grade([1, 20], paper, answer([True, 19]))) == [1, 0.25]
    assert stars.grade([1, 20], paper, answer([True, 19])).accuracy == 62.5
    assert scores(stars.grade([1, 20], own, answer([True, 19]))) == [0, 0.25]
    # A mistaken count of 1 answered as true: both counts of star 1 answered, 0.5.
    flipped = {**paper, "mistaken": [1, 19]}
    assert scores(stars.grade([2, 20], flipped, answer([2, True]))) == [0.5, 0]
    assert scores(stars.grade([2, 20], {**own, "mistaken": [1, 19]}, answer([2, True]))) == [1, 0]
    assert stars.grade([2, 20], flipped, answer([2, True])).detail["mistaken_answered"] == 1


# --- against the paper's code, written out ---------------------------------------------------


def reduce_duplicate(predicted: list[Any], m: int) -> list[Any]:
    """The notebook's ``reduce_duplicate``, as it is."""
    if len(predicted) > m:
        predicted = predicted[:m]
        predicted = list(set(predicted))
    else:
        predicted = list(set(predicted))
    return predicted


def notebook_scores(counts: list[int], mistaken: list[int], predicted: list[Any]) -> list[float]:
    """The notebook's scores: ``ref in predicted`` (acquisition), ``get_reasoning_score``
    (a_stars: the corrected counts, r_stars: the mistaken ones)."""
    pre = reduce_duplicate(predicted, len(counts))
    if not mistaken:
        return [1 if ref in pre else 0 for ref in counts]
    scored: list[float] = []
    for a, r in zip(counts, mistaken, strict=True):
        if a in pre and r in pre:
            scored.append(0.5)
        elif a in pre and r not in pre:
            scored.append(1)
        elif a not in pre and r in pre:
            scored.append(0.25)
        else:
            scored.append(0)
    return scored


# JSON scalars a model may answer (a nested list or object makes the notebook's set() raise).
scalars = (
    st.integers(0, 12)
    | st.booleans()
    | st.sampled_from([0.0, -0.0, 1.0, 2.0, 6.0, 1.5, 6.5, 1e0, 12.0])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet="0126ab", max_size=2)
    | st.none()
)


@settings(max_examples=400, deadline=None)
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=6),
    predicted=st.lists(scalars, max_size=10),
    reasoning=st.booleans(),
    data=st.data(),
)
def test_the_paper_s_rule_is_the_notebook_s_code(
    counts: list[int], predicted: list[Any], reasoning: bool, data: st.DataObject
) -> None:
    mistaken = (
        data.draw(st.lists(st.integers(0, 12), min_size=len(counts), max_size=len(counts)))
        if reasoning
        else []
    )
    facts = {**PAPER, "reasoning": reasoning, "mistaken": mistaken}
    grade = stars.grade(counts, facts, answer(predicted))
    assert scores(grade) == notebook_scores(counts, mistaken, predicted)
