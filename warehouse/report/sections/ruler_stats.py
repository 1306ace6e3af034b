"""RULER's probes in the "Statistics" section: effective context length both ways, each with
its interval (warehouse/stats/effective.py), and where each rule comes from."""

from __future__ import annotations

import duckdb

from needlescope.grading import NOLIMA_RATIO
from needlescope.warehouse.report.html import esc, failed, number, table
from needlescope.warehouse.stats.effective import effective_both

RULES_NOTE = (
    "<p class='muted'><b>RULER's rule</b> (Hsieh et al., 2024, github.com/NVIDIA/RULER): the "
    "longest length whose mean score is at least the threshold there and at every shorter "
    "length (RULER's threshold, 85.6, is Llama-2-7B's score at 4K). <b>NoLiMa's rule</b> "
    "(Modarressi et al., ICML 2025): the same, at {ratio:g}% of the model's own base score, the "
    "mean at 250, 500 and 1K tokens (else at its three shortest lengths). Each range applies "
    "the rule to the lower and upper bounds of each length's bootstrap 95% interval "
    "(NoLiMa's threshold stays the one the means give).</p>"
)


def _length(value: object) -> str:
    return "none" if value is None else number(value)


def _range(low: object, high: object) -> str:
    return f"{_length(low)} – {_length(high)}"


def ruler_effective(con: duckdb.DuckDBPyConnection, probe: str, threshold: float, seed: int) -> str:
    """Both effective lengths of a RULER probe per model, with their ranges."""
    try:
        frame = effective_both(con, probe=probe, threshold=threshold, seed=seed)
    except (duckdb.Error, ValueError) as exc:
        return failed("effective context lengths", exc)
    if frame.is_empty():
        return "<p class='muted'>No answers.</p>"
    rows = [
        [
            esc(r["model"]),
            _length(r["effective_length"]),
            _range(r["effective_length_lo"], r["effective_length_hi"]),
            number(r["nolima_base"]),
            esc(r["nolima_base_lengths"] or ""),
            number(r["nolima_threshold"]),
            _length(r["nolima_effective_length"]),
            _range(r["nolima_effective_length_lo"], r["nolima_effective_length_hi"]),
            number(r["lengths_tested"]),
            number(r["longest_tested"]),
        ]
        for r in frame.iter_rows(named=True)
    ]
    headers = [
        "model",
        f"RULER's rule ({threshold:g})",
        "by the interval bounds",
        "base score",
        "base lengths",
        "NoLiMa threshold",
        "NoLiMa's rule",
        "by the interval bounds",
        "lengths tested",
        "longest tested",
    ]
    numeric = [False, True, True, True, False, True, True, True, True, True]
    return (
        table(headers, rows, numeric=numeric)
        + RULES_NOTE.format(ratio=NOLIMA_RATIO * 100)
        + "<p class='muted'>none: below the threshold already at the shortest length tested</p>"
    )
