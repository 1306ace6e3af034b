"""Gates judged on a real (small) warehouse agree with the warehouse's own statistics: the
accuracy table's intervals, and the drift of an epoch against its previous one."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from needlescope.gates._config import parse_gates
from needlescope.gates._results import FAILED, NOT_ENOUGH_DATA, PASSED, DropFigures, LengthFigure
from needlescope.warehouse.stats.accuracy import accuracy_table
from needlescope.warehouse.stats.drift import epoch_drift
from needlescope.warehouse.stats.gates import (
    epoch_results,
    evaluate_epoch,
    previous_results,
    serving_changes,
)
from tests.warehouse.test_significance import Sweep, pattern

GATES = parse_gates(
    [
        {"probe": "recall", "min_accuracy": 90},
        {"probe": "recall", "max_drop": 5},
        {"probe": "recall", "min_effective_length": 2000},
        {"max_invalid_rate": 0.05},
        {"max_failed_cells": 0},
    ]
)


def two_nights(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """Night e1: 12 cells at 1000 and 2000 tokens, every needle found. Night e2: the same
    cells, half the needles found at 2000; one more cell failed, one reply truncated; the
    provider reports another model version."""
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1", day=0)
    sweep.run("run-e2", "e2", day=1)
    for repeat in range(12):
        for length in (1000, 2000):
            sweep.answer("m", "e1", length, pattern(4), repeat=repeat)
            sweep.answer("m", "e2", length, pattern(4 if length == 1000 else 2), repeat=repeat)
    sweep.answer("m", "e2", 2000, None, repeat=12, error="timeout")
    sweep.answer("m", "e2", 1000, pattern(0), repeat=13, validity="truncated")
    for row in sweep.rows[("answers", "m")]:
        row["model_version"] = f"gemini-2.5-flash-00{1 if row['epoch'] == 'e1' else 2}"
    return sweep.connect()


def test_an_epoch_is_judged_with_the_warehouses_figures(tmp_path: Path) -> None:
    con = two_nights(tmp_path)
    results = {r.kind: r for r in evaluate_epoch(con, GATES, "e2")}
    assert {k: r.status for k, r in results.items()} == {
        "min_accuracy": FAILED,
        "max_drop": FAILED,
        "min_effective_length": FAILED,
        "max_invalid_rate": PASSED,  # 1 of 25 answers: 0.04
        "max_failed_cells": FAILED,
    }

    table = accuracy_table(con, axes=("model", "length_unit", "length"), epoch="e2")
    expected = tuple(
        LengthFigure(
            row["length_unit"],
            row["length"],
            row["graded"],
            row["mean_accuracy"],
            row["accuracy_lo"],
            row["accuracy_hi"],
            row["interval_method"],
        )
        for row in table.iter_rows(named=True)
    )
    assert results["min_accuracy"].figures == expected
    assert [f.mean for f in expected] == [100.0, 50.0]

    drift = epoch_drift(con, "m", "e2")
    assert drift is not None
    assert results["max_drop"].figures == DropFigures(
        previous_epoch="e1",
        pairs=drift.n_pairs,
        mean_previous=drift.mean_a,
        mean_now=drift.mean_b,
        drop=-drift.diff,
        drop_lo=-drift.diff_hi,
        drop_hi=-drift.diff_lo,
        interval_method=drift.interval_method,
    )
    assert drift.n_pairs == 24 and drift.diff == pytest.approx(-25.0)

    assert results["max_failed_cells"].message == (
        "gate max_failed_cells 0 failed: model m: 1 of 26 cells failed (timeout 1), more than 0"
    )


def test_the_first_epoch_has_no_drop_to_judge(tmp_path: Path) -> None:
    con = two_nights(tmp_path)
    assert previous_results(con, "e1", epoch_results(con, "e1")) is None
    results = evaluate_epoch(con, GATES, "e1", models=["m", "absent"])
    drop = [r for r in results if r.kind == "max_drop" and r.model == "m"]
    assert [r.message for r in drop] == [
        "gate recall max_drop 5 not enough data: model m: no previous epoch to compare with"
    ]
    assert {r.status for r in results if r.model == "absent"} == {NOT_ENOUGH_DATA}
    by_model = {r.model: r.status for r in evaluate_epoch(con, GATES[:1], "e1", models=["m", "x"])}
    assert by_model == {"m": PASSED, "x": NOT_ENOUGH_DATA}


def test_what_changed_in_serving_since_the_previous_epoch(tmp_path: Path) -> None:
    con = two_nights(tmp_path)
    assert serving_changes(con, "e2") == {"m": ["model version gemini-2.5-flash-001 → -002"]}
    assert serving_changes(con, "e1") == {}


def test_serving_changes_are_told_apart_per_model(tmp_path: Path) -> None:
    """Read in two passes (the epoch's rows, then the previous epochs'), each model is still
    held to its own previous epoch: m changed its version, n did not, k is new in e2."""
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1", day=0)
    sweep.run("run-e2", "e2", day=1)
    for repeat in range(3):
        for epoch in ("e1", "e2"):
            sweep.answer("m", epoch, 1000, pattern(4), repeat=repeat)
            sweep.answer("n", epoch, 1000, pattern(4), repeat=repeat)
        sweep.answer("k", "e2", 1000, pattern(4), repeat=repeat)
    for row in sweep.rows[("answers", "m")]:
        row["model_version"] = f"v{1 if row['epoch'] == 'e1' else 2}"
    for row in sweep.rows[("answers", "n")]:
        row["model_version"] = "v7"
    for row in sweep.rows[("answers", "k")]:
        row["model_version"] = "v9"
    con = sweep.connect()
    assert serving_changes(con, "e2") == {"m": ["model version v1 → v2"], "n": []}
