"""accuracy_by_length and recall_stats read the answer tallies (figures_tallied.py): they give
what their plain definitions over `results` give, in every state of the rollups, on a
warehouse with the awkward cases — repeats and epochs with equal accuracies (an exact median
of an even count), a counting_stars reply with no list (scored 0), invalid answers, a failure
picked for want of a graded answer, a missing latency, a NULL axis, a needle case's depth, an
answer whose cell comes later, and a later attempt displacing a covered pick."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from needlescope.warehouse.store import Warehouse, compaction, rollups, rollups_update
from needlescope.warehouse.store.figures import AXES, summary_sql
from needlescope.warehouse.store.figures_tallied import tallied_summary_sql
from tests.warehouse.test_view_fast_paths import answer, cell

# accuracy_by_length's plain definition: `results` grouped (the view before the tallies).
PLAIN_ACCURACY_BY_LENGTH = """
SELECT model, probe, length, length_unit, needle_count, filler, prompt_version,
       count(*) FILTER (WHERE error_kind IS NULL AND parse_ok IS NOT NULL) AS answers,
       count(*) FILTER (WHERE error_kind IS NULL AND NOT parse_ok) AS parse_failures,
       count(*) FILTER (WHERE error_kind IS NULL AND accuracy IS NOT NULL) AS graded,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
       avg(accuracy) FILTER (WHERE error_kind IS NULL) AS mean_accuracy,
       median(accuracy) FILTER (WHERE error_kind IS NULL) AS median_accuracy,
       min(accuracy) FILTER (WHERE error_kind IS NULL) AS min_accuracy,
       max(accuracy) FILTER (WHERE error_kind IS NULL) AS max_accuracy,
       stddev_samp(accuracy) FILTER (WHERE error_kind IS NULL) AS sd_accuracy,
       avg(latency_s) FILTER (WHERE error_kind IS NULL) AS mean_latency_s,
       count(*) FILTER (WHERE validity NOT IN ('valid', 'unknown')) AS invalid,
       array_to_string(list_transform(list_sort(map_entries(
           histogram(validity) FILTER (WHERE validity NOT IN ('valid', 'unknown'))
       )), lambda e: e.key || ' ' || e.value), ', ') AS invalid_why
FROM results
GROUP BY ALL
"""


def ordered(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    return con.sql(f"SELECT * FROM ({sql}) ORDER BY ALL NULLS FIRST").pl()


def same(fast: pl.DataFrame, plain: pl.DataFrame) -> None:
    # counts, medians, minima and maxima exact; means and deviations to rounding
    assert_frame_equal(fast, plain, check_exact=False, rel_tol=1e-12, abs_tol=1e-9)


def check_answer_figures(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Both views equal their plain definitions on ``con``; returns recall_stats."""
    same(ordered(con, "SELECT * FROM accuracy_by_length"), ordered(con, PLAIN_ACCURACY_BY_LENGTH))
    fast = ordered(con, "SELECT * FROM recall_stats")
    same(fast, ordered(con, summary_sql(AXES)))
    # any coarser grouping: epochs and repeats counted across the configs it pools
    pooled = ["probe", "model", "length_unit"]
    same(ordered(con, tallied_summary_sql(pooled)), ordered(con, summary_sql(pooled)))
    return fast


def awkward(root: Path) -> Warehouse:
    store = Warehouse(root).ensure()
    store.append(
        "cells",
        [
            *(cell(f"a{k}", repeat=k) for k in range(4)),
            cell("n1", filler=None, length=200),
            cell("s1", probe="counting_stars"),
            cell("d1", region="whole", depth=50.0, probe="cases"),
        ],
    )
    rows = [
        # four repeats × two epochs, accuracies with ties: an even count's median is exact
        *(
            answer(f"a{k}", e, "r1", k, accuracy=float(a))
            for k, a in enumerate((60, 80, 80, 100))
            for e in ("e1", "e2")
        ),
        answer(
            "a0",
            "e3",
            "r2",
            1,
            error_kind="timeout",
            parse_ok=None,
            accuracy=None,
            latency_s=None,
            validity=None,
        ),  # a failure with no graded answer: picked
        answer("a1", "e3", "r2", 2, validity="truncated", parse_ok=False, accuracy=None),
        answer("a2", "e3", "r2", 3, validity="thinking_exhausted", accuracy=40.0),
        answer("a3", "e3", "r2", 4, latency_s=None, accuracy=70.0),
        answer("n1", "e1", "r1", 1, accuracy=None, parse_ok=None),  # an empty reply
        answer("s1", "e1", "r1", 1, probe="counting_stars", parse_ok=False, accuracy=None),
        answer("s1", "e2", "r1", 1, probe="counting_stars", accuracy=75.0),
        answer("d1", "e1", "r1", 1, probe="cases", accuracy=100.0),
        answer("late", "e1", "r1", 1, accuracy=10.0),  # its cell is written later
    ]
    store.append("answers", rows)
    return store


