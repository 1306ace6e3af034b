"""Paired comparisons of two models (or two epochs of one model): the mean accuracy of
each, the paired difference with its bootstrap 95% interval, McNemar's test on the needles.
Two models pair answer by answer through the model-independent ``context_id`` of their cells;
two epochs of one model pair by ``cell_id``. Differences are always ``b - a``.
``_cell_figures`` and ``paired_comparison`` run past 60 lines: each is one pairing query and
the figures read from it, kept whole so the pairing reads in one place.

Only valid answers count (``figures.COUNTED``; invalid ones are counted apart). Caveats: the
needles of one answer are not independent (one bad answer misses several), so the per-needle
McNemar test is optimistic about clustered misses; the per-answer bootstrap intervals have no
such problem. Per-cell p-values in :attr:`Comparison.cells` are not adjusted for multiple
comparisons.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.stats.intervals import (
    DEFAULT_RESAMPLES,
    NAN,
    mcnemar_p,
    mean_interval,
)
from needlescope.warehouse.stats.memo import remembered
from needlescope.warehouse.stats.sql import (
    json_float,
    quoted,
)
from needlescope.warehouse.store.figures import (
    COUNTED,
)

CELL_AXES: tuple[str, ...] = ("length_unit", "length", "needle_count")


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a model's answers in one epoch, or in every epoch (None)."""

    model: str
    epoch: str | None = None


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of side ``b`` against side ``a`` (differences are ``b - a``).

    ``n_pairs``: pairs valid and parsed on both sides. Pairs where either side is a failed
    request (``dropped_errors``), an invalid answer (``dropped_invalid``: truncated, refused…)
    or a parse failure (``dropped_parse_failures``) are left out, as are answers with no
    partner (``unpaired_a`` / ``unpaired_b``). ``diff_lo`` /
    ``diff_hi``: the paired-bootstrap 95% interval of the mean difference; ``significant``:
    it excludes 0. McNemar: per-needle hits of the pairs, ``mcnemar_b01`` = missed by a and
    hit by b, ``mcnemar_b10`` = the reverse, ``mcnemar_p`` the exact two-sided p-value.
    ``cells``: the same figures per length unit × length × needle count answered on both
    sides (null figures where no pair is left). Means and interval bounds are NaN when
    ``n_pairs`` is 0; :meth:`to_dict` gives them as None.
    """

    a: Side
    b: Side
    probe: str
    pairing: str  # "cell_id" | "context_id" | "epoch, context_id"
    n_pairs: int
    dropped_parse_failures: int
    dropped_errors: int
    dropped_invalid: int
    unpaired_a: int
    unpaired_b: int
    mean_a: float
    mean_b: float
    diff: float
    diff_lo: float
    diff_hi: float
    interval_method: str | None
    significant: bool
    needle_pairs: int
    mcnemar_b01: int
    mcnemar_b10: int
    mcnemar_p: float
    cells: pl.DataFrame = field(compare=False, hash=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain JSON-able values (NaN as None), without ``cells``."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Side):
                out[item.name] = asdict(value)
            elif isinstance(value, float):
                out[item.name] = json_float(value)
            elif item.name != "cells":
                out[item.name] = value
        return out


def _sides(a: Side, b: Side) -> tuple[Side, Side, str]:
    """The sides with a missing epoch taken from the other side, and how they pair."""
    if a.epoch is None and b.epoch is not None:
        a = replace(a, epoch=b.epoch)
    elif b.epoch is None and a.epoch is not None:
        b = replace(b, epoch=a.epoch)
    if a == b:
        raise ValueError(f"cannot compare {a} with itself: give two models or two epochs")
    if a.model == b.model:
        return a, b, "cell_id"
    return a, b, "context_id" if a.epoch is not None else "epoch, context_id"


def _side_sql(name: str, side: Side, key: str, params: dict[str, Any]) -> str:
    params[f"{name}_model"] = side.model
    where = f"probe = $probe AND model = ${name}_model"
    if side.epoch is not None:
        params[f"{name}_epoch"] = side.epoch
        where += f" AND epoch = ${name}_epoch"
    return f"""{name} AS (
        SELECT {key} AS pair_key, true AS present, run_id, epoch, cell_id, length_unit,
               length, needle_count, error_kind, parse_ok, accuracy,
               {COUNTED} AS counted
        FROM results WHERE {where}
    )"""


def _pairs_sql(a: Side, b: Side, pairing: str, probe: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The SQL of each side (``side_a``, ``side_b``: ``name AS (...)``) and of their pairing
    (``paired``: the CTE after them), with the sides' parameters."""
    key = {
        "cell_id": "cell_id",
        "context_id": "context_id",
        # context ids are hex digests: "/" cannot occur in them
        "epoch, context_id": "epoch || '/' || context_id",
    }[pairing]
    params: dict[str, Any] = {"probe": probe}
    side_a = _side_sql("side_a", a, key, params)
    side_b = _side_sql("side_b", b, key, params)
    sql = """
    paired AS (
        SELECT coalesce(x.pair_key, y.pair_key) AS pair_key,
               coalesce(x.length_unit, y.length_unit) AS length_unit,
               coalesce(x.length, y.length) AS length,
               coalesce(x.needle_count, y.needle_count) AS needle_count,
               x.run_id AS a_run_id, x.epoch AS a_epoch, x.cell_id AS a_cell_id,
               y.run_id AS b_run_id, y.epoch AS b_epoch, y.cell_id AS b_cell_id,
               x.accuracy AS a_accuracy, y.accuracy AS b_accuracy,
               CASE WHEN x.present IS NULL THEN 'only_b'
                    WHEN y.present IS NULL THEN 'only_a'
                    WHEN x.error_kind IS NOT NULL OR y.error_kind IS NOT NULL THEN 'error'
                    WHEN NOT (x.counted AND y.counted) THEN 'invalid'
                    WHEN x.accuracy IS NOT NULL AND y.accuracy IS NOT NULL THEN 'paired'
                    ELSE 'parse_failure' END AS status
        FROM side_a x FULL OUTER JOIN side_b y ON x.pair_key = y.pair_key
    )"""
    return {"side_a": side_a, "side_b": side_b, "paired": sql}, params


