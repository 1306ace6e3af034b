"""The LLM judge: its prompt, reading its verdict, and disagreement with keyword recall."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope import judge
from needlescope.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_messages_hold_the_rubric_then_the_texts() -> None:
    system, user = judge.judge_messages("Which bridge?", "The green one.", " A green bridge. ")
    assert (system.role, user.role) == ("system", "user")
    assert judge.DEFAULT_RUBRIC.strip() in system.content
    assert '"score"' in system.content and '"score"' in user.content
    for text in ("Which bridge?", "The green one.", "A green bridge."):
        assert text in user.content
    order = [user.content.index(t) for t in ("<question>", "<reference_answer>", "<answer>")]
    assert order == sorted(order)


def test_an_empty_answer_is_shown_as_empty() -> None:
    _, user = judge.judge_messages("q?", "a", "   ")
    assert "(the answer is empty)" in user.content


def test_custom_rubric_replaces_the_default() -> None:
    system, _ = judge.judge_messages("q?", "a", "b", rubric="Give 10 to everything.")
    assert "Give 10 to everything." in system.content
    assert judge.DEFAULT_RUBRIC.strip() not in system.content


def test_default_rubric_is_the_shipped_file() -> None:
    shipped = REPO / "configs" / "judge_rubric.md"
    assert judge.load_rubric(shipped) == judge.DEFAULT_RUBRIC
    assert judge.load_rubric(None) == judge.DEFAULT_RUBRIC
    for level in ("- 10:", "- 7:", "- 5:", "- 3:", "- 1:"):
        assert level in judge.DEFAULT_RUBRIC


def test_rubric_file_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"rubric file .*missing\.md: no such file"):
        judge.load_rubric(tmp_path / "missing.md")
    empty = tmp_path / "empty.md"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is empty"):
        judge.load_rubric(empty)


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        ('{"score": 7, "reason": "Two of three facts."}', 7, "Two of three facts"),
        ('```json\n{"score": 10, "reason": "All there."}\n```', 10, "All there"),
        ('Here you go: {"Score": "9", "explanation": "close"} thanks', 9, "close"),
        ('{"score": 4.0}', 4, None),
        ("[[7]]", 7, None),
        ("The answer names one fact. [[3]]", 3, "The answer names one fact"),
        ("Score: 8", 8, None),
        ("score: 6/10 - misses the bridge", 6, "misses the bridge"),
        ("**Score:** 5\nReason: half right", 5, "Reason: half right"),
        ("Rating = 2", 2, None),
        ("The score is 1.", 1, "The"),
        ('{"score": 6, "reason": "cut off', 6, 'reason": "cut off'),
        ('{"score": 7} and later [[2]]', 7, None),  # JSON first
    ],
)
def test_parse_verdict_reads_the_score(text: str, score: int, reason: str | None) -> None:
    verdict = judge.parse_verdict(text)
    assert (verdict.score, verdict.error) == (score, None)
    assert verdict.reason == reason


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[[11]]", "score 11 is outside 1–10"),
        ('{"score": 0}', "score 0 is outside 1–10"),
        ("Score: -3", "score -3 is outside 1–10"),
        ("[[7.5]]", "score 7.5 is not a whole number"),
        ('{"score": "seven"}', "score seven is not a number"),
        ('{"score": null}', "score None is not a number"),
        ('{"score": true}', "score True is not a number"),
        ("I think it is mostly right.", "no score found"),
        ("", "no score found"),
    ],
)
def test_parse_verdict_errors(text: str, error: str) -> None:
    verdict = judge.parse_verdict(text)
    assert verdict.score is None
    assert verdict.error is not None and error in verdict.error


@settings(max_examples=500, deadline=None)
@given(st.text() | st.from_regex(r"\{\"score\": .{0,12}\}|\[\[.{0,6}\]\]|Score: .{0,8}"))
def test_parse_verdict_never_raises(text: str) -> None:
    verdict = judge.parse_verdict(text)
    assert (verdict.score is None) == (verdict.error is not None)
    assert verdict.score is None or 1 <= verdict.score <= 10


def test_parse_verdict_survives_deep_nesting_and_huge_numbers() -> None:
    assert judge.parse_verdict("{" + "[" * 1900 + "}").error is not None
    assert "outside" in str(judge.parse_verdict("[[" + "9" * 5000 + "]]").error)


@pytest.mark.parametrize(
    ("accuracy", "score", "disagree"),
    [
        (100.0, 10, False),  # both correct
        (0.0, 1, False),  # both wrong
        (50.0, 7, False),  # both at their thresholds: both correct
        (49.9, 7, True),  # judge yes, keywords no
        (100.0, 6, True),  # keywords yes, judge no
        (None, 9, False),  # nothing to compare
        (80.0, None, False),
    ],
)
def test_disagreement(accuracy: float | None, score: int | None, disagree: bool) -> None:
    assert judge.disagreement(accuracy, score) is disagree


def test_records_store_the_verdict_and_the_disagreement() -> None:
    verdict = judge.parse_verdict('{"score": 9, "reason": "all three"}')
    record = judge.judge_record(verdict, model="j", keyword_accuracy=33.3, raw="x" * 5000)
    assert record == {
        "judge_model": "j",
        "judge_version": judge.JUDGE_VERSION,
        "judge_score": 9,
        "judge_reason": "all three",
        "judge_error": None,
        "judge_raw": "x" * judge.RAW_CHARS,
        "judge_tries": 1,
        "disagreement": True,
    }
    failed = judge.failed_record("j", "timeout", "no reply\nwithin 600 s")
    assert failed["judge_score"] is None
    assert failed["judge_error"] == "timeout: no reply within 600 s"
    assert failed["disagreement"] is False
