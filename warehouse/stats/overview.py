"""One row per model × probe: how did each model do. The run's closing table and the report's
"Summary" section both read it.

Everything counts as the statistics do (accuracy.py): accuracy over valid graded answers with
its bootstrap 95% interval, parse failures and invalid answers apart, failed requests apart;
the effective length is the longest length whose mean accuracy is at least the threshold there
and at every shorter length; a config is unstable when its repeats span more than ``spread``
points; drift compares an epoch with the model's previous epoch of the same cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import duckdb

from needlescope.grading import default_threshold
from needlescope.probes.catalog import ordered
from needlescope.warehouse.stats import accuracy, drift, tallied
from needlescope.warehouse.store.figures import UNSTABLE_RANGE

DEFAULT_THRESHOLD: float | None = None  # each probe's own (effective_length.default_threshold)


@dataclass(frozen=True)
class Overview:
    model: str
    probe: str
    cells: int  # cells with an answer or a failed request
    answers: int  # valid answers (parse failures included, invalid ones not)
    parse_failures: int
    invalid: int  # answers that do not measure recall (truncated, refused, …)
    failed: int  # cells whose latest request failed
    mean_accuracy: float | None  # 0-100
    accuracy_lo: float | None
    accuracy_hi: float | None
    effective_length: int | None  # None: the shortest length tested already fails
    threshold: float  # the accuracy (%) the effective length keeps
    longest_tested: int | None
    length_unit: str | None
    unstable: int  # unstable cell configs
    drift: bool | None  # None: no previous epoch to compare with (or not asked)
    drift_diff: float | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def overview(
    con: duckdb.DuckDBPyConnection,
    *,
    epoch: str | None = None,
    drift_epochs: Mapping[str, str | None] | None = None,
    threshold: float | None = DEFAULT_THRESHOLD,
    spread: float = UNSTABLE_RANGE,
    seed: int = 0,
) -> list[Overview]:
    """Per model × probe of ``epoch`` (else of every epoch, pooled), in the probes' order.

    ``drift_epochs``: per probe, the epoch to compare with its previous one (default: ``epoch``;
    without either, no drift is computed).
    """
    counts = _cells(con, epoch)
    rows: list[Overview] = []
    for probe in ordered(p for _, p in counts):
        kept = default_threshold(probe) if threshold is None else threshold
        table = accuracy.accuracy_table(con, probe=probe, axes=("model",), epoch=epoch, seed=seed)
        lengths = {
            str(r["model"]): r
            for r in accuracy.effective_lengths(
                con, probe=probe, epoch=epoch, threshold=kept, seed=seed
            ).iter_rows(named=True)
        }
        shaky = _unstable_by_model(con, probe, epoch, spread)
        drifted = _drift(con, probe, (drift_epochs or {}).get(probe, epoch), seed)
        for r in table.iter_rows(named=True):
            model = str(r["model"])
            length = lengths.get(model, {})
            rows.append(
                Overview(
                    model=model,
                    probe=probe,
                    cells=counts.get((model, probe), 0),
                    answers=int(r["answers"]),
                    parse_failures=int(r["parse_failures"]),
                    invalid=int(r["invalid"] or 0),
                    failed=int(r["errors"]),
                    mean_accuracy=r["mean_accuracy"],
                    accuracy_lo=r["accuracy_lo"],
                    accuracy_hi=r["accuracy_hi"],
                    effective_length=length.get("effective_length"),
                    threshold=kept,
                    longest_tested=length.get("longest_tested"),
                    length_unit=length.get("length_unit"),
                    unstable=shaky.get(model, 0),
                    drift=drifted.get(model, (None, None))[0],
                    drift_diff=drifted.get(model, (None, None))[1],
                )
            )
    return rows


def _cells(con: duckdb.DuckDBPyConnection, epoch: str | None) -> dict[tuple[str, str], int]:
    """Results per (model, probe): of one epoch (an epoch filter reaches below results'
    window), else of every epoch, counted by the answer tallies."""
    if epoch is not None:
        sql = "SELECT model, probe, count(*) FROM results WHERE epoch = $epoch GROUP BY ALL"
    else:
        sql = (
            "SELECT t.model, t.probe, sum(t.answers) FROM answer_tallies t "
            "SEMI JOIN cells c ON c.cell_id = t.cell_id GROUP BY ALL HAVING sum(t.answers) > 0"
        )
    found = con.execute(sql, {"epoch": epoch} if epoch is not None else {}).fetchall()
    return {(str(m), str(p)): int(n) for m, p, n in found}


def _unstable_by_model(
    con: duckdb.DuckDBPyConnection, probe: str, epoch: str | None, spread: float
) -> dict[str, int]:
    unstable = (
        accuracy.unstable_cells(con, spread=spread, probe=probe, epoch=epoch)
        if epoch is not None
        else tallied.unstable_configs(con, probe, spread)  # every epoch: from the tallies
    )
    by_model = unstable.group_by("model").len().iter_rows() if unstable.height else []
    return {str(m): int(n) for m, n in by_model}


def _drift(
    con: duckdb.DuckDBPyConnection, probe: str, epoch: str | None, seed: int
) -> dict[str, tuple[bool | None, float | None]]:
    if epoch is None:
        return {}
    try:
        found = drift.drift_summary(con, epoch, seed, probe=probe)
    except (duckdb.Error, ValueError):  # a figure to show, never a reason to fail the table
        return {}
    return {
        d["model"]: (None, None) if d["previous"] is None else (bool(d["drift"]), d["diff"])
        for d in found
    }


def thresholds_kept(rows: Sequence[Overview]) -> str:
    """The effective length's threshold: one ("85%"), or each with its probes ("85% for recall;
    85.6% for niah": RULER's probes keep RULER's own)."""
    by_threshold: dict[float, list[str]] = {}
    for r in rows:
        probes = by_threshold.setdefault(r.threshold, [])
        if r.probe not in probes:
            probes.append(r.probe)
    if len(by_threshold) <= 1:
        return f"{next(iter(by_threshold), 85.0):g}%"
    return "; ".join(f"{t:g}% for {', '.join(ps)}" for t, ps in by_threshold.items())
