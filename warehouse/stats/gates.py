"""Gates and serving changes judged on the warehouse: an epoch's answers from the ``results``
view, the previous epoch of the same config, and the warehouse's interval of a mean.

The one module that binds the pure gate evaluation (``needlescope.gates._eval``) and the
fingerprint comparison (``needlescope.provenance.fingerprint``) to the warehouse's statistics: when
those modules move, only the imports below change.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import duckdb
import polars as pl

from needlescope.gates import (
    MIN_ANSWERS,
    RESULT_COLUMNS,
    GateModel,
    GateResult,
    MaxDropGate,
    evaluate_gates,
)
from needlescope.provenance import fingerprint
from needlescope.warehouse.stats.drift import previous_epoch
from needlescope.warehouse.stats.intervals import mean_interval

_COLUMNS = ", ".join(f'"{c}"' for c in ("epoch", *RESULT_COLUMNS))


def epoch_results(con: duckdb.DuckDBPyConnection, epoch: str) -> pl.DataFrame:
    """The rows of ``results`` in ``epoch`` that gates read."""
    return con.sql(
        f"SELECT {_COLUMNS} FROM results WHERE epoch = $epoch", params={"epoch": epoch}
    ).pl()


def previous_results(
    con: duckdb.DuckDBPyConnection, epoch: str, results: pl.DataFrame
) -> pl.DataFrame | None:
    """For each model and probe in ``results``, its rows in its previous epoch of the same
    config (``significance.previous_epoch``); None when none has one."""
    frames = []
    for model, probe in results.select("model", "probe").unique().sort("model", "probe").rows():
        before = previous_epoch(con, model, epoch, probe=probe)
        if before is None:
            continue
        frames.append(
            con.sql(
                f"SELECT {_COLUMNS} FROM results"
                " WHERE epoch = $epoch AND model = $model AND probe = $probe",
                params={"epoch": before, "model": model, "probe": probe},
            ).pl()
        )
    return pl.concat(frames) if frames else None


def evaluate_epoch(
    con: duckdb.DuckDBPyConnection,
    gates: Sequence[GateModel],
    epoch: str,
    *,
    models: Sequence[str] | None = None,
    seed: int = 0,
    min_answers: int = MIN_ANSWERS,
) -> list[GateResult]:
    """Every gate's verdict per model for ``epoch``, sending nothing: what the sweep's end and
    ``needlescope gates`` report. ``models``: the config's models under test (default: those
    with answers in the epoch)."""
    results = epoch_results(con, epoch)
    previous = None
    if any(isinstance(g, MaxDropGate) for g in gates):
        previous = previous_results(con, epoch, results)
    return evaluate_gates(
        gates,
        results,
        interval_of=partial(mean_interval, seed=seed),
        previous=previous,
        models=models,
        min_answers=min_answers,
    )


def serving_changes(con: duckdb.DuckDBPyConnection, epoch: str) -> dict[str, list[str]]:
    """Per model of ``epoch``: what changed in its serving fingerprint since its previous
    epoch (of each probe it answered), as ``fingerprint.what_changed`` words it. Reads the
    fingerprint columns the ``results`` view has; a model without a previous epoch is left
    out."""
    known = set(con.sql("SELECT * FROM results LIMIT 0").columns)
    columns = ", ".join(f'"{c}"' for c in ("model", *fingerprint.COLUMNS) if c in known)
    # Two reads (the epoch's rows, then every previous epoch's), not two per model and probe
    read = f"SELECT epoch, probe, {columns} FROM results WHERE list_contains($epochs, epoch)"
    latest = con.sql(read, params={"epochs": [epoch]}).pl()
    pairs = latest.select("model", "probe").unique().sort("model", "probe").rows()
    before = {(m, p): previous_epoch(con, m, epoch, probe=p) for m, p in pairs}
    wanted = sorted({e for e in before.values() if e is not None})
    earlier = con.sql(read, params={"epochs": wanted}).pl() if wanted else latest.clear()
    changes: dict[str, list[str]] = {}
    for model, probe in pairs:
        if before[(model, probe)] is None:
            continue
        mine = (pl.col("model") == model) & (pl.col("probe") == probe)
        sides = [
            earlier.filter(mine & (pl.col("epoch") == before[(model, probe)])),
            latest.filter(mine),
        ]
        lines = fingerprint.what_changed(
            *(fingerprint.summarise(side.iter_rows(named=True)) for side in sides)
        )
        found = changes.setdefault(model, [])
        found += [line for line in lines if line not in found]
    return changes
