"""Statistics people can trust: intervals, paired comparisons, drift and unstable cells.

Everything reads the warehouse's views (``results``, ``runs``, ``raw_needle_outcomes``) and
counts valid answers only (``stats.COUNTED``; the invalid ones are counted apart, as
``invalid``), following the seed's rule: parse failures count as answers but are excluded
from accuracy figures; failed requests (``error_kind`` set) are neither.

* Rates (needle hits, parse failures) are in 0-1 with Wilson score intervals.
* Accuracies are in 0-100 with percentile-bootstrap intervals of the mean. The bootstrap is
  seeded and deterministic: the values are sorted before resampling, so the interval depends
  on the multiset of values and the seed only, never on the order a query returned them in.
  The resampling is vectorised with Polars' seeded sampler (one ``resamples × n`` draw;
  numpy is not a dependency, and a Polars upgrade may change the draws of a seed);
  groups of more than :data:`BOOTSTRAP_MAX_N` values use the normal approximation instead,
  and every table says which in ``interval_method``.
* Two models pair answer by answer through the model-independent ``context_id`` of their
  cells; two epochs of one model pair by ``cell_id``. Differences are always ``b - a``.

Caveats: the needles of one answer are not independent (one bad answer misses several), so
the Wilson interval of a needle hit rate and the per-needle McNemar test are optimistic
about clustered misses; the per-answer bootstrap intervals have no such problem. Per-cell
p-values in :attr:`Comparison.cells` are not adjusted for multiple comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from statistics import NormalDist
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.store.figures import (
    AXES,
    COUNTED,
    INVALID_FIGURES,
    PARSED,
    UNSTABLE_RANGE,
    UNSTABLE_VARIABLE,
    summary_sql,
)

Z95 = 1.959964
DEFAULT_RESAMPLES = 2000
# Above this many values a bootstrap draw (resamples × n) gets large: use the normal
# approximation, which the bootstrap of a mean converges to anyway. At 1,000 a report's
# per-config table of a 1M-answer warehouse (800 configs of ~1,250) costs nothing; at 5,000
# it cost 8 s of bootstrap draws.
BOOTSTRAP_MAX_N = 1000
BOOTSTRAP = "bootstrap"
NORMAL = "normal"
EFFECTIVE_LENGTH_AXES: tuple[str, ...] = ("model", "probe", "length_unit", "length")
CELL_AXES: tuple[str, ...] = ("length_unit", "length", "needle_count")

NAN = float("nan")


# ----------------------------------------------------------------------------- intervals


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the rate ``successes / n`` (both bounds in 0-1).

    ``z`` is the normal quantile (1.959964: 95%). ``n = 0`` gives ``(nan, nan)``.
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return NAN, NAN
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _clean(values: Iterable[float] | pl.Series) -> pl.Series:
    """The finite values as a sorted Float64 series (nulls and NaNs dropped)."""
    if isinstance(values, pl.Series):
        series = values.cast(pl.Float64)
    elif isinstance(values, Sequence):
        series = pl.Series("v", values, dtype=pl.Float64)
    else:  # a numpy array or any other iterable of numbers
        series = pl.Series("v", list(values), dtype=pl.Float64)
    return series.drop_nulls().drop_nans().sort()


def _check(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")


def _bootstrap(
    sorted_values: pl.Series, resamples: int, seed: int, level: float
) -> tuple[float, float]:
    n = sorted_values.len()
    drawn = sorted_values.sample(n * resamples, with_replacement=True, seed=seed)
    means = drawn.reshape((resamples, n)).arr.mean()
    alpha = 1 - level
    lo = means.quantile(alpha / 2, interpolation="linear")
    hi = means.quantile(1 - alpha / 2, interpolation="linear")
    return float(lo if lo is not None else NAN), float(hi if hi is not None else NAN)


def bootstrap_mean_interval(
    values: Iterable[float] | pl.Series,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``values`` at confidence ``level``.

    ``resamples`` resamples of size n, drawn with replacement in one vectorised draw (memory:
    ``resamples × n`` floats); the same values and seed always give the same interval. Nulls
    and NaNs are dropped; no values give ``(nan, nan)``.
    """
    _check(resamples, level)
    clean = _clean(values)
    if clean.len() == 0:
        return NAN, NAN
    return _bootstrap(clean, resamples, seed, level)


