"""The seed's error analysis of a counted answer, from the longest common subsequence (LCS).

A needle is recalled in order when it belongs to the LCS of the expected and answered values
(traced back from the ends, preferring a step back in the *answered* sequence on ties: the
seed's rule). Outside it: *misorders*, *hallucinations*, *duplicates* and *missing* needles.
``needle_index``, ``key_from`` and ``key_to`` are 1-based needle numbers; ``answer_index`` and
the pairs of :func:`lcs_anchors` are 0-based positions in the value sequences.

Design: docs/design/grading.md#recall-analysis
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeAlias

from rapidfuzz.distance import LCSseq

from needlescope.grading.recall.values import Value, canonical_value, plain_ints, to_ids

Outcome: TypeAlias = Literal["correct", "misorder", "missing"]

# The per-needle records are NamedTuples: immutable, and several times cheaper to build than
# dataclasses. The batch grader does not build them at all.


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


def seed_blocks(expected: list[int], answered: list[int]) -> list[Block]:
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
    if plain_ints(expected) and len(set(expected)) == n and plain_ints(answered):
        return [
            (e_start + k, a_start + k)
            for a_start, e_start, size in seed_blocks(list(expected), list(answered))  # type: ignore[arg-type]
            for k in range(size)
        ]
    return _bit_parallel_anchors(expected, answered)


def _bit_parallel_anchors(
    expected: Sequence[Hashable], answered: Sequence[Hashable]
) -> list[tuple[int, int]]:
    """:func:`lcs_anchors` for any values (repeated expected values included)."""
    n, m = len(expected), len(answered)
    e_ids, a_ids = to_ids(expected, answered)
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
