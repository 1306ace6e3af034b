"""RULER's scoring (scripts/eval/synthetic/constants.py and evaluate.py), one answer at a time.

An answer is post-processed as RULER does (stripped, each control character turned into a
newline, stripped again), then each expected string is looked for in it as a case-insensitive
substring. ``string_match_all`` (every synthetic task) scores the fraction found; RULER's
``string_match_part`` (its QA tasks, for importing its predictions) scores 1 when any
reference is found. RULER's task score is the mean over answers × 100, rounded to 2 decimals.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess(prediction: str) -> str:
    """RULER's ``postprocess_pred``."""
    return _CONTROL.sub("\n", prediction.strip()).strip()


def _contains(haystack_lower: str, needle: str) -> bool:
    return needle.lower() in haystack_lower


def _fraction(prediction: str, expected: Sequence[str]) -> float:
    """RULER's per-answer arithmetic: a sum of 1.0s over the count."""
    answer = postprocess(prediction).lower()
    return sum(1.0 if _contains(answer, r) else 0.0 for r in expected) / len(expected)


def _any(prediction: str, references: Sequence[str]) -> float:
    answer = postprocess(prediction).lower()
    return max(1.0 if _contains(answer, r) else 0.0 for r in references)


@dataclass(frozen=True)
class MatchAll:
    """One answer under ``string_match_all``: ``accuracy`` 0–100 (not rounded), whether each
    expected string was found, and the distractors (planted wrong strings) the answer holds."""

    accuracy: float
    found: tuple[bool, ...]
    distractors_found: tuple[str, ...] = ()


def match_all(
    prediction: str, expected: Sequence[str], distractors: Sequence[str] = ()
) -> MatchAll:
    """The fraction of ``expected`` found in the post-processed answer, × 100."""
    if not expected:
        raise ValueError("string_match_all needs at least one expected string")
    answer = postprocess(prediction).lower()
    return MatchAll(
        accuracy=_fraction(prediction, expected) * 100,
        found=tuple(_contains(answer, item) for item in expected),
        distractors_found=tuple(d for d in dict.fromkeys(distractors) if _contains(answer, d)),
    )


def match_part(prediction: str, references: Sequence[str]) -> float:
    """100 when any reference is in the post-processed answer, else 0."""
    if not references:
        raise ValueError("string_match_part needs at least one reference")
    return _any(prediction, references) * 100


def string_match_all(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """RULER's task score over raw predictions, computed as RULER does: rounded to 2 decimals."""
    _check(predictions, references)
    if any(not r for r in references):
        raise ValueError("string_match_all needs at least one expected string per answer")
    fractions = [_fraction(p, r) for p, r in zip(predictions, references, strict=True)]
    return round(sum(fractions) / len(predictions) * 100, 2)


def string_match_part(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """RULER's QA score: the mean of ``match_part`` over answers, rounded to 2 decimals."""
    _check(predictions, references)
    if any(not r for r in references):
        raise ValueError("string_match_part needs at least one reference per answer")
    hits = [_any(p, r) for p, r in zip(predictions, references, strict=True)]
    return round(sum(hits) / len(predictions) * 100, 2)


def task_mean(accuracies: Sequence[float]) -> float | None:
    """A task's score from its answers' accuracies (0–100): their mean, rounded to 2 decimals
    as RULER rounds its task scores; None without answers."""
    if not accuracies:
        return None
    return round(sum(accuracies) / len(accuracies), 2)


def _check(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    if not predictions:
        raise ValueError("no predictions to score")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
