"""MRCR chart builders: a frame from the mrcr_scores view in, an Altair chart out. No I/O."""

from __future__ import annotations

import polars as pl

from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.charts.shared import Chart

NO_MRCR = "No MRCR answers yet: nothing to chart."
_TOOLTIP = ("answers", "bin_low", "bin_high", "wrong_occurrences", "invalid")


def _needles_rows(frame: pl.DataFrame) -> list[int]:
    return sorted(v for v in frame["needles"].unique().to_list() if v is not None)


def score_heatmap(frame: pl.DataFrame) -> Chart:
    """OpenAI's score (mean ratio × 100) by length × needles, one panel per model."""
    return charts.heatmap(
        frame,
        value="mean_score",
        x="length",
        y="needles",
        y_sort=_needles_rows(frame) if "needles" in frame.columns else None,
        title="MRCR: score by length and needles",
        subtitle="OpenAI's rule: 0 without the nonce, else the SequenceMatcher ratio × 100",
        x_title="conversation length (target)",
        y_title="repeats of the asked request",
        value_title="mean score",
        tooltip=[*_TOOLTIP, "nonce_hit_rate"],
        empty_message=NO_MRCR,
    )


def nonce_heatmap(frame: pl.DataFrame) -> Chart:
    """How often the answer started with the nonce, by length × needles."""
    return charts.heatmap(
        frame,
        value="nonce_hit_rate",
        x="length",
        y="needles",
        y_sort=_needles_rows(frame) if "needles" in frame.columns else None,
        title="MRCR: nonce hit rate by length and needles",
        subtitle="answers that start with the nonce (%)",
        x_title="conversation length (target)",
        y_title="repeats of the asked request",
        value_title="nonce hits (%)",
        tooltip=[*_TOOLTIP, "mean_score"],
        empty_message=NO_MRCR,
    )
