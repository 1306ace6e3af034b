"""Grading of the recall task: the model lists every hidden number, in order, as JSON.

The reply is expected to look like ``{"1": 1234, "2": 5678, ...}``. Everything here is a
pure function of the expected needle values and the model's raw reply, and reproduces the
seed project's published figures exactly (see ``tests/unit/test_golden_seed.py``):

* parsing: strict JSON first, then the first ```json fenced block holding an object, then
  the first bare non-empty ``{...}`` object in the text; at every stage the object's keys
  must all be ASCII digits (a whole reply or fence of ``{}`` is a valid, empty answer);
* accuracy: both objects ordered by numeric key, d = Levenshtein distance between the two
  value sequences, accuracy = (1 - d / max(len(expected), len(answered))) * 100;
* position accuracy: a needle counts as recalled in order when it belongs to the longest
  common subsequence (LCS) of the two value sequences, traced back from the ends and
  preferring to step back in the *answered* sequence on ties.

Value identity follows JSON types: the string ``"1234"`` is not the number ``1234``
(the seed compared parsed values with ``==``), while ``1234.0`` is the number ``1234``.

Index conventions: ``needle_index``, ``key_from`` and ``key_to`` are 1-based needle
numbers (the JSON keys of the expected answer); ``answer_index`` and the pairs returned by
:func:`lcs_anchors` are 0-based positions in the value sequences.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias

from rapidfuzz.distance import Levenshtein

Value: TypeAlias = int | str
"""A canonical answered value: an int for JSON integers, else a string."""

ParseSource: TypeAlias = Literal["json", "fenced", "bare"]
Outcome: TypeAlias = Literal["correct", "misorder", "missing"]

_DIGITS = re.compile(r"[0-9]+")
_FENCE_OPEN = re.compile(r"```json", re.IGNORECASE)
_FENCE = "```"
_OBJECT_AHEAD = re.compile(r"\s*\{")
# Where a digit-keyed object could start; pre-filtering keeps the scan close to linear.
# A bare "{}" is not a candidate: in prose it is far likelier to be talk than the answer.
_BARE_OBJECT_START = re.compile(r'\{\s*"[0-9]+"\s*:')
# Python refuses to convert longer digit strings to int (sys.get_int_max_str_digits).
_MAX_KEY_DIGITS = 4000

# Bare objects are decoded from a window of the text, grown only when the parse ran into
# its end: a failed decode costs O(position) just to build its error message (line
# numbers), which made many failing candidates in one long reply quadratic.
_FIRST_WINDOW = 4096
_WINDOW_END_MARGIN = 8
# Total characters the bare-object scan may examine before giving up; only degenerate
# replies (thousands of overlapping candidate objects) come near it.
_SCAN_BUDGET_PER_CHAR = 4
_MIN_SCAN_BUDGET = 1 << 22

_DECODER = json.JSONDecoder()
_NOTHING = object()


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The answered mapping (numeric key -> canonical value), or why there is none."""

    answers: Mapping[int, Value] | None = field(default=None, hash=False)
    error: str | None = None
    source: ParseSource | None = None

    @property
    def ok(self) -> bool:
        return self.answers is not None

    @property
    def values(self) -> tuple[Value, ...] | None:
        """Answered values ordered by numeric key."""
        if self.answers is None:
            return None
        return tuple(self.answers.values())


def canonical_value(value: object, *, coerce_digit_strings: bool = False) -> Value:
    """Map a decoded JSON value to a hashable canonical form.

    Integers (and integral floats) become ``int``; strings stay strings, unless
    ``coerce_digit_strings`` turns pure digit strings into ``int`` (the seed did not, and
    its figures depend on that); anything else becomes its compact JSON text.
    """
    if isinstance(value, bool):  # bool is an int subclass, but JSON true is not the number 1
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return _json_text(value)
    if isinstance(value, str):
        if coerce_digit_strings and len(value) <= _MAX_KEY_DIGITS and _DIGITS.fullmatch(value):
            return int(value)
        return value
    return _json_text(value)


def _json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _numeric_key(key: str) -> int | None:
    # isdigit() alone would accept non-ASCII digits such as "²" that int() rejects.
    if not (key.isascii() and key.isdigit()) or len(key) > _MAX_KEY_DIGITS:
        return None
    return int(key)


