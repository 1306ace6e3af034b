"""Intervals, paired comparisons, drift and unstable cells on real (small) warehouses."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from needlescope.warehouse.stats import accuracy, drift, intervals
from needlescope.warehouse.stats import significance as sig
from needlescope.warehouse.stats.significance import Side
from needlescope.warehouse.store import Warehouse, figures

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Sweep:
    """Writes synthetic runs, cells, answers and needle outcomes into a real warehouse.

    A cell's context id depends on its axes only (length, needle count, repeat, filler), so
    two models' cells pair up as in a real sweep; its cell id adds the model.
    """

    def __init__(self, root: Path) -> None:
        self.store = Warehouse(root).ensure()
        self.rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.cells: set[str] = set()
        self.clock = 0

    def run(self, run_id: str, epoch: str, config: str = "nightly", day: int = 0) -> None:
        self.rows[("runs", "")].append(
            {
                "run_id": run_id,
                "epoch": epoch,
                "event": "start",
                "at": NOW + timedelta(days=day),
                "config_name": config,
            }
        )

    def answer(
        self,
        model: str,
        epoch: str,
        length: int,
        hits: list[bool] | None,
        *,
        repeat: int = 0,
        run_id: str | None = None,
        error: str | None = None,
        accuracy: float | None = None,
        filler: str = "pattern",
        validity: str | None = None,
        empty: bool = False,
    ) -> None:
        """``hits``: one bool per needle; None is a parse failure (or, with ``error``, a
        failed request); accuracy defaults to the share of needles hit. ``validity``: stored
        as given (None: not written, as before the column existed); ``empty``: an empty
        reply, neither parsed nor a parse failure."""
        needle_count = 4 if hits is None else len(hits)
        context_id = f"ctx-{length}-{needle_count}-{repeat}-{filler}"
        cell_id = f"{model}-{context_id}"
        run_id = run_id or f"run-{epoch}"
        if cell_id not in self.cells:
            self.cells.add(cell_id)
            self.rows[("cells", model)].append(
                {
                    "cell_id": cell_id,
                    "context_id": context_id,
                    "run_id": run_id,
                    "created_at": NOW,
                    "model": model,
                    "probe": "recall",
                    "filler": filler,
                    "placement": "even",
                    "region": "whole",
                    "prompt_version": "v1",
                    "length": length,
                    "length_unit": "tokens",
                    "needle_count": needle_count,
                    "repeat": repeat,
                    "expected": json.dumps(list(range(needle_count))),
                }
            )
        parsed = hits is not None and error is None
        if parsed and accuracy is None:
            assert hits is not None
            accuracy = 100.0 * sum(hits) / len(hits)
        self.clock += 1
        self.rows[("answers", model)].append(
            {
                "run_id": run_id,
                "epoch": epoch,
                "cell_id": cell_id,
                "model": model,
                "probe": "recall",
                "answered_at": NOW + timedelta(seconds=self.clock),
                "parse_ok": None if error or empty else parsed,
                "accuracy": accuracy if parsed else None,
                "error_kind": error,
                "validity": validity,
            }
        )
        if parsed:
            assert hits is not None
            self.rows[("needle_outcomes", model)] += [
                {
                    "run_id": run_id,
                    "epoch": epoch,
                    "cell_id": cell_id,
                    "model": model,
                    "probe": "recall",
                    "needle_index": i + 1,
                    "expected": i,
                    "in_lcs": hit,
                    "outcome": "correct" if hit else "missing",
                }
                for i, hit in enumerate(hits)
            ]

    def connect(self) -> duckdb.DuckDBPyConnection:
        for (table, model), rows in self.rows.items():
            self.store.append(table, rows, parts=["recall", model] if model else [])
        self.rows.clear()
        return self.store.connect()


def pattern(hit_count: int, needles: int = 4) -> list[bool]:
    return [i < hit_count for i in range(needles)]


def row(frame: pl.DataFrame, **where: Any) -> dict[str, Any]:
    matches = frame.filter(*(pl.col(k) == v for k, v in where.items()))
    assert matches.height == 1, matches
    return matches.row(0, named=True)


# ----------------------------------------------------------------------------- intervals


def test_wilson_interval_matches_the_textbook_formula() -> None:
    lo, hi = intervals.wilson_interval(81, 263)
    assert (lo, hi) == pytest.approx((0.2553, 0.3662), abs=5e-5)
    # Closed form by hand for 0 of 10: (0, z² / (n + z²)).
    z2 = 1.959964**2
    assert intervals.wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))
    assert intervals.wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    assert all(math.isnan(x) for x in intervals.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        intervals.wilson_interval(5, 4)


def test_wilson_interval_contains_the_rate_and_narrows_with_n() -> None:
    widths = []
    for n in (10, 100, 1000, 10000):
        lo, hi = intervals.wilson_interval(3 * n // 10, n)
        assert lo < 0.3 < hi
        widths.append(hi - lo)
    assert widths == sorted(widths, reverse=True)
    # a wider z gives a wider interval
    assert intervals.wilson_interval(30, 100, z=2.576)[0] < intervals.wilson_interval(30, 100)[0]


def test_bootstrap_is_deterministic_for_a_seed_and_order_free() -> None:
    values = [float(v) for v in (0, 10, 25, 50, 50, 75, 80, 100, 100, 100, 40, 60)]
    first = intervals.bootstrap_mean_interval(values, seed=7)
    assert intervals.bootstrap_mean_interval(values, seed=7) == first
    assert intervals.bootstrap_mean_interval(list(reversed(values)), seed=7) == first
    assert intervals.bootstrap_mean_interval(pl.Series(values), seed=7) == first
    assert intervals.bootstrap_mean_interval(values, seed=8) != first
    mean = sum(values) / len(values)
    lo, hi = first
    assert lo < mean < hi
    assert lo >= 0 and hi <= 100
    # roughly the normal interval of the mean: mean ± 1.96 · sd / √n
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    half = 1.96 * sd / len(values) ** 0.5
    assert lo == pytest.approx(mean - half, abs=half * 0.25)
    assert hi == pytest.approx(mean + half, abs=half * 0.25)


def test_remembered_resample_positions_draw_what_sample_draws() -> None:
    """The bootstrap gathers positions drawn once per (n, resamples, seed): the very values
    Series.sample draws from each series of that length, so every interval is unchanged."""
    rng = random.Random(3)
    for n in (1, 2, 12, 100, 1000):
        for seed in (0, 7):
            values = pl.Series(sorted(rng.uniform(0, 100) for _ in range(n)))
            sampled = values.sample(n * 300, with_replacement=True, seed=seed)
            gathered = values.gather(intervals._resample_indices(n, 300, seed))
            assert sampled.equals(gathered)
            # both ways (remembered positions, and a draw too large to remember) give the
            # interval of the means of Series.sample's resamples
            for resamples in (300, intervals._CACHED_DRAWS // n + 1):
                drawn = values.sample(n * resamples, with_replacement=True, seed=seed)
                means = drawn.reshape((resamples, n)).arr.mean()
                expected = (
                    means.quantile((1 - 0.95) / 2, interpolation="linear"),
                    means.quantile(1 - (1 - 0.95) / 2, interpolation="linear"),
                )
                assert intervals._bootstrap(values, resamples, seed, 0.95) == expected


def test_bootstrap_edge_cases_and_the_normal_fallback() -> None:
    assert all(math.isnan(x) for x in intervals.bootstrap_mean_interval([]))
    assert intervals.bootstrap_mean_interval([42.0]) == (42.0, 42.0)
    assert intervals.bootstrap_mean_interval([5.0, None, float("nan"), 5.0]) == (5.0, 5.0)
    narrow = intervals.bootstrap_mean_interval([0.0, 100.0] * 200, resamples=500)
    wide = intervals.bootstrap_mean_interval([0.0, 100.0] * 5, resamples=500)
    assert wide[1] - wide[0] > narrow[1] - narrow[0]
    mean, lo, hi, method = intervals.mean_interval([0.0, 100.0] * 3000)
    assert method == "normal" and mean == 50.0
    half = 1.959964 * 50 * (6000 / 5999) ** 0.5 / 6000**0.5  # z · sd / √n
    assert (lo, hi) == pytest.approx((50 - half, 50 + half))
    assert intervals.mean_interval([1.0, 2.0])[3] == "bootstrap"
    assert intervals.mean_interval([])[3] is None


def test_mcnemar_exact_p_against_the_binomial() -> None:
    def exact(b01: int, b10: int) -> float:
        n, k = b01 + b10, min(b01, b10)
        return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)

    assert intervals.mcnemar_p(9, 2) == pytest.approx(0.0654, abs=5e-5)
    for b01, b10 in [(9, 2), (2, 9), (0, 6), (5, 5), (30, 12), (0, 0), (1, 0), (120, 80)]:
        assert intervals.mcnemar_p(b01, b10) == pytest.approx(exact(b01, b10), rel=1e-9)
    # large counts: summed in log space, still exact to float precision
    assert intervals.mcnemar_p(700, 600) == pytest.approx(exact(700, 600), rel=1e-9)
    assert 0 < intervals.mcnemar_p(6_000, 4_000) < 1e-80


# ----------------------------------------------------------------------------- accuracy table


def test_accuracy_table_counts_rates_and_intervals(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1")
    for repeat, hits in enumerate([4, 4, 3, 2, 4]):
        sweep.answer("m", "e1", 1000, pattern(hits), repeat=repeat)
    sweep.answer("m", "e1", 1000, None, repeat=5)  # parse failure
    sweep.answer("m", "e1", 1000, None, repeat=6, error="timeout")
    sweep.answer("m", "e1", 2000, pattern(1), repeat=0)
    sweep.answer("m", "e1", 4000, None)  # nothing parsed at 4000
    con = sweep.connect()

    table = accuracy.accuracy_table(con)
    one = row(table, model="m", length=1000, needle_count=4)
    assert (one["answers"], one["errors"], one["graded"], one["parse_failures"]) == (6, 1, 5, 1)
    assert one["mean_accuracy"] == pytest.approx((100 + 100 + 75 + 50 + 100) / 5)
    assert one["accuracy_lo"] < one["mean_accuracy"] < one["accuracy_hi"]
    assert one["interval_method"] == "bootstrap"
    assert (one["needles"], one["needles_correct"]) == (20, 17)
    assert one["needle_hit_rate"] == pytest.approx(17 / 20)
    assert (one["needle_hit_lo"], one["needle_hit_hi"]) == pytest.approx(
        intervals.wilson_interval(17, 20)
    )
    assert one["parse_failure_rate"] == pytest.approx(1 / 6)
    assert (one["parse_failure_lo"], one["parse_failure_hi"]) == pytest.approx(
        intervals.wilson_interval(1, 6)
    )
    single = row(table, model="m", length=2000)
    assert single["accuracy_lo"] == single["accuracy_hi"] == 25.0
    unparsed = row(table, model="m", length=4000)
    assert (unparsed["graded"], unparsed["parse_failure_rate"]) == (0, 1.0)
    assert unparsed["mean_accuracy"] is None and unparsed["accuracy_lo"] is None
    assert unparsed["interval_method"] is None and unparsed["needle_hit_rate"] is None
    assert accuracy.accuracy_table(con).equals(table)  # same seed, same table
    assert accuracy.accuracy_table(con, epoch="other").height == 0
    by_epoch = accuracy.accuracy_table(con, axes=["model", "epoch"])
    assert row(by_epoch, model="m", epoch="e1")["graded"] == 6
    pooled = accuracy.accuracy_table(con, axes=["model"])
    assert row(pooled, model="m")["needles"] == 24
    with pytest.raises(ValueError, match="not columns"):
        accuracy.accuracy_table(con, axes=["no_such_axis"])


def test_summary_tables_carry_the_bootstrap_and_wilson_intervals(tmp_path: Path) -> None:
    """The report's tables and charts (figures.summary_sql figures) get the intervals defined
    here, not the Student t interval of the recall_stats view."""
    from needlescope.warehouse.stats import summaries as stats

    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1")
    hits = [4, 4, 3, 2, 4, 0, 4]
    for repeat, n in enumerate(hits):
        sweep.answer("m", "e1", 1000, pattern(n), repeat=repeat)
    sweep.answer("m", "e1", 1000, None, repeat=9)  # parse failure
    sweep.answer("m", "e1", 2000, None)  # nothing parsed at 2000
    con = sweep.connect()
    summary = stats.recall_stats(con)
    table = accuracy.with_intervals(con, summary, figures.AXES, seed=3)
    assert table.height == summary.height and table.columns[: len(summary.columns)] == list(
        summary.columns
    )
    one = row(table, length=1000)
    accuracies = [n * 25.0 for n in hits]
    mean, lo, hi, method = intervals.mean_interval(accuracies, seed=3)
    assert (one["mean_accuracy"], one["ci95_low"], one["ci95_high"]) == pytest.approx(
        (mean, lo, hi)
    )
    assert method == one["interval_method"] == "bootstrap"
    t_interval = row(summary, length=1000)
    assert (one["ci95_low"], one["ci95_high"]) != pytest.approx(
        (t_interval["ci95_low"], t_interval["ci95_high"])
    )
    assert (one["parse_failure_lo"], one["parse_failure_hi"]) == pytest.approx(
        intervals.wilson_interval(1, 8)
    )
    unparsed = row(table, length=2000)
    assert unparsed["ci95_low"] is None and unparsed["interval_method"] is None
    assert unparsed["parse_failure_lo"] == pytest.approx(intervals.wilson_interval(1, 1)[0])


# ----------------------------------------------------------------------------- effective length


def test_effective_length_needs_every_shorter_length_to_pass() -> None:
    means = [100.0, 95.0, 90.0, 70.0, 88.0]
    table = pl.DataFrame(
        {
            "model": ["m"] * 5 + ["weak"] * 2,
            "length": [1000, 2000, 3000, 4000, 5000, 1000, 2000],
            "mean_accuracy": [*means, 80.0, 99.0],
            "accuracy_lo": [98.0, 86.0, 80.0, 60.0, 85.0, 70.0, 95.0],
            "accuracy_hi": [100.0, 99.0, 96.0, 86.0, 92.0, 86.0, 100.0],
        }
    ).sample(fraction=1.0, shuffle=True, seed=3)  # the rule must not depend on row order
    result = accuracy.effective_context_length(table, threshold=85.0)
    m = row(result, model="m")
    assert m["effective_length"] == 3000  # 88 at 5k does not count: 4k failed
    assert m["effective_length_lo"] == 2000  # lower bounds: 98, 86, 80 ✗
    assert m["effective_length_hi"] == 5000  # upper bounds all ≥ 85
    assert (m["lengths_tested"], m["longest_tested"]) == (5, 5000)
    weak = row(result, model="weak")
    assert weak["effective_length"] is None  # the shortest length already fails
    assert weak["effective_length_lo"] is None and weak["effective_length_hi"] == 2000
    with pytest.raises(ValueError, match="several rows"):
        accuracy.effective_context_length(pl.concat([table, table]))


def test_effective_lengths_pool_needle_counts_from_the_warehouse(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1")
    for repeat in range(3):
        sweep.answer("m", "e1", 1000, pattern(4), repeat=repeat)
        sweep.answer("m", "e1", 1000, pattern(2, 2), repeat=repeat)
        sweep.answer("m", "e1", 2000, pattern(4), repeat=repeat)
        sweep.answer("m", "e1", 2000, pattern(1, 2), repeat=repeat)  # 50 at 2000
    con = sweep.connect()
    result = accuracy.effective_lengths(con, threshold=85.0)
    assert result.height == 1
    assert row(result, model="m")["effective_length"] == 1000  # 2000: mean 75 over both counts


# ----------------------------------------------------------------------------- paired comparison


def two_models(tmp_path: Path, better_by: int) -> duckdb.DuckDBPyConnection:
    """Models a and b answer the same 3 lengths × 4 repeats; b hits ``better_by`` more
    needles of 4 on every cell (identical answers when 0)."""
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1")
    for length in (1000, 2000, 4000):
        for repeat in range(4):
            base = 1 + (repeat + length // 1000) % 2
            sweep.answer("a", "e1", length, pattern(base), repeat=repeat)
            sweep.answer("b", "e1", length, pattern(base + better_by), repeat=repeat)
    # a parse failure on one side and a failed request on the other: dropped, counted apart
    sweep.answer("a", "e1", 8000, None)
    sweep.answer("b", "e1", 8000, pattern(4))
    sweep.answer("a", "e1", 8000, pattern(4), repeat=1)
    sweep.answer("b", "e1", 8000, None, repeat=1, error="timeout")
    sweep.answer("b", "e1", 16000, pattern(4))  # a never answered it
    return sweep.connect()


def test_a_better_model_is_significantly_better(tmp_path: Path) -> None:
    con = two_models(tmp_path, better_by=2)
    found = sig.paired_comparison(con, Side("a"), Side("b"))
    assert found.pairing == "epoch, context_id"
    assert found.n_pairs == 12
    assert (found.dropped_parse_failures, found.dropped_errors) == (1, 1)
    assert (found.unpaired_a, found.unpaired_b) == (0, 1)
    assert found.diff == pytest.approx(50.0)
    assert found.diff == pytest.approx(found.mean_b - found.mean_a)
    assert found.diff_lo > 0 and found.significant
    assert (found.needle_pairs, found.mcnemar_b01, found.mcnemar_b10) == (48, 24, 0)
    assert found.mcnemar_p == pytest.approx(2 / 2**24)
    cells = found.cells
    # three lengths, plus 8000 where every pair was dropped; not 16000, which a never answered
    assert cells["length"].to_list() == [1000, 2000, 4000, 8000]
    first = row(cells, length=1000)
    assert (first["n"], first["diff"], first["significant"]) == (4, 50.0, True)
    assert (first["mcnemar_b01"], first["mcnemar_b10"]) == (8, 0)
    assert first["mcnemar_p"] == pytest.approx(2 / 2**8)
    dropped = row(cells, length=8000)
    assert (dropped["n"], dropped["dropped_parse_failures"], dropped["dropped_errors"]) == (0, 1, 1)
    assert dropped["diff"] is None and dropped["mcnemar_p"] == 1.0
    # reversed sides: the same figures with the sign flipped; the same seed, the same interval
    back = sig.paired_comparison(con, Side("b", "e1"), Side("a", "e1"))
    assert back.pairing == "context_id"
    assert (back.diff, back.diff_lo, back.diff_hi) == pytest.approx(
        (-found.diff, -found.diff_hi, -found.diff_lo)
    )
    assert (back.mcnemar_b01, back.mcnemar_b10) == (0, 24)
    again = sig.paired_comparison(con, Side("a"), Side("b"))
    assert again == found and again.cells.equals(found.cells)
    assert json.loads(json.dumps(found.to_dict()))["diff"] == pytest.approx(50.0)


def test_identical_answers_are_no_difference(tmp_path: Path) -> None:
    con = two_models(tmp_path, better_by=0)
    found = sig.paired_comparison(con, Side("a"), Side("b"))
    assert found.n_pairs == 12
    assert found.mean_a == found.mean_b and found.diff == 0.0
    assert found.diff_lo == found.diff_hi == 0.0
    assert not found.significant
    assert (found.mcnemar_b01, found.mcnemar_b10, found.mcnemar_p) == (0, 0, 1.0)
    assert not found.cells["significant"].any()
    with pytest.raises(ValueError, match="itself"):
        sig.paired_comparison(con, Side("a", "e1"), Side("a"))


def test_a_comparison_is_remembered_only_for_the_same_files(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1")
    for repeat in range(4):
        sweep.answer("a", "e1", 1000, pattern(1), repeat=repeat)
        sweep.answer("b", "e1", 1000, pattern(3), repeat=repeat)
    con = sweep.connect()
    first = sig.paired_comparison(con, Side("a", "e1"), Side("b", "e1"))
    assert sig.paired_comparison(con, Side("a", "e1"), Side("b", "e1")) is first
    # a rerun's later answers of b: new files, so the comparison is made again from them
    for repeat in range(4):
        sweep.answer("b", "e1", 1000, pattern(1), repeat=repeat, run_id="run-e1b")
    con.close()
    con = sweep.connect()
    again = sig.paired_comparison(con, Side("a", "e1"), Side("b", "e1"))
    assert (first.diff, again.diff) == (50.0, 0.0)


# ----------------------------------------------------------------------------- drift


def three_epochs(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """m in e1, e2 (the same answers) and e3 (worse on every cell); "other" only in e3; an
    epoch of another config started between e2 and e3 must not count as the previous one."""
    sweep = Sweep(tmp_path)
    for day, epoch in enumerate(("e1", "e2", "e3")):
        sweep.run(f"run-{epoch}", epoch, day=2 * day)
    sweep.run("run-x", "x1", config="other-config", day=3)
    for epoch in ("e1", "e2", "e3", "x1"):
        for length in (1000, 2000):
            for repeat in range(5):
                hits = 4 - (repeat % 2)
                if epoch == "e3":
                    hits -= 2
                sweep.answer("m", epoch, length, pattern(hits), repeat=repeat)
    sweep.answer("other", "e3", 1000, pattern(3))
    return sweep.connect()


def test_drift_is_flagged_for_a_drop_and_not_for_the_same_answers(tmp_path: Path) -> None:
    con = three_epochs(tmp_path)
    assert drift.previous_epoch(con, "m", "e3") == "e2"
    assert drift.previous_epoch(con, "m", "e2") == "e1"
    assert drift.previous_epoch(con, "m", "e1") is None
    assert drift.previous_epoch(con, "other", "e3") is None

    dropped = drift.epoch_drift(con, "m", "e3")
    assert dropped is not None
    assert dropped.pairing == "cell_id" and dropped.a.epoch == "e2"
    assert dropped.n_pairs == 10
    assert dropped.diff == pytest.approx(-50.0) and dropped.significant
    steady = drift.epoch_drift(con, "m", "e2")
    assert steady is not None and steady.diff == 0.0 and not steady.significant
    assert drift.epoch_drift(con, "m", "e1") is None
    explicit = drift.epoch_drift(con, "m", "e3", previous="e1")
    assert explicit is not None and explicit.a.epoch == "e1" and explicit.significant

    summary = drift.drift_summary(con, "e3")
    assert json.loads(json.dumps(summary)) == summary  # JSON-able as it is
    by_model = {entry["model"]: entry for entry in summary}
    assert set(by_model) == {"m", "other"}
    m = by_model["m"]
    assert (m["previous"], m["n_pairs"], m["drift"]) == ("e2", 10, True)
    assert m["mean_now"] - m["mean_previous"] == pytest.approx(m["diff"])
    assert m["lo"] <= m["diff"] <= m["hi"] < 0
    assert m["mcnemar_p"] < 0.001
    assert by_model["other"]["previous"] is None and by_model["other"]["drift"] is False
    assert [e["drift"] for e in drift.drift_summary(con, "e2")] == [False]


# ----------------------------------------------------------------------------- unstable cells


def test_unstable_cells_list_configs_whose_repeats_disagree(tmp_path: Path) -> None:
    sweep = Sweep(tmp_path)
    sweep.run("run-e1", "e1")
    for repeat, hits in enumerate([4, 1, 4]):  # 100, 25, 100: spread 75
        sweep.answer("m", "e1", 1000, pattern(hits), repeat=repeat)
    for repeat, hits in enumerate([4, 3, 4]):  # 100, 75, 100: spread 25
        sweep.answer("m", "e1", 2000, pattern(hits), repeat=repeat)
    for repeat in range(3):  # the same every time
        sweep.answer("m", "e1", 4000, pattern(2), repeat=repeat)
    sweep.answer("m", "e1", 8000, pattern(4))
    sweep.answer("m", "e1", 8000, None, repeat=1)  # a parse failure is not a 0
    con = sweep.connect()
    con.execute("SET VARIABLE recall_unstable_range = 60")

    found = accuracy.unstable_cells(con, spread=20.0)
    assert found["length"].to_list() == [1000, 2000]
    first = row(found, length=1000)
    assert (first["repeats"], first["graded"]) == (3, 3)
    assert (first["min_accuracy"], first["max_accuracy"], first["accuracy_range"]) == (
        25.0,
        100.0,
        75.0,
    )
    assert first["accuracies"] == [100.0, 25.0, 100.0]  # by repeat
    assert accuracy.unstable_cells(con, spread=30.0)["length"].to_list() == [1000]
    assert accuracy.unstable_cells(con, spread=75.0).height == 0  # strictly wider than the spread
    assert accuracy.unstable_cells(con, epoch="none").height == 0
    # the connection's own threshold for the recall_stats view is left as it was
    assert con.sql("SELECT getvariable('recall_unstable_range')").fetchall() == [(60.0,)]
