"""RULER's families in the report: each family's score by length; niah's depth × length
heatmap, which drills down to the answers."""

from __future__ import annotations

import duckdb
import polars as pl

from needlescope.warehouse.probes.ruler import charts as charts_ruler
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report.drilldown.targets import Field, Heatmap, Target
from needlescope.warehouse.report.figures import ProbeCharts, drawn, frame

NIAH_AXES = ("model", "niah_preset", "length", "niah_depth")


def niah_target(chart_id: str) -> Target:
    """RULER niah's depth × length heatmap: a block per preset, a panel per model."""
    return Target(
        name="niah",
        probes=("niah",),
        axes=NIAH_AXES,
        fields=(
            Field("model"),
            Field("preset"),
            Field("length", "length {}"),
            Field("depth", "depth {}%"),
        ),
        label=lambda frame: frame.with_columns(
            pl.col("niah_preset").alias("preset"), pl.col("niah_depth").alias("depth")
        ),
        heatmaps=(Heatmap(chart_id, "RULER niah score", "depth"),),
        accuracy="string_match_all",
    )


def figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts:
    """A RULER family's score by length; niah's depth × length heatmap, which drills down."""
    scores = frame(con, "ruler_scores")
    found = [("score_by_length", charts_ruler.score_by_length(scores, probe))]
    if probe != "niah":
        return ProbeCharts(found)
    grid = charts_ruler.niah_grid(frame(con, "niah_results"))
    found.append(("depth_heatmap", charts_ruler.depth_heatmap(grid)))
    if not drawn(grid, "mean_score"):
        return ProbeCharts(found)
    return ProbeCharts(found, (niah_target(drilldown.page_id("niah", "depth_heatmap")),))
