"""The report's statistics over every epoch read the tallies (warehouse/stats/tallied.py):
they give what the same statistics over `results` give, intervals included, in every state
of the rollups, on test_answer_tallies' warehouse of awkward cases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from polars.testing import assert_frame_equal

from needlescope.warehouse.probes.cases import report as cases_report
from needlescope.warehouse.report.drilldown import select, targets
from needlescope.warehouse.stats import accuracy, tallied
from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.stats.intervals import BOOTSTRAP_MAX_N, mean_interval
from needlescope.warehouse.store import Warehouse, compaction, rollups, rollups_update, views
from needlescope.warehouse.store.figures import AXES, summary_sql
from needlescope.warehouse.store.figures_tallied import tallied_summary_sql
from tests.warehouse.test_answer_tallies import awkward
from tests.warehouse.test_view_fast_paths import answer

GROUPINGS = [("model",), accuracy.EFFECTIVE_LENGTH_AXES, ("model", "length", "needle_count")]


def same(fast: pl.DataFrame, plain: pl.DataFrame) -> None:
    assert_frame_equal(fast, plain, check_exact=False, rel_tol=1e-12, abs_tol=1e-9)


def check_tables(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """accuracy_table from the tallies equals it from `results`, for each probe and grouping;
    returns recall's per-model table."""
    for probe in ("recall", "counting_stars", "cases"):
        for axes in GROUPINGS:
            fast = accuracy.accuracy_table(con, probe=probe, axes=axes)
            same(fast, accuracy.accuracy_table(con, probe=probe, axes=axes, tallies=False))
    check_intervals_and_unstable(con)
    check_drilldown(con)
    return accuracy.accuracy_table(con, probe="recall", axes=("model",))


def check_intervals_and_unstable(con: duckdb.DuckDBPyConnection) -> None:
    """The report's intervals, unstable configs, hallucinations and failed requests from the
    tallies equal the plain ones (over a copy of `results`)."""
    con.execute("CREATE OR REPLACE TEMP TABLE snap AS SELECT * FROM results")
    same(stats.hallucination_rates(con), stats.hallucination_rates(con, source="snap"))
    # the report hands over the statistics table it read: the same rates
    table = stats.recall_stats(con, 30.0)
    same(stats.hallucination_rates(con), stats.hallucination_rates(con, stats_table=table))
    assert "needlescope_stats_table" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    same(stats.error_counts(con), stats.error_counts(con, source="snap"))
    # the statistics table and the pooled figures, read with their values in one query each
    for axes, probe in ((AXES, None), (["probe", "model"], "recall"), (["probe"], "cases")):
        where = f"(SELECT * FROM snap WHERE probe = '{probe}')" if probe else "snap"
        frame = con.sql(f"{summary_sql(axes, where)} ORDER BY ALL").pl()
        plain = accuracy.with_intervals(con, frame, axes, where)
        condition, params = (tallied.PROBE, {"probe": probe}) if probe else ("", {})
        valued_sql = f"{tallied_summary_sql(axes, condition, values=True)} ORDER BY ALL"
        valued = con.sql(valued_sql, params=params).pl()
        assert valued["valued"].null_count() < valued.height
        same(tallied.summary_with_intervals(valued, axes), plain)
    for unstable_range in (0.0, 30.0):
        flagged = tallied.flagged(tallied.config_stats(con), unstable_range).drop("valued")
        same(flagged, stats.recall_stats(con, unstable_range))
    for spread in (0.0, 15.0, 30.0):
        plain = accuracy.unstable_cells(con, spread=spread)
        fast = tallied.unstable_configs(con, "recall", spread)
        same(fast.drop("valued"), plain.drop("accuracies"))
        # the tallies' values with their counts are the answers' multiset
        expanded = [
            sorted(v["accuracy"] for v in valued for _ in range(v["n"]))
            for valued in fast["valued"]
        ]
        assert expanded == [sorted(a) for a in plain["accuracies"]]


def check_drilldown(con: duckdb.DuckDBPyConnection) -> None:
    """The drill-down's counts from the tallies and its picks from the latest epochs first
    equal those over a copy of `results`."""
    for target in (targets.recall_target("recall", []), cases_report.cases_target([], [])):
        fast = select.config_counts(con, target, "results").sort("key")
        same(fast, select.config_counts(con, target, "snap").sort("key"))
        for per_cell in (1, 2, 8):
            same(
                select.pick(con, target, "results", per_cell),
                select.pick(con, target, "snap", per_cell),
            )


def invented(
    run: str, epoch: str, cell_id: str, *intervals: tuple[int, int]
) -> list[dict[str, Any]]:
    """Hallucination rows of an answer: one per (key_from, key_to) given."""
    return [
        {
            "run_id": run,
            "epoch": epoch,
            "cell_id": cell_id,
            "model": "m",
            "probe": "recall",
            "answer_index": i,
            "value": json.dumps(f"x{i}"),
            "key_from": key_from,
            "key_to": key_to,
        }
        for i, (key_from, key_to) in enumerate(intervals)
    ]


