"""Each probe's own charts, read from its own views, for the report's probe sections, and how
a click on those that are heatmaps finds the answers behind a cell (:mod:`.drilldown`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import polars as pl

from needlescope.warehouse.charts import counting_stars as charts_stars
from needlescope.warehouse.charts import goto as charts_goto
from needlescope.warehouse.charts.shared import Chart
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report import figures_own as own_figures

Figures = list[tuple[str, Chart]]


@dataclass(frozen=True)
class ProbeCharts:
    """A probe's own charts (name, chart) and the drill-down targets of its heatmaps, labelled
    after the very frames the heatmaps were drawn from."""

    figures: Figures
    drill: tuple[drilldown.Target, ...] = ()


def _frame(con: duckdb.DuckDBPyConnection, view: str) -> pl.DataFrame:
    return con.sql(f"SELECT * FROM {view}").pl()


def _drawn(frame: pl.DataFrame, value: str) -> bool:
    """Whether a heatmap of ``value`` has cells (else it is a placeholder)."""
    return value in frame.columns and frame[value].drop_nulls().len() > 0


def counting_stars(con: duckdb.DuckDBPyConnection) -> ProbeCharts:
    by_index = _frame(con, "stars_by_index")
    figures = [
        ("star_index", charts_stars.star_index_heatmap(by_index)),
        (
            "accuracy_by_length",
            charts_stars.stars_accuracy_by_length(_frame(con, "stars_accuracy_by_length")),
        ),
        ("weighted_score", charts_stars.stars_weighted_scores(_frame(con, "stars_scores"))),
    ]
    if not _drawn(by_index, "share_found"):
        return ProbeCharts(figures)
    target = drilldown.stars_target(
        charts_stars.variant_axes(by_index), drilldown.page_id("counting_stars", "star_index")
    )
    return ProbeCharts(figures, (target,))


def goto(con: duckdb.DuckDBPyConnection) -> ProbeCharts:
    # a line chart and a histogram: no heatmap to drill into
    return ProbeCharts(
        [
            ("success_by_n", charts_goto.success_by_n(_frame(con, "goto_success"))),
            ("wrong_offsets", charts_goto.wrong_offsets(_frame(con, "goto_wrong_offsets"))),
        ]
    )


# The cases heatmaps (charts_cases.figures' names), the value each colours its cells by and
# the drill-down panel's title for it.
CASES_HEATMAPS = {
    "cases_keyword_heatmap": ("mean_keyword_accuracy", "Keyword recall"),
    "cases_judge_heatmap": ("mean_judge_score", "Judge score"),
}


def cases(con: duckdb.DuckDBPyConnection) -> ProbeCharts:
    """LLM and RAG answers of the same cases side by side: drawn once, in the cases section."""
    from needlescope.warehouse.charts import cases as charts_cases

    frames = charts_cases.load(con)
    named = charts_cases.figures(frames)
    heatmaps = [
        (drilldown.page_id("cases", name.removeprefix("cases_")), CASES_HEATMAPS[name][1])
        for name, _ in named
        if name in CASES_HEATMAPS and _drawn(frames.grid, CASES_HEATMAPS[name][0])
    ]
    figures = [(name.removeprefix("cases_"), chart) for name, chart in named]
    if not heatmaps:
        return ProbeCharts(figures)
    target = drilldown.cases_target(charts_cases.panel_axes(frames.grid), heatmaps)
    return ProbeCharts(figures, (target,))


def ruler(family: str) -> Callable[[duckdb.DuckDBPyConnection], ProbeCharts]:
    """A RULER family's score by length; niah's depth × length heatmap, which drills down."""
    from needlescope.warehouse.charts import ruler as charts_ruler

    def figures(con: duckdb.DuckDBPyConnection) -> ProbeCharts:
        scores = _frame(con, "ruler_scores")
        found = [("score_by_length", charts_ruler.score_by_length(scores, family))]
        if family != "niah":
            return ProbeCharts(found)
        grid = charts_ruler.niah_grid(_frame(con, "niah_results"))
        found.append(("depth_heatmap", charts_ruler.depth_heatmap(grid)))
        if not _drawn(grid, "mean_score"):
            return ProbeCharts(found)
        return ProbeCharts(
            found, (drilldown.niah_target(drilldown.page_id("niah", "depth_heatmap")),)
        )

    return figures


FIGURES: dict[str, Callable[[duckdb.DuckDBPyConnection], ProbeCharts]] = {
    "counting_stars": counting_stars,
    "goto": goto,
    "cases": cases,
    "rag": lambda con: ProbeCharts([]),  # its charts are the cases section's LLM-vs-RAG ones
    "niah": ruler("niah"),
    "variable_tracking": ruler("variable_tracking"),
    "aggregation": ruler("aggregation"),
    "mrcr": lambda con: ProbeCharts(own_figures.mrcr(con)),
    "latent_list": lambda con: ProbeCharts(own_figures.latent_list(con)),
}


def probe_figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts | None:
    """The probe's own charts and drill-down; None for recall, whose charts come from the
    shared statistics."""
    maker = FIGURES.get(probe)
    return maker(con) if maker else None
