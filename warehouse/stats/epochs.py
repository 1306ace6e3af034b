"""Which epochs each model has attempts and graded answers in, per probe: one pass over the
attempts in `results` (views.sql's result_attempts), remembered for the same files.

The report asks this many times (the probes present, each probe's latest epoch, each model's
epochs for the comparisons, the epoch before the latest for drift and the gates), and each
question scanned every answer of the warehouse: 10M rows after a year of nightly sweeps.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import polars as pl

from needlescope.warehouse.stats.memo import remembered


def attempt_epochs(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per (probe, model, epoch) with an attempt in `results`: ``graded`` (attempts without
    a request error) and ``first_graded`` (the earliest of those attempts' ``answered_at``)."""
    return remembered(
        con,
        ("attempt_epochs",),
        lambda: con.sql(
            """
            SELECT probe, model, epoch,
                   count(*) FILTER (WHERE error_kind IS NULL) AS graded,
                   min(answered_at) FILTER (WHERE error_kind IS NULL) AS first_graded
            FROM result_attempts GROUP BY ALL
            """
        ).pl(),
    )


def probes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The probes with an attempt in `results`, in name order."""
    return sorted(str(p) for p in attempt_epochs(con)["probe"].unique())


def seen(con: duckdb.DuckDBPyConnection, probe: str) -> list[str]:
    """The epochs with an attempt of ``probe`` in `results`, in name order."""
    return _names(attempt_epochs(con).filter(pl.col("probe") == probe))


def graded(con: duckdb.DuckDBPyConnection, probe: str, model: str) -> list[str]:
    """The epochs with a graded attempt of ``model`` for ``probe``, in name order."""
    return _names(
        attempt_epochs(con).filter(
            (pl.col("probe") == probe) & (pl.col("model") == model) & (pl.col("graded") > 0)
        )
    )


def _names(frame: pl.DataFrame) -> list[str]:
    return sorted(str(e) for e in frame["epoch"].unique())


def by_first_graded(
    con: duckdb.DuckDBPyConnection, probe: str, models: Sequence[str]
) -> dict[str, list[str]]:
    """Each of ``models``' epochs with a graded attempt of ``probe``, oldest first (by their
    first graded attempt, then name; epochs without a time last)."""
    mine = (pl.col("probe") == probe) & pl.col("model").is_in(list(models))
    frame = (
        attempt_epochs(con)
        .filter(mine & (pl.col("graded") > 0))
        .sort(["model", "first_graded", "epoch"], nulls_last=True)
    )
    found: dict[str, list[str]] = {}
    for model, epoch in frame.select("model", "epoch").iter_rows():
        found.setdefault(str(model), []).append(str(epoch))
    return found


def latest_graded(con: duckdb.DuckDBPyConnection, probe: str) -> str | None:
    """The epoch of ``probe`` whose first graded attempt (of any model) is the latest (ties:
    the greatest name; epochs without a time only when no epoch has one)."""
    frame = (
        attempt_epochs(con)
        .filter((pl.col("probe") == probe) & (pl.col("graded") > 0))
        .group_by("epoch")
        .agg(pl.col("first_graded").min())
        .sort(["first_graded", "epoch"], descending=True, nulls_last=True)
    )
    return str(frame["epoch"][0]) if frame.height else None
