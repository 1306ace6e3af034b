"""Grading a batch of recall replies into columns, the way the sweep stores them.
(``_analyze_ops`` runs past 60 lines: the hot loop over edit operations, kept whole for speed.)

For reply i: the figures of ``grade_recall(expected[i], responses[i])`` and the rows of
``analyze_errors(expected[i], answered)``, per-needle results as column slices. Fast paths
(``bench/bench_grading.py``): an exact answer skips the analysis, and plain ints go to
rapidfuzz's C code, its LCS traceback corrected to the seed's tie rule; anything else takes the
general path, to which the tests pin the fast ones.

Design: docs/design/grading.md#recall-batch
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from itertools import repeat

from rapidfuzz.distance import LCSseq

from needlescope.grading.recall.analysis import Outcome, analyze_errors, seed_blocks
from needlescope.grading.recall.parse import read_reply
from needlescope.grading.recall.score import RecallGrade, grade_reading, score
from needlescope.grading.recall.values import (
    INT_TYPES,
    Value,
    canonical_value,
    in_code_range,
    plain_ints,
)

_CORRECT: Outcome = "correct"
_MISORDER: Outcome = "misorder"
_MISSING: Outcome = "missing"


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
    """A batch of graded replies: a :class:`RecallGrade` per reply, and the error analysis of
    :func:`analyze_errors` of every counted reply as columns."""

    grades: list[RecallGrade] = field(default_factory=list)
    needles: NeedleColumns = field(default_factory=NeedleColumns)
    hallucinations: HallucinationColumns = field(default_factory=HallucinationColumns)
    duplicates: DuplicateColumns = field(default_factory=DuplicateColumns)

    def __len__(self) -> int:
        return len(self.grades)

    def add(self, grade: RecallGrade) -> None:
        self.grades.append(grade)

    def grade(self, index: int) -> RecallGrade:
        """Reply ``index``'s grade, as :func:`grade_recall` gives it."""
        return self.grades[index]


def grade_recall_batch(
    expected: Sequence[Sequence[int]], responses: Sequence[object]
) -> RecallBatch:
    """Grade many replies at once: for reply i, the figures of ``grade_recall(expected[i],
    responses[i])`` and the rows of ``analyze_errors(expected[i], answered)``, as columns."""
    batch = RecallBatch()
    needles = batch.needles
    add_answers, add_indices, add_expected, add_in_lcs, add_outcomes = (
        needles.answer.extend,
        needles.needle_index.extend,
        needles.expected.extend,
        needles.in_lcs.extend,
        needles.outcome.extend,
    )
    for answer, (wanted_raw, response) in enumerate(zip(expected, responses, strict=True)):
        reading = read_reply(response)
        values = reading.values
        if values is None:
            batch.add(grade_reading(wanted_raw, reading))
            continue
        wanted = wanted_raw if type(wanted_raw) is list else list(wanted_raw)
        n = len(wanted)
        add_answers(repeat(answer, n))
        add_indices(range(1, n + 1))
        # plain: the expected values are ints, their own canonical form (the usual case)
        plain = set(map(type, wanted)) <= INT_TYPES
        if plain:
            add_expected(wanted)
            if reading.keyed and values == wanted:  # every needle anchored in place
                batch.add(RecallGrade(True, None, 100.0, 0, n, 0, 0, 0, tuple(values)))
                add_in_lcs(repeat(True, n))
                add_outcomes(repeat(_CORRECT, n))
                continue
            direct = reading.ints and in_code_range(wanted) and in_code_range(values)  # type: ignore[arg-type]
        else:
            wanted = [canonical_value(v) for v in wanted]
            add_expected(wanted)
            direct = reading.ints and plain_ints(wanted) and in_code_range(values)  # type: ignore[arg-type]
        distance, accuracy, correct, missing, extra, wrong = score(
            wanted, values, reading.obj, direct
        )
        batch.add(
            RecallGrade(
                True, None, accuracy, distance, correct, missing, extra, wrong, tuple(values)
            )
        )
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
    blocks = seed_blocks(wanted, values)
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
