"""A probe's own charts for its report section (``ProbeCharts``: the charts, and how a click
on those that are heatmaps finds the answers behind a cell, :mod:`.drilldown`), made by its
warehouse side (warehouse/probes/<folder>/report.py) from its own views."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from needlescope.warehouse.charts.shared import Chart
from needlescope.warehouse.report import drilldown

Figures = list[tuple[str, Chart]]


@dataclass(frozen=True)
class ProbeCharts:
    """A probe's own charts (name, chart) and the drill-down targets of its heatmaps, labelled
    after the very frames the heatmaps were drawn from."""

    figures: Figures
    drill: tuple[drilldown.Target, ...] = ()


def frame(con: duckdb.DuckDBPyConnection, view: str) -> pl.DataFrame:
    return con.sql(f"SELECT * FROM {view}").pl()


def drawn(frame: pl.DataFrame, value: str) -> bool:
    """Whether a heatmap of ``value`` has cells (else it is a placeholder)."""
    return value in frame.columns and frame[value].drop_nulls().len() > 0


def probe_figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts | None:
    """The probe's own charts and drill-down, from its warehouse side's ``figures``
    (warehouse/probes/); None for a probe without (recall, whose charts come from the shared
    statistics)."""
    from needlescope.warehouse import probes

    return probes.figures(con, probe)
