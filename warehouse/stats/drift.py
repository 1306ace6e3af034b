"""Drift between epochs: each model's answers in an epoch against the previous epoch of the
same config, paired by cell (significance.paired_comparison; every model's at once in
:func:`drift_summary`); flagged when the interval of the difference excludes 0."""

from __future__ import annotations

from typing import Any

import duckdb

from needlescope.warehouse.stats import epochs as epoch_sets
from needlescope.warehouse.stats.intervals import DEFAULT_RESAMPLES
from needlescope.warehouse.stats.memo import remembered
from needlescope.warehouse.stats.significance import (
    Comparison,
    Side,
    paired_comparison,
    paired_comparisons,
)
from needlescope.warehouse.stats.sql import json_float


def previous_epoch(
    con: duckdb.DuckDBPyConnection, model: str, epoch: str, *, probe: str = "recall"
) -> str | None:
    """The epoch before ``epoch`` of the same config: of the epochs whose runs share a
    config name with ``epoch``'s runs and started earlier (an epoch starts with its first
    run), the latest with a graded answer (no request error) of ``model`` for ``probe``.
    None if there is none, or ``epoch`` has no run in the ``runs`` view."""
    return remembered(
        con,
        ("previous_epoch", model, epoch, probe),
        lambda: _previous_epoch(con, model, epoch, probe),
    )


def _previous_epoch(
    con: duckdb.DuckDBPyConnection, model: str, epoch: str, probe: str
) -> str | None:
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
            -- the epochs with a graded result (views.sql: result_attempts)
            SELECT unnest($graded::VARCHAR[]) AS epoch
        )
        SELECT s.epoch FROM starts s
        JOIN same_config USING (epoch) JOIN graded USING (epoch)
        WHERE s.epoch <> $epoch
          AND s.started_at < (SELECT started_at FROM starts WHERE epoch = $epoch)
        ORDER BY s.started_at DESC, s.epoch DESC
        LIMIT 1
        """,
        {"epoch": epoch, "graded": epoch_sets.graded(con, probe, model)},
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
    epoch as a JSON-able dict (``previous`` None and no figures when it has none). Raises
    the ValueError of the first model whose drift cannot be compared, as
    :func:`epoch_drift` would."""
    models = [
        str(m)
        for (m,) in con.execute(
            "SELECT DISTINCT model FROM results WHERE epoch = $epoch AND probe = $probe "
            "ORDER BY model",
            {"epoch": epoch, "probe": probe},
        ).fetchall()
    ]
    before = {model: previous_epoch(con, model, epoch, probe=probe) for model in models}
    pairs = {m: (Side(m, e), Side(m, epoch)) for m, e in before.items() if e is not None}
    found = paired_comparisons(con, pairs.values(), probe=probe, seed=seed)
    summary: list[dict[str, Any]] = []
    for model in models:
        drift = found[pairs[model]] if model in pairs else None
        if isinstance(drift, ValueError):
            raise ValueError(str(drift))
        summary.append(_drift_entry(model, epoch, drift))
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
        "mean_previous": json_float(found.mean_a),
        "mean_now": json_float(found.mean_b),
        "diff": json_float(found.diff),
        "lo": json_float(found.diff_lo),
        "hi": json_float(found.diff_hi),
        "drift": found.significant,
        "mcnemar_p": json_float(found.mcnemar_p),
    }
