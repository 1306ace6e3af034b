"""What the report's probe sections show, read once: the statistics table with intervals, and
per probe its pooled figures, per-needle rates and hallucinations."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from needlescope.warehouse.charts.shared import INVALID, varying
from needlescope.warehouse.stats import accuracy, stats
from needlescope.warehouse.store import figures


@dataclass(frozen=True)
class ProbeData:
    probe: str
    stats: pl.DataFrame  # stats.recall_stats rows of this probe
    models: pl.DataFrame  # the same figures pooled per model
    fillers: pl.DataFrame  # pooled per model × filler (× the varying variant axes)
    needles: pl.DataFrame  # stats.needle_rates
    hallucinations: pl.DataFrame  # stats.hallucination_rates


# The columns of `results` the report's statistics read, kept in a temporary table: the
# report reads `results` once (one consistent snapshot) instead of once per statistic.
REPORT_RESULTS = "report_results"
_REPORT_COLUMNS = (
    "run_id",
    "epoch",
    "cell_id",
    *figures.AXES,
    "repeat",
    "error_kind",
    "parse_ok",
    "accuracy",
    "latency_s",
    "validity",
)


def snapshot(con: duckdb.DuckDBPyConnection) -> str:
    columns = ", ".join(f'"{c}"' for c in dict.fromkeys(_REPORT_COLUMNS))
    con.execute(f"CREATE OR REPLACE TEMP TABLE {REPORT_RESULTS} AS SELECT {columns} FROM results")
    return REPORT_RESULTS


def load(
    con: duckdb.DuckDBPyConnection, unstable_range: float, source: str = "results"
) -> tuple[pl.DataFrame, list[ProbeData]]:
    table = accuracy.with_intervals(
        con, stats.recall_stats(con, unstable_range, source=source), figures.AXES, source
    )
    # The needle heatmaps show, beside their rates, the config's invalid answers.
    invalid = table.select(*figures.AXES, *INVALID)
    # the snapshot holds every row of results: the tallies count the same needle rows
    needles = _joined(stats.needle_rates(con, source=source, whole=True), invalid)
    invented = _joined(stats.hallucination_rates(con, source=source), invalid)
    pooled = f"(SELECT * FROM {source} WHERE probe = $probe)"
    probes = []
    for probe in table["probe"].unique(maintain_order=True).to_list():
        rows = table.filter(pl.col("probe") == probe)
        variant = varying(rows, ("needle_count", "prompt_version", "placement", "region"))
        by_model = figures.summary_sql(["probe", "model"], pooled)
        by_filler = figures.summary_sql(["probe", "model", "filler", *variant], pooled)
        params = {"probe": probe}
        models = con.sql(f"{by_model} ORDER BY ALL", params=params).pl()
        fillers = con.sql(f"{by_filler} ORDER BY ALL", params=params).pl()
        filler_axes = ["probe", "model", "filler", *variant]
        probes.append(
            ProbeData(
                probe=probe,
                stats=rows,
                models=accuracy.with_intervals(con, models, ["probe", "model"], pooled, params),
                fillers=accuracy.with_intervals(con, fillers, filler_axes, pooled, params),
                needles=needles.filter(pl.col("probe") == probe),
                hallucinations=invented.filter(pl.col("probe") == probe),
            )
        )
    return table, probes


def _joined(frame: pl.DataFrame, invalid: pl.DataFrame) -> pl.DataFrame:
    return frame.join(invalid, on=list(figures.AXES), how="left", nulls_equal=True)