def mean_interval(
    values: Iterable[float] | pl.Series,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
    max_bootstrap_n: int = BOOTSTRAP_MAX_N,
) -> tuple[float, float, float, str | None]:
    """(mean, lo, hi, method) of ``values``: the bootstrap interval for up to
    ``max_bootstrap_n`` values, else the normal one (mean ± z·sd/√n); method is
    ``"bootstrap"``, ``"normal"``, or None when there are no values (all nan then)."""
    _check(resamples, level)
    clean = _clean(values)
    n = clean.len()
    if n == 0:
        return NAN, NAN, NAN, None
    mean = float(clean.mean())  # type: ignore[arg-type]
    if n <= max_bootstrap_n:
        lo, hi = _bootstrap(clean, resamples, seed, level)
        return mean, lo, hi, BOOTSTRAP
    lo, hi = normal_interval(mean, float(clean.std(ddof=1)), n, level)  # type: ignore[arg-type]
    return mean, lo, hi, NORMAL


def normal_interval(mean: float, sd: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """mean ± z·sd/√n: the interval :func:`mean_interval` gives past ``max_bootstrap_n``."""
    half = NormalDist().inv_cdf(0.5 + level / 2) * sd / math.sqrt(n)
    return mean - half, mean + half


def mcnemar_p(b01: int, b10: int) -> float:
    """Exact two-sided McNemar p-value: the binomial(b01 + b10, 1/2) tail of the smaller
    discordant count, doubled and capped at 1 (1.0 when there are no discordant pairs)."""
    if b01 < 0 or b10 < 0:
        raise ValueError(f"discordant counts must be non-negative, got {b01}, {b10}")
    n = b01 + b10
    k = min(b01, b10)
    if n == 0:
        return 1.0
    # P(X <= k) summed downwards from the largest term, in log space (n may be millions).
    log_top = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)
    total, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)  # C(n, i-1) / C(n, i)
        total += term
        if term < 1e-17 * total:
            break
    return min(1.0, 2 * math.exp(log_top + math.log(total)))


# ----------------------------------------------------------------------------- helpers