def test_the_views_equal_their_plain_definitions_in_every_state(tmp_path: Path) -> None:
    store = awkward(tmp_path / "wh")
    root = store.root.resolve()

    def check() -> tuple[pl.DataFrame, bool]:
        parts = rollups.split(root, compaction.snapshot(root), rollups.current(root))
        con = store.connect()
        try:
            return check_answer_figures(con), parts.used
        finally:
            con.close()

    first, used = check()  # no generation: every file fresh
    assert not used
    a = first.filter(
        pl.col("probe") == "recall", pl.col("length") == 100, pl.col("filler") == "pattern"
    )
    # one config: the four repeats over three epochs
    assert a.select("epochs", "repeats", "errors", "invalid").row(0) == (3, 4, 1, 2)
    assert a["median_accuracy"][0] == 80.0 and a["invalid_why"][0] == (
        "thinking_exhausted 1, truncated 1"
    )
    stars = first.filter(pl.col("probe") == "counting_stars")
    assert stars["mean_accuracy"][0] == 37.5  # the reply with no list scores 0
    assert first.filter(pl.col("probe") == "cases")["region"][0] == "depth 50%"

    rollups_update.update(root, compaction.snapshot(root))
    assert check()[1]
    # The missing cell comes; a later graded answer displaces a covered pick (a2 in e3, which
    # was invalid); another epoch of a0.
    store.append("cells", [cell("late", length=300)])
    store.append(
        "answers",
        [
            answer("a2", "e3", "r3", 9, accuracy=90.0),
            answer("a0", "e4", "r3", 9, accuracy=80.0),
        ],
    )
    displaced, used = check()
    assert used
    a = displaced.filter(
        pl.col("probe") == "recall", pl.col("length") == 100, pl.col("filler") == "pattern"
    )
    assert a.select("epochs", "invalid").row(0) == (4, 1)
    assert displaced.filter(pl.col("length") == 300)["graded"][0] == 1  # the late cell counts

    rollups_update.update(root, compaction.snapshot(root))
    kept, used = check()
    assert used
    assert_frame_equal(kept, displaced)
    rollups_update.compact(root, min_files=1, grace_s=0.0)
    assert_frame_equal(check()[0], displaced)
    assert rollups_update.update(root, compaction.snapshot(root), rebuild=True).rebuilt
    assert_frame_equal(check()[0], displaced)


def test_merged_answer_deltas_keep_the_figures(tmp_path: Path) -> None:
    store = awkward(tmp_path / "wh")
    root = store.root.resolve()
    for batch in range(rollups.MAX_DELTAS + 1):
        # each batch displaces the last one's pick of a1 in e9: its tallies cancel out
        store.append("answers", [answer("a1", "e9", f"b{batch}", batch, accuracy=10.0 * batch)])
        report = rollups_update.update(root, compaction.snapshot(root))
    assert report.merged
    gen = rollups.current(root)
    assert gen is not None and len(gen.answers) == 1 and len(gen.epochs) == 1
    merged = pl.read_parquet(gen.answers[0])
    assert (merged["answers"] != 0).all()  # what cancelled out is gone
    con = store.connect()
    try:
        figures = check_answer_figures(con)
    finally:
        con.close()
    a = figures.filter(
        pl.col("probe") == "recall", pl.col("length") == 100, pl.col("filler") == "pattern"
    )
    assert a["epochs"][0] == 4 and a["max_accuracy"][0] == 100.0


def test_only_the_configs_axes_can_group_the_tallies() -> None:
    with pytest.raises(ValueError, match="repeat"):
        tallied_summary_sql(["model", "repeat"])
