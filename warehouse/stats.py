"""Error statistics as tidy Polars frames, read from the views (never from file paths)."""

from __future__ import annotations

import duckdb
import polars as pl


def accuracy_by_length(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Mean accuracy per model × length × needle count (× filler, prompt), with its counts."""
    return con.sql(
        """
        SELECT *,
               parse_failures / nullif(answers, 0) AS parse_failure_rate,
               1.96 * sd_accuracy / sqrt(nullif(graded, 0)) AS ci95_half_width
        FROM accuracy_by_length
        ORDER BY model, probe, length_unit, length, needle_count, filler, prompt_version
        """
    ).pl()


def run_overview(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.sql(
        """
        SELECT run_id, epoch, config_name, started_at, ended_at, cells_total, cells_skipped,
               cells_dropped, cells_graded, cells_failed, needlescope_version
        FROM runs ORDER BY started_at DESC LIMIT 50
        """
    ).pl()


def error_counts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.sql(
        """
        SELECT model, error_kind, count(*) AS cells
        FROM failed_cells GROUP BY ALL ORDER BY cells DESC
        """
    ).pl()
