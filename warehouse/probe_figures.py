"""Each probe's own charts, read from its own views, for the report's probe sections."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import polars as pl

from needlescope.warehouse import charts_goto, charts_stars
from needlescope.warehouse.charts import Chart

Figures = list[tuple[str, Chart]]


def _frame(con: duckdb.DuckDBPyConnection, view: str) -> pl.DataFrame:
    return con.sql(f"SELECT * FROM {view}").pl()


def counting_stars(con: duckdb.DuckDBPyConnection) -> Figures:
    return [
        ("star_index", charts_stars.star_index_heatmap(_frame(con, "stars_by_index"))),
        (
            "accuracy_by_length",
            charts_stars.stars_accuracy_by_length(_frame(con, "stars_accuracy_by_length")),
        ),
        ("weighted_score", charts_stars.stars_weighted_scores(_frame(con, "stars_scores"))),
    ]


def goto(con: duckdb.DuckDBPyConnection) -> Figures:
    return [
        ("success_by_n", charts_goto.success_by_n(_frame(con, "goto_success"))),
        ("wrong_offsets", charts_goto.wrong_offsets(_frame(con, "goto_wrong_offsets"))),
    ]


def cases(con: duckdb.DuckDBPyConnection) -> Figures:
    """LLM and RAG answers of the same cases side by side: drawn once, in the cases section."""
    from needlescope.warehouse import charts_cases

    figures = charts_cases.figures(charts_cases.load(con))
    return [(name.removeprefix("cases_"), chart) for name, chart in figures]


FIGURES: dict[str, Callable[[duckdb.DuckDBPyConnection], Figures]] = {
    "counting_stars": counting_stars,
    "goto": goto,
    "cases": cases,
    "rag": lambda con: [],  # its charts are the cases section's LLM-vs-RAG ones
}


def probe_figures(con: duckdb.DuckDBPyConnection, probe: str) -> Figures | None:
    """The probe's own charts; None for recall, whose charts come from the shared statistics."""
    maker = FIGURES.get(probe)
    return maker(con) if maker else None
