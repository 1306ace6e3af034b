"""Accuracy with intervals per group of axes, the effective context length, and unstable cells.
(``accuracy_table`` runs past 60 lines: one query and the intervals of its groups.)

Everything reads the warehouse's views and counts valid answers only (``figures.COUNTED``; the
invalid ones are counted apart, as ``invalid``), following the seed's rule: parse failures
count as answers but are excluded from accuracy figures; failed requests are neither. Rates
(needle hits, parse failures) are in 0-1 with Wilson intervals; accuracies in 0-100 with
bootstrap intervals (intervals.py); every table says which in ``interval_method``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.stats import tallied
from needlescope.warehouse.stats.intervals import (
    BOOTSTRAP_MAX_N,
    NORMAL,
    mean_interval,
    normal_interval,
    wilson_interval,
)
from needlescope.warehouse.stats.memo import remembered
from needlescope.warehouse.stats.sql import (
    check_columns,
    filtered_results,
    json_float,
    order_by,
    quoted,
    same,
)
from needlescope.warehouse.store.figures import (
    AXES,
    COUNTED,
    INVALID_FIGURES,
    PARSED,
    UNSTABLE_RANGE,
    UNSTABLE_VARIABLE,
    summary_sql,
)

EFFECTIVE_LENGTH_AXES: tuple[str, ...] = ("model", "probe", "length_unit", "length")


def accuracy_table(
    con: duckdb.DuckDBPyConnection,
    *,
    probe: str = "recall",
    axes: Sequence[str] = ("model", "length", "needle_count"),
    epoch: str | None = None,
    seed: int = 0,
    tallies: bool = True,
) -> pl.DataFrame:
    """Accuracy, needle hit rate and parse-failure rate per group of ``axes``, with intervals.

    One row per group of the ``results`` of ``probe`` (of ``epoch``, else of every epoch):

    * ``answers`` (valid answers), ``errors``, ``graded`` (valid answers with an accuracy:
      parsed ones, and the parse failures a probe scores, as counting_stars scores them 0),
      ``invalid`` (answers that do not measure recall) and ``invalid_why`` (their validities,
      counted);
    * ``mean_accuracy`` (0-100, graded answers only) with its 95% interval ``accuracy_lo`` /
      ``accuracy_hi`` and ``interval_method`` ("bootstrap", "normal" above
      :data:`BOOTSTRAP_MAX_N` answers, null without parsed answers);
    * ``needles`` and ``needles_correct`` (outcome 'correct') of the parsed answers' needle
      outcomes, ``needle_hit_rate`` (0-1) with its Wilson interval ``needle_hit_lo/hi``;
    * ``parse_failures`` and ``parse_failure_rate`` (of ``answers``, 0-1) with its Wilson
      interval ``parse_failure_lo/hi``.

    Over every epoch, grouped by the configs' axes, the figures come from the tallies
    (tallied.py; ``tallies=False``: from `results`, the same figures).
    """
    axes = list(dict.fromkeys(axes))
    if not axes:
        raise ValueError("accuracy_table needs at least one axis")
    check_columns(con, axes)
    # The Summary and the Statistics section ask for the same tables, at once
    return remembered(
        con,
        ("accuracy_table", probe, tuple(axes), epoch, seed, tallies),
        lambda: _accuracy_table(con, probe, axes, epoch, seed, tallies),
    )


def _accuracy_table(
    con: duckdb.DuckDBPyConnection,
    probe: str,
    axes: list[str],
    epoch: str | None,
    seed: int,
    tallies: bool,
) -> pl.DataFrame:
    if tallies and epoch is None and tallied.can_tally(axes):
        frame = tallied.accuracy_groups(con, probe, axes)
        accuracy = [
            tallied.interval(n, mean, sd, valued, seed)
            for n, mean, sd, valued in frame.select(
                "graded", "mean_accuracy", "sd_accuracy", "valued"
            ).iter_rows()
        ]
    else:
        frame = _plain_groups(con, probe, axes, epoch)
        accuracy = [
            mean_interval(values if values is not None else [], seed=seed)[1:]
            for values in frame["accuracies"]
        ]
    return _with_rates(frame, axes, accuracy)


def _plain_groups(
    con: duckdb.DuckDBPyConnection, probe: str, axes: list[str], epoch: str | None
) -> pl.DataFrame:
    """accuracy_table's groups before their intervals, from `results` (``accuracies``: each
    group's graded values)."""
    needed = list(
        dict.fromkeys(
            [
                "run_id",
                "epoch",
                "cell_id",
                "error_kind",
                "parse_ok",
                "accuracy",
                "validity",
                *axes,
            ]
        )
    )
    source, params = filtered_results(probe, epoch, quoted(needed))
    cols = quoted(axes)
    parsed = PARSED
    counted = f"error_kind IS NULL AND {COUNTED}"
    return con.sql(
        f"""
        WITH r AS MATERIALIZED (SELECT * FROM {source}),
        per_group AS (
            SELECT {cols},
                   count(*) FILTER (WHERE {counted} AND parse_ok IS NOT NULL) AS answers,
                   count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
                   count(*) FILTER (WHERE {parsed}) AS graded,
                   avg(accuracy) FILTER (WHERE {parsed}) AS mean_accuracy,
                   list(accuracy) FILTER (WHERE {parsed}) AS accuracies,
                   count(*) FILTER (WHERE {counted} AND NOT parse_ok) AS parse_failures,
                   {INVALID_FIGURES}
            FROM r GROUP BY {cols}
        ),
        needles AS (
            SELECT {quoted(axes, "r.")},
                   count(*) AS needles,
                   count(*) FILTER (WHERE o.outcome = 'correct') AS needles_correct
            FROM raw_needle_outcomes o
            JOIN r ON r.run_id = o.run_id AND r.epoch = o.epoch AND r.cell_id = o.cell_id
            WHERE r.{COUNTED}
            GROUP BY {quoted(axes, "r.")}
        )
        SELECT g.*, coalesce(n.needles, 0) AS needles,
               coalesce(n.needles_correct, 0) AS needles_correct
        FROM per_group g LEFT JOIN needles n ON {same(axes, "g", "n")}
        ORDER BY {order_by(axes)}
        """,
        params=params,
    ).pl()


