"""RULER's charts: a frame from the ruler views in, an Altair chart out. No I/O here.

Each family's score by length (a line per task: niah preset, vt, cwe, fwe; a panel per
model), and niah's depth × length heatmap (the depth of the needle holding the first expected
value, its mean score, every answer as RULER counts them).
"""

from __future__ import annotations

import polars as pl

from needlescope.warehouse.charts import lines
from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.charts.shared import Chart

FAMILY_TITLES = {
    "niah": "RULER niah: score by length",
    "variable_tracking": "RULER variable tracking: score by length",
    "aggregation": "RULER aggregation (cwe, fwe): score by length",
}
SCORE_SUBTITLE = "string_match_all: mean share of expected strings found × 100, every answer"


def score_by_length(frame: pl.DataFrame, family: str) -> Chart:
    """One family's scores (a ruler_scores frame): a line per task, a panel per model."""
    title = FAMILY_TITLES[family]
    data = frame.filter((pl.col("family") == family) & pl.col("score").is_not_null())
    if data.is_empty():
        return charts.placeholder(title, "No answers yet: nothing to chart.")
    extra = charts.varying(data, ["length_budget", "prompt_version"])
    data = charts.with_label(data, ["task", *extra], "series")
    panel = "model" if data["model"].n_unique() > 1 else None
    return lines.accuracy_by_length(
        data,
        color="series",
        panel=panel,
        y="score",
        low=None,
        high=None,
        x_title="context length (tokens)",
        color_title="task",
        title=title,
        subtitle=SCORE_SUBTITLE,
    )


def niah_grid(results: pl.DataFrame) -> pl.DataFrame:
    """niah's mean score per model, preset, length and depth (a niah_results frame)."""
    scored = results.filter(pl.col("score").is_not_null() & pl.col("depth").is_not_null())
    if scored.is_empty():
        return pl.DataFrame(
            schema={
                "model": pl.Utf8,
                "preset": pl.Utf8,
                "length": pl.Int64,
                "depth": pl.Float64,
                "answers": pl.UInt32,
                "mean_score": pl.Float64,
            }
        )
    return (
        scored.with_columns(pl.col("preset").fill_null("niah"))
        .group_by("model", "preset", "length", "depth")
        .agg(pl.len().alias("answers"), pl.col("score").mean().alias("mean_score"))
        .sort("model", "preset", "length", "depth")
    )


def depth_heatmap(grid: pl.DataFrame) -> Chart:
    """Mean score at each depth × length, a panel per model, a block per preset."""
    return charts.heatmap(
        grid,
        value="mean_score",
        x="length",
        y="depth",
        row="preset",  # always: the drill-down's key names the preset
        y_sort=sorted(grid["depth"].unique().to_list()) if not grid.is_empty() else None,
        title="RULER niah: score by needle depth and length",
        subtitle="depth of the needle holding the first expected value; mean string_match_all",
        x_title="context length (tokens)",
        y_title="depth (%)",
        value_title="mean score",
        tooltip=("answers",),
        empty_message="No niah answers yet: nothing to chart.",
    )
