"""Effective context length, RULER's absolute rule and NoLiMa's relative one, by hand."""

from __future__ import annotations

import math

import pytest

from needlescope.grading._effective_length import (
    RULER_THRESHOLD,
    longest_sustained,
    nolima_base_score,
    nolima_effective_length,
    ruler_effective_length,
)


def test_ruler_rule_worked_table() -> None:
    table = {4000: 92.0, 8000: 88.1, 16000: 85.6, 32000: 86.0, 64000: 70.2, 128000: 90.0}
    # 4K, 8K, 16K (exactly 85.6) and 32K pass; 64K fails, so 128K's 90.0 does not count.
    assert RULER_THRESHOLD == 85.6
    assert ruler_effective_length(table) == 32000
    assert ruler_effective_length(table, threshold=88.0) == 8000
    assert ruler_effective_length(table, threshold=95.0) is None  # the shortest fails
    assert ruler_effective_length({}) is None
    # order does not matter; a length without a mean fails
    assert ruler_effective_length([(8000, None), (4000, 99.0), (16000, 99.0)]) == 4000
    assert ruler_effective_length({4000: 99.0, 8000: math.nan}) == 4000


@pytest.mark.parametrize(
    ("row", "effective"),
    [
        # RULER's README (4K … 128K): Llama3.1 (8B) 32K, GLM4 (9B) 64K, DBRX 8K, LWM (7B) <4K.
        ((95.5, 93.8, 91.6, 87.4, 84.7, 77.0), 32768),
        ((94.7, 92.8, 92.1, 89.9, 86.7, 83.1), 65536),
        ((95.1, 93.8, 83.6, 63.1, 2.4, 0.0), 8192),
        ((82.3, 78.4, 73.7, 69.1, 68.1, 65.0), None),
    ],
)
def test_ruler_rule_reproduces_rulers_table(row: tuple[float, ...], effective: int | None) -> None:
    lengths = [4096 * 2**i for i in range(6)]
    assert ruler_effective_length(dict(zip(lengths, row, strict=True))) == effective


def test_nolima_rule_worked_table() -> None:
    table = {250: 98.0, 500: 96.0, 1000: 94.0, 2000: 90.0, 4000: 81.0, 8000: 70.0}
    # base = (98 + 96 + 94) / 3 = 96.0; threshold = 0.85 × 96 = 81.6: 4K's 81.0 fails.
    result = nolima_effective_length(table)
    assert result is not None
    assert result.base.score == 96.0 and result.base.lengths == (250, 500, 1000)
    assert not result.base.fallback
    assert result.threshold == pytest.approx(81.6)
    assert result.length == 2000


def test_nolima_rule_reproduces_nolimas_table() -> None:
    # NoLiMa's README: GPT-4o, base 99.3 (threshold 84.4), 1K … 32K below; effective 8K.
    # 250 and 500 at 99.9 give that base with 1K's 98.1.
    row = {250: 99.9, 500: 99.9, 1000: 98.1, 2000: 98.0, 4000: 95.7, 8000: 89.2, 16000: 81.6}
    result = nolima_effective_length({**row, 32000: 69.7})
    assert result is not None
    assert result.base.score == pytest.approx(99.3)
    assert round(result.threshold, 1) == 84.4
    assert result.length == 8000
    # Llama 3.3 70B: base 97.3 → 82.7; 1K 94.2, 2K 87.4, 4K 81.5: effective 2K.
    assert longest_sustained({1000: 94.2, 2000: 87.4, 4000: 81.5, 8000: 72.1}, 0.85 * 97.3) == 2000


def test_nolima_base_when_its_lengths_are_missing() -> None:
    # Only 1K of NoLiMa's three: the base is 1K's mean alone.
    partial = nolima_base_score({1000: 90.0, 2000: 85.0, 4000: 70.0})
    assert partial is not None and partial.score == 90.0 and partial.lengths == (1000,)
    result = nolima_effective_length({1000: 90.0, 2000: 85.0, 4000: 70.0})
    assert result is not None and result.threshold == pytest.approx(76.5)
    assert result.length == 2000
    # None of them (a grid from 4K): the three shortest lengths stand in.
    table = {4000: 90.0, 8000: 80.0, 16000: 76.0, 32000: 60.0}
    fallback = nolima_effective_length(table)
    assert fallback is not None
    assert fallback.base.fallback and fallback.base.lengths == (4000, 8000, 16000)
    assert fallback.base.score == 82.0 and fallback.threshold == pytest.approx(69.7)
    assert fallback.length == 16000
    # A base length without a mean is not part of the base; no mean at all, no answer.
    skipped = nolima_base_score({250: None, 500: 80.0, 1000: 100.0})
    assert skipped is not None and skipped.lengths == (500, 1000) and skipped.score == 90.0
    assert nolima_effective_length({1000: None}) is None


def test_relative_rule_counts_from_the_shortest_length() -> None:
    # 250 falls below 85% of the base (its own low score drags): nothing is sustained.
    result = nolima_effective_length({250: 50.0, 500: 100.0, 1000: 100.0, 2000: 100.0})
    assert result is not None and result.length is None


def test_duplicate_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="several rows for one length"):
        ruler_effective_length([(4000, 90.0), (4000, 80.0)])


def test_both_rules_with_their_intervals_worked_by_hand() -> None:
    """(length, mean, interval low, interval high), one model:

    RULER at 85.6: means 98 96 94 90 pass, 80 fails -> 2000; lows 95 90 88 pass, 84 fails
    -> 1000; highs 100 99 97 95 88 pass, 70 fails -> 4000.
    NoLiMa: base (98 + 96 + 94) / 3 = 96, threshold 0.85 x 96 = 81.6: means -> 2000 (80
    fails); lows 95 90 88 84 pass, 70 fails -> 2000; highs 88 passes, 70 fails -> 4000.
    """
    from needlescope.grading._effective_length import both_rules

    rows = [
        (250, 98.0, 95.0, 100.0),
        (500, 96.0, 90.0, 99.0),
        (1000, 94.0, 88.0, 97.0),
        (2000, 90.0, 84.0, 95.0),
        (4000, 80.0, 70.0, 88.0),
        (8000, 60.0, 50.0, 70.0),
    ]
    both = both_rules(rows)
    assert (both.ruler, both.ruler_lo, both.ruler_hi, both.threshold) == (2000, 1000, 4000, 85.6)
    assert both.nolima_threshold == pytest.approx(81.6)
    assert (both.nolima, both.nolima_lo, both.nolima_hi) == (2000, 2000, 4000)
    assert both.base is not None and both.base.lengths == (250, 500, 1000)
    # --threshold moves the absolute rule only
    assert both_rules(rows, threshold=95.0).ruler == 500
    assert both_rules(rows, threshold=95.0).nolima == 2000


def test_default_threshold_is_rulers_for_rulers_probes() -> None:
    from needlescope.grading._effective_length import default_threshold

    assert [default_threshold(p) for p in ("niah", "variable_tracking", "aggregation")] == [
        85.6
    ] * 3
    assert default_threshold("recall") == 85.0 and default_threshold("goto") == 85.0