def _with_rates(
    frame: pl.DataFrame, axes: list[str], accuracy: list[tuple[float, float, str | None]]
) -> pl.DataFrame:
    """accuracy_table's columns: ``frame``'s groups with the accuracy intervals (lo, hi,
    method) and the rates' Wilson intervals."""
    hits = [
        wilson_interval(c, n)
        for c, n in zip(frame["needles_correct"], frame["needles"], strict=True)
    ]
    parse = [
        wilson_interval(f, n)
        for f, n in zip(frame["parse_failures"], frame["answers"], strict=True)
    ]

    def column(name: str, values: list[Any], dtype: Any = pl.Float64) -> pl.Series:
        # no figure is null, as mean_accuracy without parsed answers is
        clean = [json_float(v) if isinstance(v, float) else v for v in values]
        return pl.Series(name, clean, dtype=dtype)

    return frame.select(
        *axes,
        "answers",
        "errors",
        "graded",
        "invalid",
        "invalid_why",
        "mean_accuracy",
        column("accuracy_lo", [a[0] for a in accuracy]),
        column("accuracy_hi", [a[1] for a in accuracy]),
        column("interval_method", [a[2] for a in accuracy], pl.Utf8),
        "needles",
        "needles_correct",
        (pl.col("needles_correct") / pl.col("needles").replace(0, None)).alias("needle_hit_rate"),
        column("needle_hit_lo", [h[0] for h in hits]),
        column("needle_hit_hi", [h[1] for h in hits]),
        "parse_failures",
        (pl.col("parse_failures") / pl.col("answers").replace(0, None)).alias("parse_failure_rate"),
        column("parse_failure_lo", [p[0] for p in parse]),
        column("parse_failure_hi", [p[1] for p in parse]),
    )