def _as_answers(obj: object, coerce_digit_strings: bool) -> dict[int, Value] | None:
    """The object's entries ordered by numeric key, or None if it is not a digit-keyed object."""
    if not isinstance(obj, dict):
        return None
    entries: list[tuple[int, Value]] = []
    for key, value in obj.items():
        number = _numeric_key(key)
        if number is None:
            return None
        if type(value) is not int:
            value = canonical_value(value, coerce_digit_strings=coerce_digit_strings)
        entries.append((number, value))
    # Keys like "1" and "01" collide; the later one wins, like a repeated key in JSON.
    entries.sort(key=itemgetter(0))
    return dict(entries)


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _fenced_blocks(text: str) -> Iterator[str]:
    for opening in _FENCE_OPEN.finditer(text):
        start = opening.end()
        if not _OBJECT_AHEAD.match(text, start):
            continue
        end = text.find(_FENCE, start)
        yield text[start:] if end < 0 else text[start:end]


def _decode_at(text: str, start: int) -> tuple[object, int]:
    """Decode the JSON value at ``start``: (value or _NOTHING, characters examined)."""
    window = _FIRST_WINDOW
    examined = 0
    while True:
        chunk = text[start : start + window]
        cut_short = start + window < len(text)
        try:
            value, end = _DECODER.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            ran_out = exc.pos >= len(chunk) - _WINDOW_END_MARGIN or exc.msg.startswith(
                "Unterminated string"
            )
            if cut_short and ran_out:
                examined += len(chunk)
                window *= 4
                continue
            return _NOTHING, examined + exc.pos + 1
        except (ValueError, RecursionError):  # over-long integer, or nesting too deep
            return _NOTHING, examined + len(chunk)
        return value, examined + end


def _first_bare_answers(
    text: str, coerce_digit_strings: bool
) -> tuple[dict[int, Value] | None, str | None]:
    budget = max(_MIN_SCAN_BUDGET, _SCAN_BUDGET_PER_CHAR * len(text))
    for candidate in _BARE_OBJECT_START.finditer(text):
        if budget <= 0:
            return None, "gave up: too many candidate JSON objects"
        value, examined = _decode_at(text, candidate.start())
        budget -= examined
        if value is not _NOTHING:
            answers = _as_answers(value, coerce_digit_strings)
            if answers is not None:
                return answers, None
    if "{" in text:
        return None, "no complete JSON object with numeric keys"
    return None, "no JSON object found"


def parse_recall_answer(text: str, *, coerce_digit_strings: bool = False) -> ParsedAnswer:
    """Extract the digit-keyed JSON object from a model reply. Never raises."""
    if not isinstance(text, str):
        return ParsedAnswer(error="response is not a string")
    try:
        return _parse(text, coerce_digit_strings)
    except (ValueError, RecursionError) as exc:  # pragma: no cover - each step already guards
        return ParsedAnswer(error=f"unparseable response ({type(exc).__name__})")


def _parse(text: str, coerce_digit_strings: bool) -> ParsedAnswer:
    if not text.strip():
        return ParsedAnswer(error="empty response")
    answers = _as_answers(_loads(text), coerce_digit_strings)
    if answers is not None:
        return ParsedAnswer(answers=MappingProxyType(answers), source="json")
    for block in _fenced_blocks(text):
        answers = _as_answers(_loads(block), coerce_digit_strings)
        if answers is not None:
            return ParsedAnswer(answers=MappingProxyType(answers), source="fenced")
    answers, error = _first_bare_answers(text, coerce_digit_strings)
    if answers is None:
        return ParsedAnswer(error=error)
    return ParsedAnswer(answers=MappingProxyType(answers), source="bare")


# --------------------------------------------------------------------------- grading


@dataclass(frozen=True, slots=True)
class RecallGrade:
    """One graded reply. All figures are None when the reply did not parse."""

    parse_ok: bool
    parse_error: str | None
    accuracy: float | None
    edit_distance: int | None
    correct: int | None
    missing: int | None
    extra: int | None
    wrong: int | None
    answered: tuple[Value, ...] | None

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
        }


def _to_ids(*sequences: Sequence[Hashable]) -> list[list[int]]:
    """Relabel values as small ints so every comparison is plain ``==`` on values.

    rapidfuzz hashes list elements, and would treat a 1-character string as its code
    point (``"Ӓ"`` == 1234); relabelling first rules that out.
    """
    ids: dict[Hashable, int] = {}
    return [[ids.setdefault(v, len(ids)) for v in seq] for seq in sequences]


