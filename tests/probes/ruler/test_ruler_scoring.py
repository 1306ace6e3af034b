"""RULER's scoring with worked answers, and properties over any string."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from needlescope.probes.ruler.scoring import (
    match_all,
    match_part,
    postprocess,
    string_match_all,
    string_match_part,
    task_mean,
)


def test_postprocess_is_rulers() -> None:
    assert postprocess("  \t 1234567\x00and\x1f7654321 \r\n") == "1234567\nand\n7654321"
    assert postprocess("a\x7fb") == "a\x7fb"  # only \x00–\x1f are control characters to RULER
    assert postprocess("\x01\x02") == ""


def test_match_all_worked_answers() -> None:
    expected = ["8745621", "2315874", "Gleaming-Bobcat"]
    # two of three found, case-insensitively: 66.67 after rounding
    result = match_all("The numbers are 8745621 and GLEAMING-BOBCAT.", expected)
    assert result.found == (True, False, True)
    assert result.accuracy == pytest.approx(200 / 3)
    assert match_all("none here", expected).accuracy == 0.0
    assert match_all("8745621, 2315874 and gleaming-bobcat", expected).accuracy == 100.0
    # a substring is enough: RULER does not look for whole words
    assert match_all("x98745621234", ["8745621"]).found == (True,)


def test_distractors_found() -> None:
    result = match_all(
        "It is 1111111, or maybe 2222222.",
        ["1111111"],
        distractors=["2222222", "3333333", "2222222"],
    )
    assert result.accuracy == 100.0
    assert result.distractors_found == ("2222222",)


def test_string_match_all_over_answers_as_ruler() -> None:
    predictions = ["apple banana", "APPLE", "\x00cherry\x00", ""]
    references = [["apple", "banana"], ["apple", "banana"], ["cherry"], ["x"]]
    # (1 + 0.5 + 1 + 0) / 4 × 100 = 62.5
    assert string_match_all(predictions, references) == 62.5
    # RULER rounds the task mean to 2 decimals: (1 + 0 + 0) / 3 × 100 = 33.33
    assert string_match_all(["a", "b", "c"], [["a"], ["x"], ["y"]]) == 33.33
    accuracies = [match_all(p, r).accuracy for p, r in zip(predictions, references, strict=True)]
    assert task_mean(accuracies) == 62.5
    assert task_mean([100.0, 0.0, 0.0]) == 33.33
    assert task_mean([]) is None


def test_string_match_part_worked_answers() -> None:
    # RULER's QA metric: any one reference is enough
    assert match_part("Paris, France", ["paris", "Lyon"]) == 100.0
    assert match_part("Berlin", ["paris", "Lyon"]) == 0.0
    assert string_match_part(
        ["Paris", "Berlin", "lyon!"], [["paris"], ["paris"], ["x", "Lyon"]]
    ) == (66.67)


def test_bad_reference_lists() -> None:
    with pytest.raises(ValueError, match="at least one expected string"):
        match_all("a", [])
    with pytest.raises(ValueError, match="2 predictions but 1 reference lists"):
        string_match_all(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="no predictions"):
        string_match_part([], [])


@given(prediction=st.text(), expected=st.lists(st.text(), min_size=1, max_size=6))
def test_match_all_never_raises_and_stays_in_range(prediction: str, expected: list[str]) -> None:
    result = match_all(prediction, expected, distractors=expected[::-1])
    assert 0.0 <= result.accuracy <= 100.0
    assert len(result.found) == len(expected)
    assert result.accuracy == pytest.approx(100 * sum(result.found) / len(expected))
    assert 0.0 <= string_match_all([prediction], [expected]) <= 100.0
    assert match_part(prediction, expected) in (0.0, 100.0)


# Values as RULER plants them: words, numbers, uuids (the answer is stripped, so no edge spaces).
VALUE = st.text(alphabet=string.ascii_letters + string.digits + "-", min_size=1)


@given(expected=st.lists(VALUE, min_size=1))
def test_an_answer_listing_everything_scores_100(expected: list[str]) -> None:
    assert match_all(" ".join(expected), expected).accuracy == 100.0
