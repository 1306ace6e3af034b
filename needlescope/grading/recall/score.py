"""Scoring a read reply: the seed's accuracy and its key counts.

accuracy = (1 − d / max(len(expected), len(answered))) × 100, d the Levenshtein distance of
the two value sequences (values compare as :mod:`.values` says). ``correct``, ``missing``,
``extra`` and ``wrong`` compare the sets of string keys: a key of both objects is correct when
its values are equal, else wrong; an expected key not answered is missing, an answered key
not expected is extra.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from rapidfuzz.distance import Hamming, Levenshtein

from needlescope.grading.recall.parse import Reading, read_reply, read_stored
from needlescope.grading.recall.values import (
    INT_TYPES,
    Value,
    canonical_value,
    in_code_range,
    plain_ints,
    to_ids,
)


@dataclass(frozen=True, slots=True)
class RecallGrade:
    """One graded reply. The figures are None unless the answer is counted; the key counts
    are there for an answer the seed could not order too (``uncounted`` says why)."""

    parse_ok: bool | None  # None: an empty reply, neither an answer nor a parse failure
    parse_error: str | None
    accuracy: float | None
    edit_distance: int | None
    correct: int | None
    missing: int | None
    extra: int | None
    wrong: int | None
    answered: tuple[Value, ...] | None
    uncounted: str | None = None

    def figures(self) -> dict[str, Any]:
        """The grade's scalar figures, named as the warehouse and `needlescope grade` name them."""
        return {
            "parse_ok": self.parse_ok,
            "parse_error": self.parse_error,
            "accuracy": self.accuracy,
            "edit_distance": self.edit_distance,
            "correct": self.correct,
            "missing": self.missing,
            "extra": self.extra,
            "wrong": self.wrong,
            "uncounted": self.uncounted,
        }


def recall_accuracy(expected: Sequence[Hashable], answered: Sequence[Hashable]) -> float:
    """Edit-distance accuracy in [0, 100] of two value sequences."""
    longest = max(len(expected), len(answered))
    if longest == 0:  # nothing to recall and nothing answered: a perfect reply
        return 100.0
    e_ids, a_ids = to_ids(expected, answered)
    return (1 - Levenshtein.distance(e_ids, a_ids) / longest) * 100


def canonical_expected(expected: Sequence[Hashable]) -> tuple[list[Value], bool]:
    """The expected values in canonical form, and whether they are plain ints rapidfuzz
    compares exactly (the usual case: then the list is used as it is)."""
    if type(expected) is list and set(map(type, expected)) <= INT_TYPES:
        return expected, in_code_range(expected)
    wanted = [canonical_value(v) for v in expected]
    return wanted, plain_ints(wanted)


def key_counts(wanted: Sequence[Value], obj: dict[str, Any]) -> tuple[int, int, int, int]:
    """(correct, missing, extra, wrong) of an answered object against needles keyed "1".."n"."""
    correct = missing = wrong = 0
    for key, value in enumerate(wanted, start=1):
        answered = obj.get(str(key), obj)  # obj itself: no such key
        if answered is obj:
            missing += 1
        elif canonical_value(answered) == value:
            correct += 1
        else:
            wrong += 1
    return correct, missing, len(obj) - correct - wrong, wrong


def score(
    wanted: list[Value], values: list[Value], obj: dict[str, Any] | None, direct: bool
) -> tuple[int, float, int, int, int, int]:
    """(edit distance, accuracy, correct, missing, extra, wrong) of one counted reply.

    ``obj`` is None when the keys are exactly "1".."len(values)"; ``direct`` says both value
    lists are plain ints that rapidfuzz may compare as they are.
    """
    n, m = len(wanted), len(values)
    longest = n if n > m else m
    if longest == 0:
        return 0, 100.0, 0, 0, 0, 0
    if obj is None and values == wanted:
        return 0, 100.0, n, 0, 0, 0
    e_codes, a_codes = (wanted, values) if direct else to_ids(wanted, values)
    distance = Levenshtein.distance(e_codes, a_codes)
    accuracy = (1 - distance / longest) * 100
    if obj is None:
        overlap = m if n > m else n
        # Hamming pads the shorter list: mismatches within the overlap plus the length gap.
        wrong = Hamming.distance(e_codes, a_codes, pad=True) - (longest - overlap)
        return distance, accuracy, overlap - wrong, n - overlap, m - overlap, wrong
    return distance, accuracy, *key_counts(wanted, obj)


def grade_reading(expected: Sequence[Hashable], reading: Reading) -> RecallGrade:
    values = reading.values
    if values is None:
        correct = missing = extra = wrong = None
        if reading.obj is not None:  # extracted, but not counted: its keys still count
            wanted, _ = canonical_expected(expected)
            correct, missing, extra, wrong = key_counts(wanted, reading.obj)
        return RecallGrade(
            reading.parse_ok,
            reading.error,
            None,
            None,
            correct,
            missing,
            extra,
            wrong,
            None,
            reading.uncounted,
        )
    wanted, direct = canonical_expected(expected)
    direct = direct and reading.ints and in_code_range(values)  # type: ignore[arg-type]
    distance, accuracy, correct, missing, extra, wrong = score(wanted, values, reading.obj, direct)
    return RecallGrade(
        True, None, accuracy, distance, correct, missing, extra, wrong, tuple(values)
    )


def grade_recall(expected: Sequence[int], response: str) -> RecallGrade:
    """Grade one raw reply against the expected needle values (needle i+1 = key "i+1")."""
    return grade_reading(expected, read_reply(response))


def grade_stored(expected: Sequence[int], stored: str) -> RecallGrade:
    """Grade an answer the recall seed stored: answered by definition, ordered and scored,
    never extracted again (``read_stored``)."""
    return grade_reading(expected, read_stored(stored))