def _cell_figures(
    pairs: pl.DataFrame, needles: pl.DataFrame, seed: int, resamples: int
) -> pl.DataFrame:
    """Per cell (length unit × length × needle count) answered on both sides: the pairs'
    figures, as in :class:`Comparison`."""
    keys = list(CELL_AXES)
    both = pairs.filter(pl.col("status").is_in(["paired", "parse_failure", "error", "invalid"]))
    counts = both.group_by(keys).agg(
        (pl.col("status") == "paired").sum().cast(pl.Int64).alias("n"),
        (pl.col("status") == "parse_failure").sum().cast(pl.Int64).alias("dropped_parse_failures"),
        (pl.col("status") == "error").sum().cast(pl.Int64).alias("dropped_errors"),
        (pl.col("status") == "invalid").sum().cast(pl.Int64).alias("dropped_invalid"),
    )
    kept = pairs.filter(pl.col("status") == "paired").with_columns(
        (pl.col("b_accuracy") - pl.col("a_accuracy")).alias("d")
    )
    rows: list[dict[str, Any]] = []
    for group in kept.partition_by(keys, maintain_order=False):
        first = group.row(0, named=True)
        diff, lo, hi, method = mean_interval(group["d"], resamples=resamples, seed=seed)
        rows.append(
            {
                **{k: first[k] for k in keys},
                "mean_a": group["a_accuracy"].mean(),
                "mean_b": group["b_accuracy"].mean(),
                "diff": diff,
                "diff_lo": lo,
                "diff_hi": hi,
                "interval_method": method,
                "significant": bool(lo > 0 or hi < 0),
            }
        )
    schema: dict[str, Any] = {
        **{k: pairs.schema[k] for k in keys},
        "mean_a": pl.Float64,
        "mean_b": pl.Float64,
        "diff": pl.Float64,
        "diff_lo": pl.Float64,
        "diff_hi": pl.Float64,
        "interval_method": pl.Utf8,
        "significant": pl.Boolean,
    }
    figures = pl.DataFrame(rows, schema=schema)
    return (
        counts.join(figures, on=keys, how="left", nulls_equal=True)
        .join(needles, on=keys, how="left", nulls_equal=True)
        .with_columns(
            pl.col("significant").fill_null(False),
            pl.col("needle_pairs", "mcnemar_b01", "mcnemar_b10").fill_null(0),
        )
        .with_columns(
            pl.struct("mcnemar_b01", "mcnemar_b10")
            .map_elements(
                lambda s: mcnemar_p(s["mcnemar_b01"], s["mcnemar_b10"]), return_dtype=pl.Float64
            )
            .alias("mcnemar_p")
        )
        .select(
            *keys,
            "n",
            "dropped_parse_failures",
            "dropped_errors",
            "dropped_invalid",
            "mean_a",
            "mean_b",
            "diff",
            "diff_lo",
            "diff_hi",
            "interval_method",
            "significant",
            "needle_pairs",
            "mcnemar_b01",
            "mcnemar_b10",
            "mcnemar_p",
        )
        .sort(keys, nulls_last=False)
    )


