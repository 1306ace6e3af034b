"""`needlescope grade PROBE`: one answer graded by hand, as one JSON-ready dict."""

from __future__ import annotations

import json
from typing import Any

from needlescope.errors import NeedlescopeError
from needlescope.grading.recall import duplicates as duplicate_copies
from needlescope.grading.recall import grade_recall, hallucinations, lcs_anchors, needle_outcomes


def expected_values(text: str) -> list[int]:
    """Expected needles as `{"1": v1, …}` (the seed's format) or a JSON list `[v1, …]`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NeedlescopeError(f"--expected is not JSON: {exc.msg} at position {exc.pos}") from None
    if isinstance(data, dict):
        try:
            items = sorted(((int(k), v) for k, v in data.items()), key=lambda kv: kv[0])
        except ValueError:
            raise NeedlescopeError("--expected: every key must be a number") from None
        values = [v for _, v in items]
    elif isinstance(data, list):
        values = data
    else:
        raise NeedlescopeError("--expected must be a JSON object or list of numbers")
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise NeedlescopeError(
            "--expected must hold at least one integer needle, and only integers"
        )
    return values


def grade_recall_answer(expected_text: str, answer: str) -> dict[str, Any]:
    expected = expected_values(expected_text)
    grade = grade_recall(expected, answer)
    result: dict[str, Any] = {
        "probe": "recall",
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        "edit_distance": grade.edit_distance,
        "correct": grade.correct,
        "missing": grade.missing,
        "extra": grade.extra,
        "wrong": grade.wrong,
        "answered": list(grade.answered) if grade.answered is not None else None,
    }
    if grade.answered is not None:
        answered = list(grade.answered)
        anchors = lcs_anchors(expected, answered)
        result["needles"] = [o._asdict() for o in needle_outcomes(expected, answered, anchors)]
        result["hallucinations"] = [
            h._asdict() for h in hallucinations(expected, answered, anchors)
        ]
        result["duplicates"] = [
            {**d._asdict(), "needle_indices": list(d.needle_indices)}
            for d in duplicate_copies(expected, answered, anchors)
        ]
    return result


GRADERS = {"recall": grade_recall_answer}


def grade_one(probe: str, expected: str, answer: str) -> dict[str, Any]:
    if probe not in GRADERS:
        raise NeedlescopeError(f"unknown probe {probe!r}; known: {', '.join(GRADERS)}")
    return GRADERS[probe](expected, answer)