def recall_accuracy(expected: Sequence[Hashable], answered: Sequence[Hashable]) -> float:
    """Edit-distance accuracy in [0, 100] of two value sequences."""
    return _distance_and_accuracy(expected, answered)[1]


def _distance_and_accuracy(
    expected: Sequence[Hashable], answered: Sequence[Hashable]
) -> tuple[int, float]:
    longest = max(len(expected), len(answered))
    if longest == 0:  # nothing to recall and nothing answered: a perfect reply
        return 0, 100.0
    e_ids, a_ids = _to_ids(expected, answered)
    distance = Levenshtein.distance(e_ids, a_ids)
    return distance, (1 - distance / longest) * 100


def grade_recall(
    expected: Sequence[int], response: str, *, coerce_digit_strings: bool = False
) -> RecallGrade:
    """Grade one raw reply against the expected needle values (needle i+1 = key "i+1")."""
    parsed = parse_recall_answer(response, coerce_digit_strings=coerce_digit_strings)
    return grade_parsed(expected, parsed)


def grade_parsed(expected: Sequence[int], parsed: ParsedAnswer) -> RecallGrade:
    """Grade an already parsed reply."""
    if parsed.answers is None:
        return RecallGrade(False, parsed.error, None, None, None, None, None, None, None)
    wanted = [canonical_value(v) for v in expected]
    answers = parsed.answers
    answered = tuple(answers.values())
    distance, accuracy = _distance_and_accuracy(wanted, answered)

    correct = missing = wrong = 0
    for key, value in enumerate(wanted, start=1):
        if key not in answers:
            missing += 1
        elif answers[key] == value:
            correct += 1
        else:
            wrong += 1
    extra = sum(1 for key in answers if not 1 <= key <= len(wanted))
    return RecallGrade(
        parse_ok=True,
        parse_error=None,
        accuracy=accuracy,
        edit_distance=distance,
        correct=correct,
        missing=missing,
        extra=extra,
        wrong=wrong,
        answered=answered,
    )


# --------------------------------------------------------------------------- error analysis
# The per-needle records are NamedTuples: immutable like the dataclasses above, and several
# times cheaper to build, which matters at 40+ records per answer over 100k answers.


class NeedleOutcome(NamedTuple):
    needle_index: int  # 1-based
    expected: Value
    in_lcs: bool
    outcome: Outcome


class Hallucination(NamedTuple):
    """An answered value that is none of the expected values.

    ``key_from``/``key_to`` are the needle numbers of the nearest anchors before and after
    it in the answer: 0 means "before the first anchor", N+1 "after the last anchor"
    (so an answer without anchors puts every hallucination in (0, N+1)).
    """

    answer_index: int  # 0-based
    value: Value
    key_from: int
    key_to: int


class Duplicate(NamedTuple):
    """An extra copy of an expected value beyond the number of times it was expected."""

    answer_index: int  # 0-based
    value: Value
    needle_indices: tuple[int, ...]  # every needle (1-based) that carries this value


def lcs_anchors(
    expected: Sequence[Hashable], answered: Sequence[Hashable]
) -> list[tuple[int, int]]:
    """0-based (expected_idx, answered_idx) pairs of the seed's longest common subsequence.

    Traceback from the ends: take a match when the values are equal, otherwise step back in
    the answered sequence whenever that keeps the LCS length, else in the expected one.
    """
    n, m = len(expected), len(answered)
    if n == 0 or m == 0:
        return []
    e_ids, a_ids = _to_ids(expected, answered)
    match_masks: dict[int, int] = {}
    for j, v in enumerate(a_ids):
        match_masks[v] = match_masks.get(v, 0) | (1 << j)

    # Bit-parallel LCS rows (Hyyrö 2004): in row i, bit j is 0 exactly when
    # LCS(e[:i], a[:j+1]) = LCS(e[:i], a[:j]) + 1, which is all the traceback needs.
    full = (1 << m) - 1
    row = full
    rows = [row]
    for v in e_ids:
        matched = row & match_masks.get(v, 0)
        row = ((row + matched) | (row - matched)) & full
        rows.append(row)

    anchors: list[tuple[int, int]] = []
    i, j = n, m
    while i and j:
        if e_ids[i - 1] == a_ids[j - 1]:
            i -= 1
            j -= 1
            anchors.append((i, j))
        elif rows[i] >> (j - 1) & 1:
            j -= 1
        else:
            i -= 1
    anchors.reverse()
    return anchors