def paired_comparison(
    con: duckdb.DuckDBPyConnection,
    a: Side,
    b: Side,
    *,
    probe: str = "recall",
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> Comparison:
    """Compare the answers of side ``b`` with those of side ``a``, pair by pair.

    Pairing: one model in two epochs pairs by ``cell_id``; two models pair by ``context_id``
    (the same needles at the same places), within each epoch when neither side names an
    epoch, across the two named epochs otherwise. A side without an epoch takes the other
    side's. Only pairs parsed on both sides count (the seed's rule: parse failures are not
    accuracy 0); see :class:`Comparison` for the figures.
    """
    a, b, pairing = _sides(a, b)
    # The same comparison of the same files is the same: a report asks for a model's drift in
    # two sections and again among its comparisons, sometimes at once.
    return remembered(
        con,
        ("paired_comparison", a, b, probe, seed, resamples),
        lambda: _compare_sides(con, a, b, pairing, probe, seed, resamples),
    )


def _compare_sides(
    con: duckdb.DuckDBPyConnection,
    a: Side,
    b: Side,
    pairing: str,
    probe: str,
    seed: int,
    resamples: int,
) -> Comparison:
    sides, params = _pairs_sql(a, b, pairing, probe)
    # Each side's rows are read once (three queries below read them), into temporary tables of
    # this call's own names.
    tag = uuid.uuid4().hex
    tables = {name: f"{name}_{tag}" for name in ("side_a", "side_b")}
    try:
        for name, table in tables.items():
            own = {k: v for k, v in params.items() if k == "probe" or k.startswith(name)}
            con.execute(f"CREATE TEMP TABLE {table} AS WITH {sides[name]} FROM {name}", own)
        paired = f"WITH side_a AS (FROM {tables['side_a']}), side_b AS (FROM {tables['side_b']}),"
        paired += sides["paired"]
        return _compared(con, a, b, pairing, probe, paired, seed, resamples)
    finally:
        for table in tables.values():
            con.execute(f"DROP TABLE IF EXISTS {table}")


def _compared(
    con: duckdb.DuckDBPyConnection,
    a: Side,
    b: Side,
    pairing: str,
    probe: str,
    paired: str,
    seed: int,
    resamples: int,
) -> Comparison:
    needle_params: dict[str, Any] = {}
    # A side's model and epoch, stated on its needle rows: the scan then reads their row groups only
    # (the sides are tables here, so the optimiser cannot carry their filter over the join).
    side_filters = ""
    for alias, side in (("oa", a), ("ob", b)):
        needle_params[f"{alias}_model"] = side.model
        side_filters += f" AND {alias}.model = ${alias}_model"
        if side.epoch is not None:
            needle_params[f"{alias}_epoch"] = side.epoch
            side_filters += f" AND {alias}.epoch = ${alias}_epoch"
    duplicated = con.execute(
        f"""{paired}
        SELECT (SELECT count(pair_key) - count(DISTINCT pair_key) FROM side_a),
               (SELECT count(pair_key) - count(DISTINCT pair_key) FROM side_b)"""
    ).fetchall()
    if any(duplicated[0]):
        raise ValueError(
            f"answers share a pairing key ({pairing}): give each side an epoch, or compare "
            "configs whose models have one identity each"
        )
    pairs = con.sql(
        f"""{paired}
        SELECT status, {quoted(CELL_AXES)}, pair_key, a_accuracy, b_accuracy FROM paired"""
    ).pl()
    needles = con.sql(
        f"""{paired},
        needle_pairs AS (
            SELECT {quoted(CELL_AXES, "p.")},
                   oa.outcome = 'correct' AS hit_a, ob.outcome = 'correct' AS hit_b
            FROM paired p
            JOIN raw_needle_outcomes oa ON oa.run_id = p.a_run_id AND oa.epoch = p.a_epoch
                AND oa.cell_id = p.a_cell_id
            JOIN raw_needle_outcomes ob ON ob.run_id = p.b_run_id AND ob.epoch = p.b_epoch
                AND ob.cell_id = p.b_cell_id AND ob.needle_index = oa.needle_index
            WHERE p.status = 'paired'{side_filters}
        )
        SELECT {quoted(CELL_AXES)}, count(*) AS needle_pairs,
               count(*) FILTER (WHERE NOT hit_a AND hit_b) AS mcnemar_b01,
               count(*) FILTER (WHERE hit_a AND NOT hit_b) AS mcnemar_b10
        FROM needle_pairs GROUP BY {quoted(CELL_AXES)}""",
        params=needle_params,
    ).pl()

    status = pairs["status"]
    kept = pairs.filter(pl.col("status") == "paired")
    diff, lo, hi, method = mean_interval(
        kept["b_accuracy"] - kept["a_accuracy"], resamples=resamples, seed=seed
    )
    b01 = int(needles["mcnemar_b01"].sum())
    b10 = int(needles["mcnemar_b10"].sum())
    return Comparison(
        a=a,
        b=b,
        probe=probe,
        pairing=pairing,
        n_pairs=kept.height,
        dropped_parse_failures=int((status == "parse_failure").sum()),
        dropped_errors=int((status == "error").sum()),
        dropped_invalid=int((status == "invalid").sum()),
        unpaired_a=int((status == "only_a").sum()),
        unpaired_b=int((status == "only_b").sum()),
        mean_a=_mean(kept["a_accuracy"]),
        mean_b=_mean(kept["b_accuracy"]),
        diff=diff,
        diff_lo=lo,
        diff_hi=hi,
        interval_method=method,
        significant=bool(lo > 0 or hi < 0),
        needle_pairs=int(needles["needle_pairs"].sum()),
        mcnemar_b01=b01,
        mcnemar_b10=b10,
        mcnemar_p=mcnemar_p(b01, b10),
        cells=_cell_figures(pairs, needles, seed, resamples),
    )


def _mean(series: pl.Series) -> float:
    value = series.mean()
    return NAN if value is None else float(value)  # type: ignore[arg-type]
