"""The statistics' figures over every epoch, from the answer and needle tallies (the rollups:
thousands of rows) instead of grouping `results` (one row per answer: 10M after a year of
nightly sweeps). The same definitions as the plain queries, and the same intervals: a
bootstrap resamples the sorted values, so the multiset the tallies keep (each distinct
accuracy with how many answers have it) gives the very interval the answers give; past
``BOOTSTRAP_MAX_N`` the normal interval needs only n, the mean and the deviation.

Only groupings by the configs' axes (:data:`figures.AXES`) can be tallied: a grouping by
epoch, repeat or run reads `results`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.stats.intervals import (
    BOOTSTRAP_MAX_N,
    NORMAL,
    mean_interval,
    normal_interval,
    wilson_interval,
)
from needlescope.warehouse.stats.memo import remembered
from needlescope.warehouse.stats.sql import order_by, quoted, same
from needlescope.warehouse.store.figures import (
    AXES,
    PARSED,
    RECALL_COUNTS,
    tallied_counts_sql,
)
from needlescope.warehouse.store.figures_tallied import (
    VALUE_LISTS,
    tallied_groups_sql,
    tallied_summary_sql,
)

PROBE = "t.probe = $probe"  # a tally condition: one probe's answers


def can_tally(axes: Sequence[str]) -> bool:
    """Whether a grouping by ``axes`` can be read from the tallies."""
    return set(axes) <= set(AXES)


def interval(
    n: int | None, mean: float | None, sd: float | None, valued: Sequence[Any] | None, seed: int
) -> tuple[float, float, str | None]:
    """(lo, hi, method) of a group's mean accuracy, as :func:`intervals.mean_interval` gives
    it for the group's values: ``valued`` holds each distinct accuracy with its count."""
    if not n or mean is None:
        return mean_interval([], seed=seed)[1:]
    if n > BOOTSTRAP_MAX_N:
        lo, hi = normal_interval(mean, sd if sd is not None else float("nan"), n)
        return lo, hi, NORMAL
    values = [float(v["accuracy"]) for v in valued or () for _ in range(int(v["n"]))]
    return mean_interval(values, seed=seed)[1:]


def accuracy_groups(
    con: duckdb.DuckDBPyConnection, probe: str, axes: Sequence[str]
) -> pl.DataFrame:
    """``accuracy.accuracy_table``'s groups before their intervals, over every epoch of
    ``probe``: the counts, ``mean_accuracy``, ``sd_accuracy``, ``valued`` (the distinct
    accuracies and their counts) and the needles of the valid parsed answers."""
    groups = tallied_groups_sql(axes, RECALL_COUNTS, PARSED, epochs=False, where=PROBE)
    needle_sums = tallied_counts_sql(
        axes,
        {"needles": "needles", "needles_correct": "correct"},
        where=PROBE,
        per_needle=False,
    )
    return con.sql(
        f"""{groups}{VALUE_LISTS}, needle_sums AS ({needle_sums})
        SELECT {quoted(axes, "p.")}, p.answers, p.errors, p.graded, p.invalid, p.invalid_why,
               p.mean_accuracy, p.sd_accuracy, l.valued, p.parse_failures,
               coalesce(n.needles, 0) AS needles,
               coalesce(n.needles_correct, 0) AS needles_correct
        FROM per_group p
        LEFT JOIN lists l USING (config_id)
        LEFT JOIN needle_sums n ON {same(axes, "p", "n")}
        ORDER BY {order_by(axes)}
        """,
        params={"probe": probe},
    ).pl()


def unstable_configs(con: duckdb.DuckDBPyConnection, probe: str, spread: float) -> pl.DataFrame:
    """``accuracy.unstable_cells`` over every epoch of ``probe``, from the tallies: the cell
    configs whose graded answers span more than ``spread`` points, with ``valued`` (each
    accuracy with how many answers have it) in place of the answers' ordered list."""
    return (
        config_stats(con)
        .filter((pl.col("probe") == probe) & (pl.col("accuracy_range") > spread))
        .select(
            *AXES,
            "epochs",
            "repeats",
            "graded",
            "invalid",
            "min_accuracy",
            "max_accuracy",
            "accuracy_range",
            "valued",
        )
    )


def config_stats(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The ``recall_stats`` view's rows (every probe's cell configs, in its order) with
    ``valued``, read once for the same files: the statistics table, its intervals and the
    unstable configs of the Summary and the Statistics all come from it. Its ``unstable``
    flag follows the connection's setting at the time: :func:`flagged` sets it again."""
    sql = tallied_summary_sql(AXES, values=True)
    return remembered(
        con, ("config_stats",), lambda: con.sql(f"{sql} ORDER BY {order_by(AXES)}").pl()
    )


def flagged(frame: pl.DataFrame, unstable_range: float) -> pl.DataFrame:
    """``frame`` (summary figures) with ``unstable`` as the ``recall_stats`` view computes it
    for ``unstable_range``."""
    unstable = (pl.col("accuracy_range") > unstable_range).fill_null(False)
    return frame.with_columns(unstable.alias("unstable"))


def joined_intervals(
    frame: pl.DataFrame,
    axes: Sequence[str],
    groups: pl.DataFrame,
    found: Sequence[tuple[float, float, str | None]],
) -> pl.DataFrame:
    """``frame`` (summary figures per group of ``axes``) with ``ci95_low`` / ``ci95_high``
    (clipped to 0-100) and ``interval_method`` from ``found``, one (lo, hi, method) per row of
    ``groups`` (their axes), and the Wilson interval of each row's parse-failure rate."""
    axes = list(axes)
    intervals = groups.select(axes).with_columns(
        pl.Series("ci95_low", [max(f[0], 0.0) for f in found], dtype=pl.Float64),
        pl.Series("ci95_high", [min(f[1], 100.0) for f in found], dtype=pl.Float64),
        pl.Series("interval_method", [f[2] for f in found], dtype=pl.Utf8),
    )
    wilson = [
        wilson_interval(int(f), int(n)) if n else (None, None)
        for f, n in zip(frame["parse_failures"], frame["answers"], strict=True)
    ]
    order = [*frame.columns, "interval_method", "parse_failure_lo", "parse_failure_hi"]
    return (
        frame.drop("ci95_low", "ci95_high")
        .join(intervals, on=axes, how="left", nulls_equal=True)
        .with_columns(
            pl.Series("parse_failure_lo", [w[0] for w in wilson], dtype=pl.Float64),
            pl.Series("parse_failure_hi", [w[1] for w in wilson], dtype=pl.Float64),
        )
        .select(order)
    )


def summary_with_intervals(
    frame: pl.DataFrame, axes: Sequence[str], *, seed: int = 0
) -> pl.DataFrame:
    """Summary figures read with ``valued`` (``tallied_summary_sql(values=True)``), without
    it, with the intervals ``accuracy.with_intervals`` gives the same groups of ``results``."""
    groups = frame.filter(pl.col("valued").is_not_null())
    found = [
        interval(n, mean, sd, valued, seed)
        for n, mean, sd, valued in groups.select(
            "graded", "mean_accuracy", "sd_accuracy", "valued"
        ).iter_rows()
    ]
    return joined_intervals(frame.drop("valued"), axes, groups, found)