def _unanchored_copies(
    expected: Sequence[Hashable],
    answered: Sequence[Hashable],
    anchors: Sequence[tuple[int, int]],
) -> tuple[set[int], list[int]]:
    """Split the unanchored answered copies of expected values into misorders and duplicates.

    Returns (misordered needle indices, duplicate answer indices), both 0-based. Each
    unanchored copy, in answer order, accounts for the earliest unanchored needle with its
    value; copies left over once every needle with that value is accounted for are
    duplicates. So a value expected k times and answered c times yields max(0, c - k)
    duplicates, never a misorder and a duplicate for the same expected copy.
    """
    anchored_e = {e for e, _ in anchors}
    anchored_a = {a for _, a in anchors}
    waiting: dict[Hashable, list[int]] = {}
    for index, value in enumerate(expected):
        waiting.setdefault(value, [])
        if index not in anchored_e:
            waiting[value].append(index)
    misordered: set[int] = set()
    duplicate: list[int] = []
    for index, value in enumerate(answered):
        if index in anchored_a:
            continue
        needles = waiting.get(value)
        if needles is None:
            continue  # not an expected value: a hallucination
        if needles:
            misordered.add(needles.pop(0))
        else:
            duplicate.append(index)
    return misordered, duplicate


def needle_outcomes(
    expected: Sequence[Hashable],
    answered: Sequence[Hashable],
    anchors: Sequence[tuple[int, int]] | None = None,
) -> list[NeedleOutcome]:
    """One outcome per expected needle: correct (an LCS anchor), misorder, or missing.

    ``anchors`` may be passed to reuse an :func:`lcs_anchors` result.
    """
    if anchors is None:
        anchors = lcs_anchors(expected, answered)
    anchored_e = {e for e, _ in anchors}
    misordered, _ = _unanchored_copies(expected, answered, anchors)
    outcomes: list[NeedleOutcome] = []
    for index, value in enumerate(expected):
        if index in anchored_e:
            outcomes.append(NeedleOutcome(index + 1, canonical_value(value), True, "correct"))
        elif index in misordered:
            outcomes.append(NeedleOutcome(index + 1, canonical_value(value), False, "misorder"))
        else:
            outcomes.append(NeedleOutcome(index + 1, canonical_value(value), False, "missing"))
    return outcomes


def hallucinations(
    expected: Sequence[Hashable],
    answered: Sequence[Hashable],
    anchors: Sequence[tuple[int, int]] | None = None,
) -> list[Hallucination]:
    """Every answered value that is not an expected value, located between LCS anchors."""
    if anchors is None:
        anchors = lcs_anchors(expected, answered)
    known = set(expected)
    anchor_at = {a: e + 1 for e, a in anchors}
    found: list[Hallucination] = []
    pending: list[tuple[int, Hashable]] = []
    key_from = 0
    for index, value in enumerate(answered):
        needle = anchor_at.get(index)
        if needle is not None:
            found.extend(Hallucination(i, canonical_value(v), key_from, needle) for i, v in pending)
            pending.clear()
            key_from = needle
        elif value not in known:
            pending.append((index, value))
    after_last = len(expected) + 1
    found.extend(Hallucination(i, canonical_value(v), key_from, after_last) for i, v in pending)
    return found


def duplicates(
    expected: Sequence[Hashable],
    answered: Sequence[Hashable],
    anchors: Sequence[tuple[int, int]] | None = None,
) -> list[Duplicate]:
    """Answered copies of expected values beyond how often each was expected."""
    if anchors is None:
        anchors = lcs_anchors(expected, answered)
    _, duplicate = _unanchored_copies(expected, answered, anchors)
    if not duplicate:
        return []
    needles: dict[Hashable, list[int]] = {}
    for index, value in enumerate(expected, start=1):
        needles.setdefault(value, []).append(index)
    return [
        Duplicate(index, canonical_value(answered[index]), tuple(needles[answered[index]]))
        for index in duplicate
    ]


@dataclass(frozen=True)
class ErrorAnalysis:
    """The seed's error analysis of one parsed answer, from one LCS."""

    needles: list[NeedleOutcome]
    hallucinations: list[Hallucination]
    duplicates: list[Duplicate]


def analyze_errors(expected: Sequence[Hashable], answered: Sequence[Hashable]) -> ErrorAnalysis:
    anchors = lcs_anchors(expected, answered)
    return ErrorAnalysis(
        needles=needle_outcomes(expected, answered, anchors),
        hallucinations=hallucinations(expected, answered, anchors),
        duplicates=duplicates(expected, answered, anchors),
    )
