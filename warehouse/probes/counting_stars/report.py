"""Counting-Stars in the report: the star-index heatmap (which drills down to the answers),
accuracy by length and the weighted score."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from needlescope.warehouse.probes.counting_stars import charts as charts_stars
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report.drilldown.targets import MODEL_VARIANT_LENGTH, Heatmap, Target
from needlescope.warehouse.report.figures import ProbeCharts, drawn, frame

STARS_AXES = (
    "model",
    "length",
    "length_unit",
    "stars",
    "language",
    "order",
    "reasoning",
    "filler",
    "prompt_version",
)


def stars_target(variants: Sequence[str], chart_id: str) -> Target:
    """Counting-Stars' star-index heatmap: ``variants`` are the axes its blocks are labelled
    with (``charts_stars.variant_axes`` of the frame it was drawn from)."""
    axes = list(variants)
    return Target(
        name="counting_stars",
        probes=("counting_stars",),
        axes=STARS_AXES,
        fields=MODEL_VARIANT_LENGTH,
        label=lambda frame: charts_stars.label(frame, axes, "variant"),
        heatmaps=(Heatmap(chart_id, "Stars found", "needle_index", "star {}"),),
    )


def figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts:
    by_index = frame(con, "stars_by_index")
    figures = [
        ("star_index", charts_stars.star_index_heatmap(by_index)),
        (
            "accuracy_by_length",
            charts_stars.stars_accuracy_by_length(frame(con, "stars_accuracy_by_length")),
        ),
        ("weighted_score", charts_stars.stars_weighted_scores(frame(con, "stars_scores"))),
    ]
    if not drawn(by_index, "share_found"):
        return ProbeCharts(figures)
    target = stars_target(
        charts_stars.variant_axes(by_index), drilldown.page_id("counting_stars", "star_index")
    )
    return ProbeCharts(figures, (target,))
