"""Effective context length, two ways, over a table of (length, mean score) pairs.

RULER's absolute rule: the longest length whose mean score is at least a threshold there and at
every shorter length tested (RULER's threshold: 85.6). NoLiMa's relative rule: the same, with
85% of the model's own base score (its accuracy at short contexts) as the threshold. Scores are
0–100; a missing mean fails; applied to an interval's bounds, the rules give the interval.

Design: docs/design/grading.md#effective-length
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

RULER_THRESHOLD = 85.6
NOLIMA_RATIO = 0.85
NOLIMA_BASE_LENGTHS: tuple[int, ...] = (250, 500, 1000)
NOLIMA_FALLBACK_COUNT = 3

Table = Mapping[int, float | None] | Iterable[tuple[int, float | None]]


def _rows(table: Table) -> list[tuple[int, float | None]]:
    """The table sorted by length, a missing or NaN mean as None; one row per length."""
    items = list(table.items() if isinstance(table, Mapping) else table)
    lengths = [length for length, _ in items]
    if len(set(lengths)) != len(lengths):
        raise ValueError("the table has several rows for one length: pool them first")
    return sorted(
        (length, None if mean is None or math.isnan(mean) else float(mean))
        for length, mean in items
    )


def longest_sustained(table: Table, threshold: float) -> int | None:
    """The longest length whose mean is >= ``threshold`` there and at every shorter length;
    None when the shortest length already fails (or the table is empty)."""
    best: int | None = None
    for length, mean in _rows(table):
        if mean is None or mean < threshold:
            break
        best = length
    return best


def ruler_effective_length(table: Table, threshold: float = RULER_THRESHOLD) -> int | None:
    """RULER's effective length: ``longest_sustained`` at an absolute threshold."""
    return longest_sustained(table, threshold)


@dataclass(frozen=True)
class BaseScore:
    """NoLiMa's base score: the mean of the means at ``lengths``; ``fallback`` when none of the
    base lengths was tested and the shortest lengths stood in for them."""

    score: float
    lengths: tuple[int, ...]
    fallback: bool


def nolima_base_score(
    table: Table,
    base_lengths: Sequence[int] = NOLIMA_BASE_LENGTHS,
    fallback_count: int = NOLIMA_FALLBACK_COUNT,
) -> BaseScore | None:
    """The unweighted mean of the means at those of ``base_lengths`` that have one. When none
    has (a grid that starts higher, or lengths in another unit), the mean at the
    ``fallback_count`` shortest lengths that have one: NoLiMa's three shortest, generalised.
    None when no length has a mean."""
    scored = [(length, mean) for length, mean in _rows(table) if mean is not None]
    chosen = [(length, mean) for length, mean in scored if length in set(base_lengths)]
    fallback = not chosen
    if fallback:
        chosen = scored[:fallback_count]
    if not chosen:
        return None
    means = [mean for _, mean in chosen]
    return BaseScore(math.fsum(means) / len(means), tuple(length for length, _ in chosen), fallback)


@dataclass(frozen=True)
class RelativeLength:
    """NoLiMa's effective length, with the threshold it used (``ratio`` × base score)."""

    length: int | None
    threshold: float
    base: BaseScore


def nolima_effective_length(
    table: Table,
    ratio: float = NOLIMA_RATIO,
    base_lengths: Sequence[int] = NOLIMA_BASE_LENGTHS,
    fallback_count: int = NOLIMA_FALLBACK_COUNT,
) -> RelativeLength | None:
    """NoLiMa's effective length: ``longest_sustained`` at ``ratio`` × the model's base score
    (see ``nolima_base_score``); None when no length has a mean."""
    base = nolima_base_score(table, base_lengths, fallback_count)
    if base is None:
        return None
    threshold = ratio * base.score
    return RelativeLength(longest_sustained(table, threshold), threshold, base)


# RULER's probes take RULER's threshold; the seed probes keep needlescope's earlier default
# (85%: none of the four seeds defines an effective length).
SEED_THRESHOLD = 85.0


def default_threshold(probe: str) -> float:
    """The absolute rule's threshold when none is given: 85.6 for RULER's probes, else 85."""
    return RULER_THRESHOLD if ruler_family(probe) else SEED_THRESHOLD


@dataclass(frozen=True)
class Both:
    """Effective length by both rules, each with its interval: the rule applied to the means,
    and to each length's interval bounds (NoLiMa's threshold stays the one the means give)."""

    ruler: int | None
    ruler_lo: int | None
    ruler_hi: int | None
    threshold: float
    nolima: int | None
    nolima_lo: int | None
    nolima_hi: int | None
    nolima_threshold: float | None
    base: BaseScore | None


def both_rules(
    rows: Iterable[tuple[int, float | None, float | None, float | None]],
    threshold: float = RULER_THRESHOLD,
) -> Both:
    """``rows``: (length, mean, interval low, interval high) of one model, one row a length."""
    table = list(rows)
    means = [(length, mean) for length, mean, _, _ in table]
    lows = [(length, low) for length, _, low, _ in table]
    highs = [(length, high) for length, _, _, high in table]
    relative = nolima_effective_length(means)
    limit = relative.threshold if relative is not None else None
    return Both(
        ruler=longest_sustained(means, threshold),
        ruler_lo=longest_sustained(lows, threshold),
        ruler_hi=longest_sustained(highs, threshold),
        threshold=threshold,
        nolima=relative.length if relative is not None else None,
        nolima_lo=longest_sustained(lows, limit) if limit is not None else None,
        nolima_hi=longest_sustained(highs, limit) if limit is not None else None,
        nolima_threshold=limit,
        base=relative.base if relative is not None else None,
    )


def ruler_family(probe: str) -> bool:
    """Whether ``probe`` is one of RULER's families (its declaration says ``ruler``)."""
    from needlescope.probes.catalog import specs

    found = specs().get(probe)
    return found is not None and found.ruler
