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

Speed (``bench/bench_grading.py``): :func:`grade_recall_batch` grades a batch of replies
into columns. A flat object is read by orjson, whose reading is used only where it is the one
``json.loads`` gives (anything else is read by ``json`` as before); an answer equal to the
expected list skips the analysis; distances and the LCS run in rapidfuzz's C code directly on
the values when they are plain ints it compares exactly; rapidfuzz's LCS traceback is checked
against the seed's tie rule, and corrected where they part (only when an anchored needle was
answered twice, see :func:`_seed_blocks`); per-needle results are column slices, not objects.
Whatever falls outside those paths (repeated expected values, non-integer values) takes the
general pure-Python path; ``tests/unit/test_recall_batch.py`` pins the fast paths to it.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias

import orjson
from rapidfuzz.distance import Hamming, LCSseq, Levenshtein

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

# orjson reads a flat object of ints and strings exactly as json.loads does; it reads some
# other values differently (integers beyond 64 bits become floats; NaN, lone surrogates and
# 1e400 are errors), so any other reading is left to json.
_FLAT_TYPES = frozenset({int, str})
_INT_TYPES = frozenset({int})
# rapidfuzz compares list elements by a 64-bit code: a plain int in [0, 2**61 - 1) is its
# own code (and its own hash), so such values can be compared without relabelling.
_CODE_LIMIT = sys.hash_info.modulus

_CORRECT: Outcome = "correct"
_MISORDER: Outcome = "misorder"
_MISSING: Outcome = "missing"


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


class _Reading(NamedTuple):
    """A reply as read: the answered values in key order, or why there are none.

    ``answers`` is None when the keys are exactly 1..len(values) (the usual reply), else the
    full mapping; ``ints`` says every value is a plain int.
    """

    values: list[Value] | None
    answers: dict[int, Value] | None
    ints: bool
    error: str | None
    source: ParseSource | None


