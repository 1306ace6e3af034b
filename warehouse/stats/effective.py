"""Effective context length both ways (needlescope/grading/_effective_length.py: RULER's
absolute rule and NoLiMa's relative one) over the warehouse's answers, each with its
interval: the rule applied to each length's seeded bootstrap 95% interval bounds
(``accuracy.accuracy_table``, every answer at a length pooled)."""

from __future__ import annotations

import duckdb
import polars as pl

from needlescope.grading import both_rules, default_threshold
from needlescope.warehouse.stats.accuracy import EFFECTIVE_LENGTH_AXES, accuracy_table

KEYS = ("model", "probe", "length_unit")
COLUMNS = {
    "model": pl.Utf8,
    "probe": pl.Utf8,
    "length_unit": pl.Utf8,
    "threshold": pl.Float64,
    "effective_length": pl.Int64,
    "effective_length_lo": pl.Int64,
    "effective_length_hi": pl.Int64,
    "nolima_base": pl.Float64,
    "nolima_base_lengths": pl.Utf8,
    "nolima_threshold": pl.Float64,
    "nolima_effective_length": pl.Int64,
    "nolima_effective_length_lo": pl.Int64,
    "nolima_effective_length_hi": pl.Int64,
    "lengths_tested": pl.Int64,
    "longest_tested": pl.Int64,
}


def effective_both(
    con: duckdb.DuckDBPyConnection,
    *,
    probe: str,
    epoch: str | None = None,
    threshold: float | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """One row per model (and length unit) of ``probe``: both effective lengths, by the means
    and by the lower and upper interval bounds. ``threshold``: the absolute rule's (default
    85.6 for RULER's probes, 85 for the others); NoLiMa's is 85% of the model's base score."""
    chosen = default_threshold(probe) if threshold is None else threshold
    table = accuracy_table(con, probe=probe, axes=EFFECTIVE_LENGTH_AXES, epoch=epoch, seed=seed)
    found = []
    for key, group in table.sort([*KEYS, "length"]).group_by(list(KEYS), maintain_order=True):
        rows = group.select("length", "mean_accuracy", "accuracy_lo", "accuracy_hi").iter_rows()
        both = both_rules(rows, chosen)
        base = both.base
        found.append(
            {
                **dict(zip(KEYS, key, strict=True)),
                "threshold": both.threshold,
                "effective_length": both.ruler,
                "effective_length_lo": both.ruler_lo,
                "effective_length_hi": both.ruler_hi,
                "nolima_base": base.score if base else None,
                "nolima_base_lengths": (
                    ", ".join(str(n) for n in base.lengths)
                    + (" (shortest)" if base.fallback else "")
                    if base
                    else None
                ),
                "nolima_threshold": both.nolima_threshold,
                "nolima_effective_length": both.nolima,
                "nolima_effective_length_lo": both.nolima_lo,
                "nolima_effective_length_hi": both.nolima_hi,
                "lengths_tested": group.height,
                "longest_tested": group["length"].max(),
            }
        )
    return pl.DataFrame(found, schema=COLUMNS)