def with_intervals(
    con: duckdb.DuckDBPyConnection,
    frame: pl.DataFrame,
    axes: Sequence[str],
    source: str = "results",
    params: dict[str, Any] | None = None,
    *,
    seed: int = 0,
) -> pl.DataFrame:
    """``frame``, figures of ``source`` grouped by ``axes`` (``stats.summary_sql``), with the
    intervals defined here: ``ci95_low`` / ``ci95_high`` become :func:`mean_interval` of each
    group's parsed answers (``interval_method`` says bootstrap or normal), clipped to 0-100,
    and ``parse_failure_lo`` / ``_hi`` are the Wilson interval of its parse-failure rate."""
    axes = list(axes)
    cols = quoted(axes)
    # Only the groups small enough to bootstrap need their values; the rest, the normal
    # interval of mean_interval, from aggregates.
    parsed = con.sql(
        f"""
        WITH p AS (
            SELECT {cols}, accuracy, count(*) OVER (PARTITION BY {cols}) AS n
            FROM {source} WHERE {PARSED}
        )
        SELECT {cols}, count(*) AS n, avg(accuracy) AS mean, stddev_samp(accuracy) AS sd,
               list(accuracy) FILTER (WHERE n <= {BOOTSTRAP_MAX_N}) AS accuracies
        FROM p GROUP BY {cols}
        """,
        params=params or {},
    ).pl()
    found = [
        mean_interval(values, seed=seed)[1:]
        if n <= BOOTSTRAP_MAX_N
        else (*normal_interval(mean, sd, n), NORMAL)
        for n, mean, sd, values in parsed.select("n", "mean", "sd", "accuracies").iter_rows()
    ]
    return tallied.joined_intervals(frame, axes, parsed.select(axes), found)


# ----------------------------------------------------------------------------- effective length


def effective_context_length(table: pl.DataFrame, threshold: float = 85.0) -> pl.DataFrame:
    """Per model (and probe and length unit, when ``table`` has them): the effective length.

    ``table`` has one row per model × length (build it with
    ``accuracy_table(con, axes=EFFECTIVE_LENGTH_AXES)`` or use :func:`effective_lengths`, so
    each length's mean and interval pool every answer at that length, all needle counts
    included) with ``mean_accuracy``, ``accuracy_lo`` and ``accuracy_hi``.

    Accuracy *stays above* the threshold up to length L when it is ``>= threshold`` at L and
    at every shorter length tested; ``effective_length`` is the longest such L, null when
    the shortest length already fails. A length without a figure (no parsed answer) fails.
    ``effective_length_lo`` / ``_hi`` apply the same rule to the intervals' lower / upper
    bounds. Also: ``lengths_tested``, ``longest_tested``, ``threshold`` and, when ``table``
    has it, ``invalid``: the answers at all lengths that did not measure recall.
    """
    required = {"model", "length", "mean_accuracy", "accuracy_lo", "accuracy_hi"}
    missing = required - set(table.columns)
    if missing:
        raise ValueError(f"table lacks columns: {', '.join(sorted(missing))}")
    keys = [c for c in ("model", "probe", "length_unit") if c in table.columns]
    if table.select([*keys, "length"]).is_duplicated().any():
        raise ValueError(
            "table has several rows per model and length: build it with "
            "accuracy_table(con, axes=EFFECTIVE_LENGTH_AXES), which pools the needle counts"
        )

    def stays(column: str) -> pl.Expr:
        passes = (pl.col(column).cast(pl.Float64).fill_nan(None) >= threshold).fill_null(False)
        return passes.cast(pl.Int8).cum_min().over(keys).cast(pl.Boolean).alias(f"ok_{column}")

    ranked = table.sort([*keys, "length"], nulls_last=False).with_columns(
        stays("mean_accuracy"), stays("accuracy_lo"), stays("accuracy_hi")
    )
    return (
        ranked.group_by(keys, maintain_order=True)
        .agg(
            pl.col("length").filter(pl.col("ok_mean_accuracy")).max().alias("effective_length"),
            pl.col("length").filter(pl.col("ok_accuracy_lo")).max().alias("effective_length_lo"),
            pl.col("length").filter(pl.col("ok_accuracy_hi")).max().alias("effective_length_hi"),
            pl.len().cast(pl.Int64).alias("lengths_tested"),
            pl.col("length").max().alias("longest_tested"),
            *(
                [pl.col("invalid").sum().cast(pl.Int64).alias("invalid")]
                if "invalid" in table.columns
                else []
            ),
        )
        .with_columns(pl.lit(float(threshold)).alias("threshold"))
    )


