"""Paired comparisons of two models (or two epochs of one model): the mean accuracy of
each, the paired difference with its bootstrap 95% interval, McNemar's test on the needles.
``_cell_figures`` runs past 60 lines: one cell's figures, kept whole so they read in one place.

Two models pair through their cells' model-independent ``context_id``, two epochs of one model
by ``cell_id``; differences are always ``b - a``. :mod:`.pairing` reads the rows, for many pairs
at once (:func:`paired_comparisons`). Only valid answers count (``figures.COUNTED``).

Design: docs/design/warehouse.md#significance
"""

from __future__ import annotations

from collections.abc import Iterable
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
from needlescope.warehouse.stats.memo import Key, remembered_many
from needlescope.warehouse.stats.pairing import CELL_AXES, Planned, Rows, read_pairs
from needlescope.warehouse.stats.sql import json_float

__all__ = ["CELL_AXES", "Comparison", "Side", "paired_comparison", "paired_comparisons"]


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


Pair = tuple[Side, Side]


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
    accuracy 0); see :class:`Comparison` for the figures. :func:`paired_comparisons` makes
    several at once.
    """
    found = paired_comparisons(con, [(a, b)], probe=probe, seed=seed, resamples=resamples)
    if isinstance(found[(a, b)], ValueError):
        raise ValueError(str(found[(a, b)]))
    return found[(a, b)]  # type: ignore[return-value]


def paired_comparisons(
    con: duckdb.DuckDBPyConnection,
    pairs: Iterable[Pair],
    *,
    probe: str = "recall",
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> dict[Pair, Comparison | ValueError]:
    """:func:`paired_comparison` of each pair ``(a, b)``, by pair: every side's answers and
    needles are read once for all of them. A pair that cannot be compared (a side against
    itself, answers sharing a pairing key) gets its ``ValueError`` (not raised) and the
    others their comparisons."""
    asked = list(dict.fromkeys(pairs))
    found: dict[Pair, Comparison | ValueError] = {}
    keys: dict[Pair, Key] = {}
    plans: dict[Key, Planned] = {}
    for a, b in asked:
        try:
            plan = Planned(*_sides(a, b))
        except ValueError as exc:
            found[(a, b)] = ValueError(str(exc))
            continue
        keys[(a, b)] = ("paired_comparison", plan.a, plan.b, probe, seed, resamples)
        plans[keys[(a, b)]] = plan

    def compute(missing: list[Key]) -> dict[Key, Comparison | ValueError]:
        read = read_pairs(con, [plans[key] for key in missing], probe)
        return {
            key: _comparison(plans[key], probe, rows, seed, resamples)
            for key, rows in zip(missing, read, strict=True)
        }

    # The same comparison of the same files is the same: a report asks for a model's drift in
    # two sections and again among its comparisons, sometimes at once.
    computed = remembered_many(con, list(keys.values()), compute)
    found |= {pair: computed[key] for pair, key in keys.items()}
    return {pair: found[pair] for pair in asked}


def _comparison(
    p: Planned, probe: str, rows: Rows | ValueError, seed: int, resamples: int
) -> Comparison | ValueError:
    """The figures of one pair's rows (pairing.read_pairs), or the error it read instead."""
    if isinstance(rows, ValueError):
        return rows
    pairs, needles = rows.pairs, rows.needles
    status = pairs["status"]
    kept = pairs.filter(pl.col("status") == "paired")
    diff, lo, hi, method = mean_interval(
        kept["b_accuracy"] - kept["a_accuracy"], resamples=resamples, seed=seed
    )
    b01 = int(needles["mcnemar_b01"].sum())
    b10 = int(needles["mcnemar_b10"].sum())
    return Comparison(
        a=p.a,
        b=p.b,
        probe=probe,
        pairing=p.pairing,
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
