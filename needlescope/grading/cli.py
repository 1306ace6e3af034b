"""`needlescope grade PROBE`: one answer graded by hand, as one JSON-ready dict."""

from __future__ import annotations

import json
from typing import Any

from needlescope.errors import NeedlescopeError
from needlescope.grading.recall import analyze_errors, grade_recall


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
    result: dict[str, Any] = {"probe": "recall", **grade.figures()}
    result["answered"] = list(grade.answered) if grade.answered is not None else None
    if grade.answered is not None:
        analysis = analyze_errors(expected, grade.answered)
        result["needles"] = [o._asdict() for o in analysis.needles]
        result["hallucinations"] = [h._asdict() for h in analysis.hallucinations]
        result["duplicates"] = [
            {**d._asdict(), "needle_indices": list(d.needle_indices)} for d in analysis.duplicates
        ]
    return result


GRADERS = {"recall": grade_recall_answer}


def grade_one(probe: str, expected: str, answer: str) -> dict[str, Any]:
    if probe not in GRADERS:
        raise NeedlescopeError(f"unknown probe {probe!r}; known: {', '.join(GRADERS)}")
    return GRADERS[probe](expected, answer)