HALLUCINATIONS = [
    *invented("r1", "e1", "a0", (0, 1), (1, 2)),
    *invented("r1", "e2", "a0", (1, 2)),
    *invented("r1", "e1", "a3", (2, 3), (2, 3)),
    *invented("r2", "e3", "a2", (0, 1)),  # an invalid answer's: counted apart, then displaced
    *invented("r3", "e3", "a2", (3, 4)),  # written before its answer (which comes later)
    *invented("r9", "e1", "a1", (0, 1)),  # of an attempt that never gets an answer
]


def in_every_state(
    root: Path, store: Warehouse, check: Callable[[duckdb.DuckDBPyConnection], pl.DataFrame]
) -> list[tuple[pl.DataFrame, bool]]:
    """``check`` in each state of the rollups: none, covered, fresh rows displacing a covered
    pick, updated, compacted, rebuilt. Returns each state's frame and whether the rollups were
    used."""
    found = []
    store.append("hallucinations", HALLUCINATIONS)

    def run() -> None:
        parts = rollups.split(root, compaction.snapshot(root), rollups.current(root))
        con = store.connect()
        try:
            found.append((check(con), parts.used))
        finally:
            con.close()

    run()
    rollups_update.update(root, compaction.snapshot(root))
    run()
    store.append(
        "answers",
        [answer("a2", "e3", "r3", 9, accuracy=90.0), answer("a0", "e4", "r3", 9, accuracy=80.0)],
    )
    run()
    rollups_update.update(root, compaction.snapshot(root))
    run()
    rollups_update.compact(root, min_files=1, grace_s=0.0)
    run()
    assert rollups_update.update(root, compaction.snapshot(root), rebuild=True).rebuilt
    run()
    return found


def test_accuracy_tables_equal_the_plain_ones_in_every_state(tmp_path: Path) -> None:
    store = awkward(tmp_path / "wh")
    states = in_every_state(store.root.resolve(), store, check_tables)
    assert [used for _, used in states] == [False, True, True, True, True, True]
    first, displaced = states[0][0], states[2][0]
    con = store.connect()
    try:
        # the displaced invalid answer's hallucination is gone, the pending one's counted
        rates = stats.hallucination_rates(con).filter(pl.col("hallucinations") > 0)
        assert sorted(rates.select("key_from", "key_to", "hallucinations").rows()) == [
            (0, 1, 1),
            (1, 2, 2),
            (2, 3, 2),
            (3, 4, 1),
        ]
        assert stats.error_counts(con).rows() == [("m", "timeout", 1)]
    finally:
        con.close()
    # recall: 8 graded answers of two epochs and one of a third, its failed request and two
    # invalid answers counted apart (the empty reply and the answer without a cell are none)
    row = first.row(0, named=True)
    assert (row["answers"], row["graded"], row["errors"], row["invalid"]) == (9, 9, 1, 2)
    assert row["interval_method"] == "bootstrap" and row["accuracy_lo"] < row["mean_accuracy"]
    # a later graded answer displaced an invalid pick: one more graded, one fewer invalid
    assert displaced["graded"][0] == first["graded"][0] + 2
    assert displaced["invalid"][0] == first["invalid"][0] - 1


def test_a_large_groups_interval_is_the_normal_one_of_its_values() -> None:
    values = [float(v % 7) * 10 for v in range(BOOTSTRAP_MAX_N + 5)]
    valued = [{"accuracy": a, "n": values.count(a)} for a in sorted(set(values))]
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    fast = tallied.interval(len(values), mean, sd, valued, 0)
    plain = mean_interval(values, seed=0)[1:]
    assert fast[2] == plain[2] == "normal"
    assert abs(fast[0] - plain[0]) < 1e-9 and abs(fast[1] - plain[1]) < 1e-9
    small = values[:40]
    counted = [{"accuracy": a, "n": small.count(a)} for a in sorted(set(small))]
    lo, hi, method = tallied.interval(0, None, None, None, 3)  # no graded answer
    assert method is None and lo != lo and hi != hi  # NaN, as mean_interval([]) gives
    boot = tallied.interval(40, sum(small) / 40, 0.0, counted, 3)
    assert boot == mean_interval(small, seed=3)[1:] and boot[2] == "bootstrap"


def test_a_connection_beside_reads_the_same_snapshot(tmp_path: Path) -> None:
    store = awkward(tmp_path / "wh")
    con = store.connect()
    try:
        other = views.beside(con)
        # an answer written after the report's connection took its snapshot
        store.append("answers", [answer("a0", "e9", "r9", 1, accuracy=10.0)])
        query = "SELECT (SELECT count(*) FROM results), (SELECT sum(answers) FROM answer_tallies)"
        assert other.execute(query).fetchall() == con.execute(query).fetchall()
        fresh = store.connect()
        assert fresh.execute(query).fetchone()[0] == con.execute(query).fetchone()[0] + 1
        fresh.close()
        other.close()
    finally:
        con.close()