def _quoted(columns: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{c}"' for c in columns)


def _order(columns: Sequence[str]) -> str:
    return ", ".join(f'"{c}" NULLS FIRST' for c in columns)


def _same(columns: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f'{left}."{c}" IS NOT DISTINCT FROM {right}."{c}"' for c in columns)


def _check_columns(con: duckdb.DuckDBPyConnection, columns: Sequence[str]) -> None:
    known = set(con.sql("SELECT * FROM results LIMIT 0").columns)
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise ValueError(f"not columns of the results view: {', '.join(unknown)}")


def _filtered_results(
    probe: str, epoch: str | None, columns: str = "*"
) -> tuple[str, dict[str, Any]]:
    """A subquery of ``results`` for one probe (and epoch), with its named parameters."""
    params: dict[str, Any] = {"probe": probe}
    where = "probe = $probe"
    if epoch is not None:
        where += " AND epoch = $epoch"
        params["epoch"] = epoch
    return f"(SELECT {columns} FROM results WHERE {where})", params


def _json_float(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


# ----------------------------------------------------------------------------- accuracy table


def accuracy_table(
    con: duckdb.DuckDBPyConnection,
    *,
    probe: str = "recall",
    axes: Sequence[str] = ("model", "length", "needle_count"),
    epoch: str | None = None,
    seed: int = 0,
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
    """
    axes = list(dict.fromkeys(axes))
    if not axes:
        raise ValueError("accuracy_table needs at least one axis")
    _check_columns(con, axes)
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
    source, params = _filtered_results(probe, epoch, _quoted(needed))
    cols = _quoted(axes)
    parsed = PARSED
    counted = f"error_kind IS NULL AND {COUNTED}"
    frame = con.sql(
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
            SELECT {_quoted(axes, "r.")},
                   count(*) AS needles,
                   count(*) FILTER (WHERE o.outcome = 'correct') AS needles_correct
            FROM raw_needle_outcomes o
            JOIN r ON r.run_id = o.run_id AND r.epoch = o.epoch AND r.cell_id = o.cell_id
            WHERE r.{COUNTED}
            GROUP BY {_quoted(axes, "r.")}
        )
        SELECT g.*, coalesce(n.needles, 0) AS needles,
               coalesce(n.needles_correct, 0) AS needles_correct
        FROM per_group g LEFT JOIN needles n ON {_same(axes, "g", "n")}
        ORDER BY {_order(axes)}
        """,
        params=params,
    ).pl()

    accuracy: list[tuple[float, float, str | None]] = []
    for values in frame["accuracies"]:
        _, lo, hi, method = mean_interval(values if values is not None else [], seed=seed)
        accuracy.append((lo, hi, method))
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
        clean = [_json_float(v) if isinstance(v, float) else v for v in values]
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
    cols = _quoted(axes)
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
        mean_interval(values, seed=seed)
        if n <= BOOTSTRAP_MAX_N
        else (mean, *normal_interval(mean, sd, n), NORMAL)
        for n, mean, sd, values in parsed.select("n", "mean", "sd", "accuracies").iter_rows()
    ]
    intervals = parsed.select(axes).with_columns(
        pl.Series("ci95_low", [max(f[1], 0.0) for f in found], dtype=pl.Float64),
        pl.Series("ci95_high", [min(f[2], 100.0) for f in found], dtype=pl.Float64),
        pl.Series("interval_method", [f[3] for f in found], dtype=pl.Utf8),
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


# ----------------------------------------------------------------------------- paired comparison


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
                out[item.name] = _json_float(value)
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


def _pairs_sql(a: Side, b: Side, pairing: str, probe: str) -> tuple[str, dict[str, Any]]:
    key = {
        "cell_id": "cell_id",
        "context_id": "context_id",
        # context ids are hex digests: "/" cannot occur in them
        "epoch, context_id": "epoch || '/' || context_id",
    }[pairing]
    params: dict[str, Any] = {"probe": probe}
    side_a = _side_sql("side_a", a, key, params)
    side_b = _side_sql("side_b", b, key, params)
    sql = f"""
    WITH {side_a}, {side_b},
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
    return sql, params


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
    paired, params = _pairs_sql(a, b, pairing, probe)
    duplicated = con.execute(
        f"""{paired}
        SELECT (SELECT count(pair_key) - count(DISTINCT pair_key) FROM side_a),
               (SELECT count(pair_key) - count(DISTINCT pair_key) FROM side_b)""",
        params,
    ).fetchall()
    if any(duplicated[0]):
        raise ValueError(
            f"answers share a pairing key ({pairing}): give each side an epoch, or compare "
            "configs whose models have one identity each"
        )
    pairs = con.sql(
        f"""{paired}
        SELECT status, {_quoted(CELL_AXES)}, pair_key, a_accuracy, b_accuracy FROM paired""",
        params=params,
    ).pl()
    needles = con.sql(
        f"""{paired},
        needle_pairs AS (
            SELECT {_quoted(CELL_AXES, "p.")},
                   oa.outcome = 'correct' AS hit_a, ob.outcome = 'correct' AS hit_b
            FROM paired p
            JOIN raw_needle_outcomes oa ON oa.run_id = p.a_run_id AND oa.epoch = p.a_epoch
                AND oa.cell_id = p.a_cell_id
            JOIN raw_needle_outcomes ob ON ob.run_id = p.b_run_id AND ob.epoch = p.b_epoch
                AND ob.cell_id = p.b_cell_id AND ob.needle_index = oa.needle_index
            WHERE p.status = 'paired'
        )
        SELECT {_quoted(CELL_AXES)}, count(*) AS needle_pairs,
               count(*) FILTER (WHERE NOT hit_a AND hit_b) AS mcnemar_b01,
               count(*) FILTER (WHERE hit_a AND NOT hit_b) AS mcnemar_b10
        FROM needle_pairs GROUP BY {_quoted(CELL_AXES)}""",
        params=params,
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


# ----------------------------------------------------------------------------- drift


def previous_epoch(
    con: duckdb.DuckDBPyConnection, model: str, epoch: str, *, probe: str = "recall"
) -> str | None:
    """The epoch before ``epoch`` of the same config: of the epochs whose runs share a
    config name with ``epoch``'s runs and started earlier (an epoch starts with its first
    run), the latest with a graded answer (no request error) of ``model`` for ``probe``.
    None if there is none, or ``epoch`` has no run in the ``runs`` view."""
    row = con.execute(
        """
        WITH starts AS (
            SELECT epoch, min(started_at) AS started_at FROM runs GROUP BY epoch
        ), configs AS (
            SELECT DISTINCT config_name FROM runs WHERE epoch = $epoch
        ), same_config AS (
            SELECT DISTINCT r.epoch FROM runs r
            JOIN configs c ON r.config_name IS NOT DISTINCT FROM c.config_name
        ), graded AS (
            SELECT DISTINCT epoch FROM results
            WHERE model = $model AND probe = $probe AND error_kind IS NULL
        )
        SELECT s.epoch FROM starts s
        JOIN same_config USING (epoch) JOIN graded USING (epoch)
        WHERE s.epoch <> $epoch
          AND s.started_at < (SELECT started_at FROM starts WHERE epoch = $epoch)
        ORDER BY s.started_at DESC, s.epoch DESC
        LIMIT 1
        """,
        {"epoch": epoch, "model": model, "probe": probe},
    ).fetchall()
    return str(row[0][0]) if row else None


def epoch_drift(
    con: duckdb.DuckDBPyConnection,
    model: str,
    epoch: str,
    previous: str | None = None,
    *,
    probe: str = "recall",
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> Comparison | None:
    """``model``'s answers in ``epoch`` against the same cells in ``previous`` (by default
    :func:`previous_epoch`): side a is the previous epoch, so ``diff`` is now - before.
    Drift is ``significant``: the paired bootstrap interval of the difference excludes 0.
    None when there is no previous epoch."""
    before = previous if previous is not None else previous_epoch(con, model, epoch, probe=probe)
    if before is None:
        return None
    return paired_comparison(
        con, Side(model, before), Side(model, epoch), probe=probe, seed=seed, resamples=resamples
    )


def drift_summary(
    con: duckdb.DuckDBPyConnection, epoch: str, seed: int = 0, *, probe: str = "recall"
) -> list[dict[str, Any]]:
    """For each model with ``probe`` results in ``epoch``: its drift from its previous
    epoch as a JSON-able dict (``previous`` None and no figures when it has none)."""
    models = [
        str(m)
        for (m,) in con.execute(
            "SELECT DISTINCT model FROM results WHERE epoch = $epoch AND probe = $probe "
            "ORDER BY model",
            {"epoch": epoch, "probe": probe},
        ).fetchall()
    ]
    summary: list[dict[str, Any]] = []
    for model in models:
        found = epoch_drift(con, model, epoch, probe=probe, seed=seed)
        summary.append(_drift_entry(model, epoch, found))
    return summary


def _drift_entry(model: str, epoch: str, found: Comparison | None) -> dict[str, Any]:
    if found is None:
        return {
            "model": model,
            "epoch": epoch,
            "previous": None,
            "n_pairs": 0,
            "dropped_parse_failures": 0,
            "dropped_invalid": 0,
            "mean_previous": None,
            "mean_now": None,
            "diff": None,
            "lo": None,
            "hi": None,
            "drift": False,
            "mcnemar_p": None,
        }
    return {
        "model": model,
        "epoch": epoch,
        "previous": found.a.epoch,
        "n_pairs": found.n_pairs,
        "dropped_parse_failures": found.dropped_parse_failures,
        "dropped_invalid": found.dropped_invalid,
        "mean_previous": _json_float(found.mean_a),
        "mean_now": _json_float(found.mean_b),
        "diff": _json_float(found.diff),
        "lo": _json_float(found.diff_lo),
        "hi": _json_float(found.diff_hi),
        "drift": found.significant,
        "mcnemar_p": _json_float(found.mcnemar_p),
    }


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
    source, params = _filtered_results(probe, epoch)
    cols = _quoted(AXES)
    query = f"""
        WITH s AS ({summary_sql(AXES, source)}),
        acc AS (
            SELECT {cols}, list(accuracy ORDER BY epoch, "repeat", accuracy) AS accuracies
            FROM {source} WHERE {PARSED}
            GROUP BY {cols}
        )
        SELECT {_quoted(AXES, "s.")}, s.epochs, s.repeats, s.graded, s.invalid, s.min_accuracy,
               s.max_accuracy, s.accuracy_range, acc.accuracies
        FROM s JOIN acc ON {_same(AXES, "s", "acc")}
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


__all__ = [
    "BOOTSTRAP_MAX_N",
    "CELL_AXES",
    "DEFAULT_RESAMPLES",
    "EFFECTIVE_LENGTH_AXES",
    "Comparison",
    "Side",
    "accuracy_table",
    "bootstrap_mean_interval",
    "drift_summary",
    "effective_context_length",
    "effective_lengths",
    "epoch_drift",
    "mcnemar_p",
    "mean_interval",
    "paired_comparison",
    "previous_epoch",
    "unstable_cells",
    "wilson_interval",
]