_EMPTY_READING = _Reading(None, None, False, "empty response", None)
_KEYS: list[str] = []
_GETTERS: dict[int, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
_MAX_CACHED_GETTER = 1024


def _key_list(n: int) -> list[str]:
    """["1", ..., str(n)]."""
    if n > len(_KEYS):
        _KEYS.extend(str(i) for i in range(len(_KEYS) + 1, max(n, 2 * len(_KEYS), 64) + 1))
    return _KEYS[:n]


def _in_key_order(obj: dict[str, Any]) -> list[Any] | None:
    """The values of an object whose keys are exactly "1".."n", in that order; else None."""
    n = len(obj)
    if n < 2:
        if n == 0:
            return []
        value = obj.get("1", _NOTHING)
        return None if value is _NOTHING else [value]
    getter = _GETTERS.get(n)
    if getter is None:
        getter = itemgetter(*_key_list(n))
        if n <= _MAX_CACHED_GETTER:
            _GETTERS[n] = getter
    try:
        return list(getter(obj))  # n distinct keys all found among n: exactly "1".."n"
    except KeyError:
        return None


def _split(answers: dict[int, Value]) -> tuple[list[Value], dict[int, Value] | None, bool]:
    values = list(answers.values())
    ints = set(map(type, values)) <= _INT_TYPES
    if not answers or (next(iter(answers)) == 1 and next(reversed(answers)) == len(answers)):
        return values, None, ints  # sorted distinct keys from 1 to len: exactly 1..len
    return values, answers, ints


def _answer_in(
    text: str, coerce_digit_strings: bool
) -> tuple[list[Value], dict[int, Value] | None, bool] | None:
    """The digit-keyed object ``json.loads(text)`` gives, split as in :class:`_Reading`."""
    try:
        obj = orjson.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        if type(obj) is not dict:
            # orjson accepts a subset of what json accepts, always with the same structure.
            return None
        values = _in_key_order(obj)
        if values is not None:
            types = set(map(type, values))
            if types <= _INT_TYPES:
                return values, None, True
            if types <= _FLAT_TYPES:  # json.loads would give exactly these values
                if not coerce_digit_strings:
                    return values, None, False
                values = [
                    v if type(v) is int else canonical_value(v, coerce_digit_strings=True)
                    for v in values
                ]
                return values, None, set(map(type, values)) <= _INT_TYPES
        elif set(map(type, obj.values())) <= _FLAT_TYPES:
            answers = _as_answers(obj, coerce_digit_strings)
            return None if answers is None else _split(answers)
    answers = _as_answers(_loads(text), coerce_digit_strings)
    return None if answers is None else _split(answers)


def _read(text: str, coerce_digit_strings: bool) -> _Reading:
    # json.loads yields an object only from text starting with whitespace and "{".
    if _OBJECT_AHEAD.match(text):
        found = _answer_in(text, coerce_digit_strings)
        if found is not None:
            return _Reading(*found, None, "json")
    elif not text.strip():
        return _EMPTY_READING
    for block in _fenced_blocks(text):
        found = _answer_in(block, coerce_digit_strings)
        if found is not None:
            return _Reading(*found, None, "fenced")
    answers, error = _first_bare_answers(text, coerce_digit_strings)
    if answers is None:
        return _Reading(None, None, False, error, None)
    return _Reading(*_split(answers), None, "bare")


def _read_reply(text: object, coerce_digit_strings: bool) -> _Reading:
    """Read a model reply. Never raises."""
    if not isinstance(text, str):
        return _Reading(None, None, False, "response is not a string", None)
    try:
        return _read(text, coerce_digit_strings)
    except (ValueError, RecursionError) as exc:  # pragma: no cover - each step already guards
        return _Reading(None, None, False, f"unparseable response ({type(exc).__name__})", None)


def parse_recall_answer(text: str, *, coerce_digit_strings: bool = False) -> ParsedAnswer:
    """Extract the digit-keyed JSON object from a model reply. Never raises."""
    reading = _read_reply(text, coerce_digit_strings)
    if reading.values is None:
        return ParsedAnswer(error=reading.error)
    answers = reading.answers
    if answers is None:
        answers = dict(zip(range(1, len(reading.values) + 1), reading.values, strict=True))
    return ParsedAnswer(answers=MappingProxyType(answers), source=reading.source)


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


def _in_code_range(values: Sequence[int]) -> bool:
    """Plain ints (checked by the caller) that rapidfuzz compares exactly as ``==`` does."""
    return not values or (min(values) >= 0 and max(values) < _CODE_LIMIT)


def _plain_ints(values: Sequence[Hashable]) -> bool:
    return set(map(type, values)) <= _INT_TYPES and _in_code_range(values)  # type: ignore[arg-type]


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


def _canonical_expected(expected: Sequence[Hashable]) -> tuple[list[Value], bool]:
    """The expected values in canonical form, and whether they are plain ints rapidfuzz
    compares exactly (the usual case: then the list is used as it is)."""
    if type(expected) is list and set(map(type, expected)) <= _INT_TYPES:
        return expected, _in_code_range(expected)
    wanted = [canonical_value(v) for v in expected]
    return wanted, _plain_ints(wanted)


def _score(
    wanted: list[Value],
    values: list[Value],
    answers: Mapping[int, Value] | None,
    direct: bool,
) -> tuple[int, float, int, int, int, int]:
    """(edit distance, accuracy, correct, missing, extra, wrong) of one parsed reply.

    ``answers`` is None when the keys are exactly 1..len(values); ``direct`` says both
    value lists are plain ints that rapidfuzz may compare as they are.
    """
    n, m = len(wanted), len(values)
    longest = n if n > m else m
    if longest == 0:
        return 0, 100.0, 0, 0, 0, 0
    if answers is None and values == wanted:
        return 0, 100.0, n, 0, 0, 0
    e_codes, a_codes = (wanted, values) if direct else _to_ids(wanted, values)
    distance = Levenshtein.distance(e_codes, a_codes)
    accuracy = (1 - distance / longest) * 100
    if answers is None:
        overlap = m if n > m else n
        # Hamming pads the shorter list: mismatches within the overlap plus the length gap.
        wrong = Hamming.distance(e_codes, a_codes, pad=True) - (longest - overlap)
        return distance, accuracy, overlap - wrong, n - overlap, m - overlap, wrong
    correct = missing = wrong = 0
    for key, value in enumerate(wanted, start=1):
        if key not in answers:
            missing += 1
        elif answers[key] == value:
            correct += 1
        else:
            wrong += 1
    extra = sum(1 for key in answers if not 1 <= key <= n)
    return distance, accuracy, correct, missing, extra, wrong


def _grade_reading(expected: Sequence[Hashable], reading: _Reading) -> RecallGrade:
    values = reading.values
    if values is None:
        return RecallGrade(False, reading.error, None, None, None, None, None, None, None)
    wanted, direct = _canonical_expected(expected)
    direct = direct and reading.ints and _in_code_range(values)  # type: ignore[arg-type]
    distance, accuracy, correct, missing, extra, wrong = _score(
        wanted, values, reading.answers, direct
    )
    return RecallGrade(
        True, None, accuracy, distance, correct, missing, extra, wrong, tuple(values)
    )


def grade_recall(
    expected: Sequence[int], response: str, *, coerce_digit_strings: bool = False
) -> RecallGrade:
    """Grade one raw reply against the expected needle values (needle i+1 = key "i+1")."""
    return _grade_reading(expected, _read_reply(response, coerce_digit_strings))


def grade_parsed(expected: Sequence[int], parsed: ParsedAnswer) -> RecallGrade:
    """Grade an already parsed reply."""
    if parsed.answers is None:
        return RecallGrade(False, parsed.error, None, None, None, None, None, None, None)
    answers = dict(parsed.answers)
    values, mapping, ints = _split(answers)
    return _grade_reading(expected, _Reading(values, mapping, ints, None, parsed.source))


# --------------------------------------------------------------------------- error analysis
# The per-needle records are NamedTuples: immutable like the dataclasses above, and several
# times cheaper to build. The batch grader below does not build them at all.


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


# A run of anchors: (answered start, expected start, length), as rapidfuzz's MatchingBlock
# unpacks; the last block of a list is always (len(answered), len(expected), 0).
Block: TypeAlias = tuple[int, int, int]


def _seed_blocks(expected: list[int], answered: list[int]) -> list[Block]:
    """The seed's LCS as blocks, for distinct expected values and plain-int codes.

    rapidfuzz's traceback also steps back in the answered sequence whenever that keeps the
    LCS length, but it does so even when the two current values are equal, where the seed
    takes the match. With distinct expected values the two agree unless a value was answered
    more than once, and then they part exactly where a gap between rapidfuzz's blocks whose
    right bound is needle t + 1 (or the end) holds a copy of needle t's value: every column
    in between is skipped by both rules alike, and the seed takes the last such copy, then
    goes on with the prefixes before that match. Each correction is one more rapidfuzz call.
    """
    blocks: list[Any] = LCSseq.editops(answered, expected).as_matching_blocks()
    m = len(answered)
    if len(set(answered)) == m:
        return blocks
    settled: list[Block] = []  # blocks right of the current prefix problem, right to left
    bound_e, bound_a = len(expected), m
    while True:
        found = -1
        right_e, right_a = bound_e, bound_a
        k = len(blocks) - 2  # the last block is the (len, len, 0) terminator
        while right_e:
            if k >= 0:
                a_start, e_start, size = blocks[k]
                low = a_start + size
            else:
                low = 0
            if low < right_a:
                gap = answered[low:right_a]
                value = expected[right_e - 1]
                if value in gap:
                    gap.reverse()
                    found = right_a - 1 - gap.index(value)  # the seed anchors the last copy
                    break
            if k < 0:
                break
            right_e, right_a = e_start, a_start
            k -= 1
        if found < 0:
            settled.reverse()
            return [*blocks[:-1], *settled, (m, len(expected), 0)]
        settled.extend(reversed(blocks[k + 1 : -1]))
        bound_e, bound_a = right_e - 1, found
        settled.append((bound_a, bound_e, 1))
        blocks = LCSseq.editops(answered[:bound_a], expected[:bound_e]).as_matching_blocks()


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
    if _plain_ints(expected) and len(set(expected)) == n and _plain_ints(answered):
        return [
            (e_start + k, a_start + k)
            for a_start, e_start, size in _seed_blocks(list(expected), list(answered))  # type: ignore[arg-type]
            for k in range(size)
        ]
    return _bit_parallel_anchors(expected, answered)


def _bit_parallel_anchors(
    expected: Sequence[Hashable], answered: Sequence[Hashable]
) -> list[tuple[int, int]]:
    """:func:`lcs_anchors` for any values (repeated expected values included)."""
    n, m = len(expected), len(answered)
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


# --------------------------------------------------------------------------- batches


@dataclass(slots=True)
class NeedleColumns:
    """Per-needle outcomes of a batch as columns: a row per expected needle of every reply
    that parsed; ``answer`` is the reply's position in the batch."""

    answer: list[int] = field(default_factory=list)
    needle_index: list[int] = field(default_factory=list)  # 1-based
    expected: list[Value] = field(default_factory=list)
    in_lcs: list[bool] = field(default_factory=list)
    outcome: list[Outcome] = field(default_factory=list)


@dataclass(slots=True)
class HallucinationColumns:
    """The :class:`Hallucination` records of a batch as columns."""

    answer: list[int] = field(default_factory=list)
    answer_index: list[int] = field(default_factory=list)
    value: list[Value] = field(default_factory=list)
    key_from: list[int] = field(default_factory=list)
    key_to: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DuplicateColumns:
    """The :class:`Duplicate` records of a batch as columns."""

    answer: list[int] = field(default_factory=list)
    answer_index: list[int] = field(default_factory=list)
    value: list[Value] = field(default_factory=list)
    needle_indices: list[tuple[int, ...]] = field(default_factory=list)


@dataclass(slots=True)
class RecallBatch:
    """A batch of graded replies: the :class:`RecallGrade` figures as one column per field
    (one entry per reply), and the error analysis of :func:`analyze_errors` as columns."""

    parse_ok: list[bool] = field(default_factory=list)
    parse_error: list[str | None] = field(default_factory=list)
    accuracy: list[float | None] = field(default_factory=list)
    edit_distance: list[int | None] = field(default_factory=list)
    correct: list[int | None] = field(default_factory=list)
    missing: list[int | None] = field(default_factory=list)
    extra: list[int | None] = field(default_factory=list)
    wrong: list[int | None] = field(default_factory=list)
    answered: list[list[Value] | None] = field(default_factory=list)
    needles: NeedleColumns = field(default_factory=NeedleColumns)
    hallucinations: HallucinationColumns = field(default_factory=HallucinationColumns)
    duplicates: DuplicateColumns = field(default_factory=DuplicateColumns)

    def __len__(self) -> int:
        return len(self.parse_ok)

    def grade(self, index: int) -> RecallGrade:
        """Reply ``index``'s grade, as :func:`grade_recall` gives it."""
        answered = self.answered[index]
        return RecallGrade(
            self.parse_ok[index],
            self.parse_error[index],
            self.accuracy[index],
            self.edit_distance[index],
            self.correct[index],
            self.missing[index],
            self.extra[index],
            self.wrong[index],
            None if answered is None else tuple(answered),
        )


def grade_recall_batch(
    expected: Sequence[Sequence[int]],
    responses: Sequence[object],
    *,
    coerce_digit_strings: bool = False,
) -> RecallBatch:
    """Grade many replies at once: for reply i, the figures of ``grade_recall(expected[i],
    responses[i])`` and the rows of ``analyze_errors(expected[i], answered)``, as columns."""
    batch = RecallBatch()
    add_ok, add_error, add_answered = (
        batch.parse_ok.append,
        batch.parse_error.append,
        batch.answered.append,
    )
    add_distance, add_accuracy, add_correct, add_missing, add_extra, add_wrong = (
        batch.edit_distance.append,
        batch.accuracy.append,
        batch.correct.append,
        batch.missing.append,
        batch.extra.append,
        batch.wrong.append,
    )
    needles = batch.needles
    add_answers, add_indices, add_expected, add_in_lcs, add_outcomes = (
        needles.answer.extend,
        needles.needle_index.extend,
        needles.expected.extend,
        needles.in_lcs.extend,
        needles.outcome.extend,
    )
    for answer, (wanted_raw, response) in enumerate(zip(expected, responses, strict=True)):
        values, answers, ints, error, _ = _read_reply(response, coerce_digit_strings)
        if values is None:
            add_ok(False)
            add_error(error)
            add_answered(None)
            for add in (add_distance, add_accuracy, add_correct, add_missing, add_extra, add_wrong):
                add(None)
            continue
        add_ok(True)
        add_error(None)
        add_answered(values)
        wanted = wanted_raw if type(wanted_raw) is list else list(wanted_raw)
        n = len(wanted)
        add_answers(repeat(answer, n))
        add_indices(range(1, n + 1))
        # plain: the expected values are ints, their own canonical form (the usual case)
        plain = set(map(type, wanted)) <= _INT_TYPES
        if plain:
            add_expected(wanted)
            if answers is None and values == wanted:  # every needle anchored in place
                add_distance(0)
                add_accuracy(100.0)
                add_correct(n)
                add_missing(0)
                add_extra(0)
                add_wrong(0)
                add_in_lcs(repeat(True, n))
                add_outcomes(repeat(_CORRECT, n))
                continue
            direct = ints and _in_code_range(wanted) and _in_code_range(values)  # type: ignore[arg-type]
        else:
            wanted = [canonical_value(v) for v in wanted]
            add_expected(wanted)
            direct = ints and _plain_ints(wanted) and _in_code_range(values)  # type: ignore[arg-type]
        distance, accuracy, correct, missing, extra, wrong = _score(wanted, values, answers, direct)
        add_distance(distance)
        add_accuracy(accuracy)
        add_correct(correct)
        add_missing(missing)
        add_extra(extra)
        add_wrong(wrong)
        if not (plain and direct and len(known := set(wanted)) == n):
            _analyze_any(batch, answer, wanted_raw, values)
        elif not _analyze_ops(batch, answer, wanted, values, known):  # type: ignore[arg-type]
            _analyze_blocks(batch, answer, wanted, values, known)  # type: ignore[arg-type]
    return batch


def _analyze_ops(
    batch: RecallBatch, answer: int, wanted: list[int], values: list[int], known: set[int]
) -> bool:
    """The error analysis of one reply from rapidfuzz's LCS edit operations (distinct
    plain-int needles); False, with nothing added, where the seed's LCS differs from it."""
    needles = batch.needles
    in_lcs, outcome = needles.in_lcs, needles.outcome
    base = len(in_lcs)
    n = len(wanted)
    in_lcs.extend(repeat(True, n))
    outcome.extend(repeat(_CORRECT, n))
    unanchored: list[tuple[int, int]] = []
    operations: list[tuple[str, int, int]] = LCSseq.editops(values, wanted).as_list()  # type: ignore[assignment]
    for operation, index, needle in operations:
        if operation == "insert":  # an expected value left out of the LCS
            in_lcs[base + needle] = False
            outcome[base + needle] = _MISSING
        else:  # an answered value left out, with the number of needles before it
            unanchored.append((index, needle))
    if not unanchored:
        return True
    halls: list[tuple[int, int, int, int]] = []  # answer index, value, key_from, key_to
    dups: list[tuple[int, int, int]] = []  # answer index, value, needle
    for index, before in unanchored:
        value = values[index]
        if value in known:
            needle = wanted.index(value)
            slot = base + needle
            if outcome[slot] is _MISSING:
                outcome[slot] = _MISORDER
                continue
            if outcome[slot] is _CORRECT:
                # A copy of an anchored needle whose next anchor is the following needle:
                # the seed's traceback anchors this copy instead (see _seed_blocks).
                after = base + before
                end = base + n
                while after < end and not in_lcs[after]:
                    after += 1
                if after == slot + 1:
                    del in_lcs[base:], outcome[base:]
                    return False
            dups.append((index, value, needle + 1))
        else:
            start = base + before - 1
            while start >= base and not in_lcs[start]:
                start -= 1
            after = base + before
            end = base + n
            while after < end and not in_lcs[after]:
                after += 1
            halls.append((index, value, start - base + 1, after - base + 1))
    if halls:
        columns = batch.hallucinations
        for index, value, key_from, key_to in halls:
            columns.answer.append(answer)
            columns.answer_index.append(index)
            columns.value.append(value)
            columns.key_from.append(key_from)
            columns.key_to.append(key_to)
    if dups:
        copies = batch.duplicates
        for index, value, needle in dups:
            copies.answer.append(answer)
            copies.answer_index.append(index)
            copies.value.append(value)
            copies.needle_indices.append((needle,))
    return True


def _analyze_blocks(
    batch: RecallBatch, answer: int, wanted: list[int], values: list[int], known: set[int]
) -> None:
    """The error analysis of one reply from its LCS blocks (distinct plain-int needles)."""
    n, m = len(wanted), len(values)
    blocks = _seed_blocks(wanted, values)
    in_lcs = [False] * n
    outcome: list[Outcome] = [_MISSING] * n
    anchored = 0
    for _, e_start, size in blocks:
        if size:
            in_lcs[e_start : e_start + size] = [True] * size
            outcome[e_start : e_start + size] = [_CORRECT] * size
            anchored += size
    if anchored < m:
        # Unanchored answered values sit in the gaps between blocks. Each expected value
        # belongs to one needle: its first unanchored copy (in answer order) is that needle's
        # misorder if the needle is not anchored, every other copy a duplicate.
        halls, dups = batch.hallucinations, batch.duplicates
        key_from = low = 0
        for a_start, e_start, size in blocks:
            for index in range(low, a_start):
                value = values[index]
                if value in known:
                    needle = wanted.index(value)
                    if outcome[needle] is _MISSING:
                        outcome[needle] = _MISORDER
                    else:
                        dups.answer.append(answer)
                        dups.answer_index.append(index)
                        dups.value.append(value)
                        dups.needle_indices.append((needle + 1,))
                else:
                    halls.answer.append(answer)
                    halls.answer_index.append(index)
                    halls.value.append(value)
                    halls.key_from.append(key_from)
                    halls.key_to.append(e_start + 1)  # the terminator gives N + 1
            low = a_start + size
            key_from = e_start + size
    batch.needles.in_lcs.extend(in_lcs)
    batch.needles.outcome.extend(outcome)


def _analyze_any(
    batch: RecallBatch, answer: int, expected: Sequence[Hashable], values: list[Value]
) -> None:
    """The error analysis of one reply by the general functions (any values)."""
    analysis = analyze_errors(expected, values)
    batch.needles.in_lcs.extend(o.in_lcs for o in analysis.needles)
    batch.needles.outcome.extend(o.outcome for o in analysis.needles)
    halls, dups = batch.hallucinations, batch.duplicates
    for h in analysis.hallucinations:
        halls.answer.append(answer)
        halls.answer_index.append(h.answer_index)
        halls.value.append(h.value)
        halls.key_from.append(h.key_from)
        halls.key_to.append(h.key_to)
    for d in analysis.duplicates:
        dups.answer.append(answer)
        dups.answer_index.append(d.answer_index)
        dups.value.append(d.value)
        dups.needle_indices.append(d.needle_indices)
