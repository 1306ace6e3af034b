"""The needle cases in the report: LLM and RAG answers of the same cases side by side (drawn
once, in the cases section), their depth × length heatmaps drilling down to the answers."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from needlescope.warehouse.probes.cases import charts as charts_cases
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report.drilldown.targets import Field, Heatmap, Target
from needlescope.warehouse.report.figures import ProbeCharts, drawn

CASES_AXES = (
    "model",
    "case",
    "mode",
    "rag_mode",
    "filler",
    "prompt_version",
    "length",
    "length_unit",
    "depth",
)


def cases_target(panel_axes: Sequence[str], heatmaps: Sequence[tuple[str, str]]) -> Target:
    """The needle cases' depth × length heatmaps ((chart id, title) each), LLM and RAG
    answers alike: ``panel_axes`` are those their panels are labelled with
    (``charts_cases.panel_axes`` of the grid they were drawn from)."""
    axes = list(panel_axes)
    return Target(
        name="cases",
        probes=("cases", "rag"),
        axes=CASES_AXES,
        fields=(
            Field("panel"),
            Field("setting"),
            Field("length", "length {}"),
            Field("depth", "depth {}%"),
        ),
        label=lambda frame: charts_cases.cell_labels(frame, axes),
        heatmaps=tuple(Heatmap(chart_id, title, "depth") for chart_id, title in heatmaps),
        accuracy="keyword accuracy",
    )


# The cases heatmaps (charts_cases.figures' names), the value each colours its cells by and
# the drill-down panel's title for it.
CASES_HEATMAPS = {
    "cases_keyword_heatmap": ("mean_keyword_accuracy", "Keyword recall"),
    "cases_judge_heatmap": ("mean_judge_score", "Judge score"),
}


def figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts:
    """LLM and RAG answers of the same cases side by side: drawn once, in the cases section
    (the rag section has no charts of its own)."""
    if probe != "cases":
        return ProbeCharts([])
    from needlescope.warehouse.probes.cases import charts as charts_cases

    frames = charts_cases.load(con)
    named = charts_cases.figures(frames)
    heatmaps = [
        (drilldown.page_id("cases", name.removeprefix("cases_")), CASES_HEATMAPS[name][1])
        for name, _ in named
        if name in CASES_HEATMAPS and drawn(frames.grid, CASES_HEATMAPS[name][0])
    ]
    figures = [(name.removeprefix("cases_"), chart) for name, chart in named]
    if not heatmaps:
        return ProbeCharts(figures)
    target = cases_target(charts_cases.panel_axes(frames.grid), heatmaps)
    return ProbeCharts(figures, (target,))