def effective_lengths(
    con: duckdb.DuckDBPyConnection,
    *,
    probe: str = "recall",
    epoch: str | None = None,
    threshold: float = 85.0,
    seed: int = 0,
) -> pl.DataFrame:
    """:func:`effective_context_length` of the warehouse's answers (one probe, one or all
    epochs), each length's interval bootstrapped from all its parsed answers."""
    table = accuracy_table(con, probe=probe, axes=EFFECTIVE_LENGTH_AXES, epoch=epoch, seed=seed)
    return effective_context_length(table, threshold)


# ----------------------------------------------------------------------------- unstable cells


def unstable_cells(
    con: duckdb.DuckDBPyConnection,
    *,
    spread: float = UNSTABLE_RANGE,
    probe: str = "recall",
    epoch: str | None = None,
) -> pl.DataFrame:
    """Cell configs (:data:`stats.AXES`: every grid axis but the repeat) whose parsed
    answers disagree by more than ``spread`` accuracy points (max - min > spread), over
    their repeats (and epochs, unless ``epoch`` picks one): the ``unstable`` flag of the
    ``recall_stats`` view, computed by the same SQL with ``spread`` as its threshold.

    Columns: the axes, ``epochs``, ``repeats``, ``graded``, ``invalid``, ``min_accuracy``,
    ``max_accuracy``, ``accuracy_range`` and ``accuracies`` (ordered by epoch and repeat).
    """
    if not math.isfinite(spread) or spread < 0:
        raise ValueError(f"spread must be a non-negative number, got {spread}")
    source, params = filtered_results(probe, epoch)
    cols = quoted(AXES)
    query = f"""
        WITH s AS ({summary_sql(AXES, source)}),
        acc AS (
            SELECT {cols}, list(accuracy ORDER BY epoch, "repeat", accuracy) AS accuracies
            FROM {source} WHERE {PARSED}
            GROUP BY {cols}
        )
        SELECT {quoted(AXES, "s.")}, s.epochs, s.repeats, s.graded, s.invalid, s.min_accuracy,
               s.max_accuracy, s.accuracy_range, acc.accuracies
        FROM s JOIN acc ON {same(AXES, "s", "acc")}
        WHERE s.unstable
        ORDER BY {", ".join(f's."{a}" NULLS FIRST' for a in AXES)}
    """
    before = _variable(con, UNSTABLE_VARIABLE)
    con.execute(f"SET VARIABLE {UNSTABLE_VARIABLE} = {float(spread)!r}")
    try:
        return con.sql(query, params=params).pl()
    finally:
        if before is None:
            con.execute(f"RESET VARIABLE {UNSTABLE_VARIABLE}")
        else:
            con.execute(f"SET VARIABLE {UNSTABLE_VARIABLE} = {float(before)!r}")


def _variable(con: duckdb.DuckDBPyConnection, name: str) -> Any:
    return con.execute(f"SELECT getvariable('{name}')").fetchall()[0][0]
