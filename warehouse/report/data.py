"""What the report's probe sections show, read once: the statistics table with intervals, and
per probe its pooled figures, per-needle rates and hallucinations."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from needlescope.warehouse.charts.shared import INVALID, varying
from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.stats import tallied
from needlescope.warehouse.store import figures
from needlescope.warehouse.store.figures_tallied import tallied_summary_sql


@dataclass(frozen=True)
class ProbeData:
    probe: str
    stats: pl.DataFrame  # stats.recall_stats rows of this probe
    models: pl.DataFrame  # the same figures pooled per model
    fillers: pl.DataFrame  # pooled per model × filler (× the varying variant axes)
    needles: pl.DataFrame  # stats.needle_rates
    hallucinations: pl.DataFrame  # stats.hallucination_rates


def load(
    con: duckdb.DuckDBPyConnection, unstable_range: float, source: str = "results"
) -> tuple[pl.DataFrame, list[ProbeData]]:
    """The statistics table and each probe's data. Everything pools every epoch, so it is read
    from the tallies (the ``recall_stats`` view, stats/tallied.py, the needle and
    hallucination tallies); ``source`` other than ``results`` (a table of its rows) counts
    the hallucinations over that table instead."""
    # the recall_stats view's rows with each config's values: the intervals without a second
    # query (the unstable configs of the Summary and the Statistics read the same frame)
    stats.set_unstable_range(con, unstable_range)  # as stats.recall_stats sets it
    valued = tallied.flagged(tallied.config_stats(con), unstable_range)
    counts = valued.drop("valued")
    table = tallied.summary_with_intervals(valued, figures.AXES)
    # The needle heatmaps show, beside their rates, the config's invalid answers.
    invalid = table.select(*figures.AXES, *INVALID)
    needles = _joined(stats.needle_rates(con, whole=True), invalid)
    invented = _joined(stats.hallucination_rates(con, source=source, stats_table=counts), invalid)
    probes = []
    for probe in table["probe"].unique(maintain_order=True).to_list():
        rows = table.filter(pl.col("probe") == probe)
        variant = varying(rows, ("needle_count", "prompt_version", "placement", "region"))
        model_axes = ["probe", "model"]
        filler_axes = ["probe", "model", "filler", *variant]
        probes.append(
            ProbeData(
                probe=probe,
                stats=rows,
                models=_pooled(con, model_axes, probe),
                fillers=_pooled(con, filler_axes, probe),
                needles=needles.filter(pl.col("probe") == probe),
                hallucinations=invented.filter(pl.col("probe") == probe),
            )
        )
    return table, probes


def _pooled(con: duckdb.DuckDBPyConnection, axes: list[str], probe: str) -> pl.DataFrame:
    """``probe``'s figures pooled by ``axes``, with the report's intervals."""
    sql = tallied_summary_sql(axes, tallied.PROBE, values=True)
    frame = con.sql(f"{sql} ORDER BY ALL", params={"probe": probe}).pl()
    return tallied.summary_with_intervals(frame, axes)


def _joined(frame: pl.DataFrame, invalid: pl.DataFrame) -> pl.DataFrame:
    return frame.join(invalid, on=list(figures.AXES), how="left", nulls_equal=True)
