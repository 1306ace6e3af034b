"""latent_list chart builders: a frame from the latent_list_scores view in, an Altair chart
out. No I/O."""

from __future__ import annotations

import polars as pl

from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.charts.shared import Chart

NO_LATENT = "No latent_list answers yet: nothing to chart."
_TOOLTIP = ("answers", "successes", "parse_failures", "invalid", "irrelevant", "query")


def _panelled(frame: pl.DataFrame) -> pl.DataFrame:
    """A panel per model, and per query and irrelevant count when those vary."""
    extra = charts.varying(frame, ["query", "irrelevant", "filler", "prompt_version"])
    return charts.with_label(frame, ["model", *extra], "panel")


def _heatmap(frame: pl.DataFrame, value: str, title: str, subtitle: str, legend: str) -> Chart:
    data = _panelled(frame) if not frame.is_empty() else frame
    return charts.heatmap(
        data,
        value=value,
        x="length",
        y="operations",
        panel="panel" if "panel" in data.columns else "model",
        title=title,
        subtitle=subtitle,
        x_title="context length",
        y_title="operations on x",
        value_title=legend,
        tooltip=[*_TOOLTIP, "mean_score", "mean_consistent_with", "mean_consistent_share"],
        empty_message=NO_LATENT,
    )


def score_heatmap(frame: pl.DataFrame) -> Chart:
    return _heatmap(
        frame,
        "mean_score",
        "Latent list: exact answers by operations and length",
        "answers equal to the final value (%); a reply with nothing to read counts as a miss",
        "exact (%)",
    )


def prefix_heatmap(frame: pl.DataFrame) -> Chart:
    return _heatmap(
        frame,
        "mean_consistent_share",
        "Latent list: how far the answers tracked the list",
        "the longest prefix of the operations the answer is consistent with (% of them)",
        "consistent prefix (%)",
    )
