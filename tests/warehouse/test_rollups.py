"""The needle and answer tallies (rollups.py) give what the raw needle rows give, in every state a
warehouse passes through: no rollup yet, everything covered, fresh files appended since (an
attempt displacing a covered pick among them), needle rows written before their answer, merged
files (covered, and covered mixed with fresh), a rebuild, and a generation the files no longer
match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from needlescope.flows.cli._app import app
from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.store import Warehouse, compaction, rollups, rollups_update, views
from tests.warehouse.test_answer_tallies import check_answer_figures
from tests.warehouse.test_view_fast_paths import (
    PLAIN_POSITION_ACCURACY,
    answer,
    cell,
    needles,
)


def ordered(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    return con.sql(f"SELECT * FROM ({sql}) ORDER BY ALL").pl()


def check(store: Warehouse) -> rollups.Split:
    """position_accuracy and the needle rates from the tallies equal the raw rows' figures;
    returns how the reader split the files."""
    root = store.root.resolve()
    parts = rollups.split(root, compaction.snapshot(root), rollups.current(root))
    con = store.connect()
    try:
        fast = ordered(con, "SELECT * FROM position_accuracy")
        assert_frame_equal(fast, ordered(con, PLAIN_POSITION_ACCURACY))
        rates = stats.needle_rates(con)
        raw = stats.needle_rates(con, whole=False)
        assert_frame_equal(rates.sort(pl.all()), raw.sort(pl.all()))
        assert fast.height > 0
        check_answer_figures(con)
    finally:
        con.close()
    return parts


def one_row(store: Warehouse, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
    """The first row of ``sql`` on a connection of its own."""
    con = store.connect()
    try:
        return con.execute(sql, params or []).fetchone()
    finally:
        con.close()


def seeded(root: Path) -> Warehouse:
    store = Warehouse(root).ensure()
    store.append(
        "cells",
        [cell("c1"), cell("c2", filler=None, length=200), cell("c6", model="m2")],
    )
    store.append("needle_outcomes", needles("r1", "e1", "c1") + needles("r2", "e1", "c1"))
    store.append(
        "needle_outcomes", needles("r1", "e1", "c2") + needles("r3", "e1", "c6", model="m2")
    )
    store.append(
        "answers",
        [
            answer("c1", "e1", "r1", 1, error_kind="timeout", parse_ok=None, accuracy=None),
            answer("c1", "e1", "r1", 5),
            answer("c1", "e1", "r2", 3),  # older graded answer: not picked
            answer("c2", "e1", "r1", 1, validity="truncated"),
            answer("c6", "e1", "r3", 2, model="m2"),
        ],
    )
    return store


def test_every_state_counts_what_the_raw_rows_count(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    assert not check(store).used  # no generation yet: every file is fresh

    first = rollups_update.update(root, compaction.snapshot(root))
    assert first.rebuilt and first.attempts == 5 and first.tally_rows > 0
    parts = check(store)
    assert parts.used and len(parts.covered["answers"]) == 1
    assert [p.name for p in parts.fresh["answers"]] == [compaction.EMPTY_FILE]

    # Appended since: a later graded answer displaces c1's covered pick (r1), a failure of c2
    # does not displace its graded answer, and a new epoch.
    store.append("needle_outcomes", needles("r4", "e1", "c1") + needles("r4", "e2", "c2"))
    store.append(
        "answers",
        [
            answer("c1", "e1", "r4", 9),
            answer("c2", "e1", "r4", 9, error_kind="timeout", parse_ok=None, accuracy=None),
            answer("c2", "e2", "r4", 9),
        ],
    )
    parts = check(store)
    assert parts.used and len(parts.fresh["answers"]) == 2  # the empty file and the new one
    con = store.connect()
    picked = con.sql("SELECT run_id FROM results WHERE cell_id = 'c1'").fetchall()
    assert picked == [("r4",)]
    con.close()

    second = rollups_update.update(root, compaction.snapshot(root))
    assert not second.rebuilt and second.attempts == 3
    check(store)


def test_needle_rows_written_before_their_answer_count_once_it_comes(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    rollups_update.update(root, compaction.snapshot(root))
    # A batch half-written when the rollup ran: its needle rows, not yet its answer.
    store.append("needle_outcomes", needles("r7", "e1", "c6", model="m2"))
    rollups_update.update(root, compaction.snapshot(root))
    gen = rollups.current(root)
    assert gen is not None and gen.pending == (("r7", "e1", "c6"),)
    check(store)  # r7 is no answer: its rows do not count
    store.append("answers", [answer("c6", "e1", "r7", 8, model="m2")])
    parts = check(store)  # now they do, read from the covered file
    assert parts.used
    total = one_row(store, "SELECT sum(total_records) FROM position_accuracy WHERE model = 'm2'")
    assert total == (3,)
    rollups_update.update(root, compaction.snapshot(root))
    gen = rollups.current(root)
    assert gen is not None and gen.pending == ()
    check(store)


def test_compaction_keeps_the_rollups_and_merged_files_stay_covered(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    done, rolled = rollups_update.compact(root, min_files=2, grace_s=0.0)
    assert done.files_merged >= 2 and len(rolled) == 2
    parts = check(store)
    assert parts.used
    assert all(p.is_relative_to(root / "compacted") for p in parts.covered["needle_outcomes"])
    # A merge of covered and fresh files (a compaction without the rollups: rows written
    # between a rollup and a merge) reads as fresh, and counts the same.
    store.append("needle_outcomes", needles("r5", "e3", "c1"))
    store.append("answers", [answer("c1", "e3", "r5", 1)])
    store.append("answers", [answer("c2", "e3", "r5", 1, parse_ok=False, accuracy=None)])
    compaction.compact(root, min_files=1, max_compacted=1, grace_s=0.0)
    parts = check(store)
    assert parts.used
    assert any(p.is_relative_to(root / "compacted") for p in parts.fresh["answers"])
    # Rebuilt from the raw tables: the same tallies as kept up to date.
    con = store.connect()
    kept = ordered(con, "SELECT * FROM needle_tallies")
    con.close()
    assert rollups_update.update(root, compaction.snapshot(root), rebuild=True).rebuilt
    con = store.connect()
    assert_frame_equal(ordered(con, "SELECT * FROM needle_tallies"), kept)
    con.close()
    check(store)


def test_a_generation_the_files_disagree_with_is_not_used(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    rollups_update.update(root, compaction.snapshot(root))
    gen = rollups.current(root)
    assert gen is not None
    covered = sorted(gen.covered["needle_outcomes"])[0]
    covered.unlink()  # rows the tallies count are gone: the raw rows are the truth
    assert not check(store).used
    # A data file of the generation missing: not used either.
    rollups_update.update(root, compaction.snapshot(root))
    gen = rollups.current(root)
    assert gen is not None and check(store).used
    gen.tallies[0].unlink()
    assert not check(store).used


def _view_sql(store: Warehouse, view: str) -> str:
    found = one_row(store, "SELECT sql FROM duckdb_views() WHERE view_name = ?", [view])
    assert found is not None
    return str(found[0])


def test_a_settled_snapshot_reads_the_tallies_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    tally_views = ("needle_tallies", "answer_tallies", "hallucination_tallies")
    rollups_update.update(root, compaction.snapshot(root))
    assert check(store).settled
    for view in tally_views:  # one file each, nothing fresh: no delta, nothing to sum
        assert "GROUP BY" not in _view_sql(store, view) and "delta" not in _view_sql(store, view)

    # A later attempt displaces c1's covered pick with an invalid one (its needle rows move
    # to another validity: the covered ones cancel out), and c2 gets a new epoch.
    store.append("needle_outcomes", needles("r5", "e1", "c1") + needles("r5", "e3", "c2"))
    store.append("answers", [answer("c1", "e1", "r5", 9, validity="truncated")])
    store.append("answers", [answer("c2", "e3", "r5", 9)])
    fresh = check(store)
    assert fresh.used and not fresh.settled
    assert "tally_delta" in _view_sql(store, "needle_tallies")

    # Written by a version that kept the tallies' deltas apart: summed as tallies.sql sums.
    monkeypatch.setattr(rollups_update, "MERGED_AT_ONCE", ())
    rollups_update.update(root, compaction.snapshot(root))
    gen = rollups.current(root)
    assert gen is not None and len(gen.tallies) == 2 and len(gen.answers) == 2
    assert check(store).settled
    for view in tally_views[:2]:
        assert "GROUP BY" in _view_sql(store, view) and "delta" not in _view_sql(store, view)
    cancelled = one_row(
        store, "SELECT count(*) FROM needle_tallies WHERE cell_id = 'c1' AND validity = 'valid'"
    )
    assert cancelled == (0,)

    # Each update merges the tallies' delta at once; the attempts keep theirs.
    monkeypatch.undo()
    store.append("answers", [answer("c6", "e3", "r6", 9, model="m2")])
    rollups_update.update(root, compaction.snapshot(root))
    gen = rollups.current(root)
    assert gen is not None and len(gen.tallies) == len(gen.answers) == 1
    assert len(gen.attempts) == 3
    assert check(store).settled
    assert "GROUP BY" not in _view_sql(store, "needle_tallies")


def test_old_generations_and_their_files_are_deleted_after_the_grace(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    for batch in range(rollups.MAX_DELTAS + 1):
        store.append("needle_outcomes", needles(f"n{batch}", "e5", "c1"))
        store.append("answers", [answer("c1", "e5", f"n{batch}", batch)])
        report = rollups_update.update(root, compaction.snapshot(root), grace_s=3600.0)
    assert report.merged  # the deltas were merged into one file each
    folder = root / rollups.ROLLUPS
    assert len(list(folder.glob("gen-*.json"))) == rollups.MAX_DELTAS + 1  # within the grace
    rollups_update.update(root, compaction.snapshot(root), grace_s=0.0)
    gen = rollups.current(root)
    assert gen is not None
    assert list(folder.glob("gen-*.json")) == [gen.path]
    assert set((folder / rollups.DATA).glob("*.parquet")) == gen.files
    check(store)


def test_the_rollups_command(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    runner = CliRunner()
    done = runner.invoke(app, ["rollups", "-w", str(store.root)])
    assert done.exit_code == 0, done.output
    assert "rebuilt from the raw tables" in done.output and "5 attempts" in done.output
    again = runner.invoke(app, ["rollups", "-w", str(store.root)])
    assert again.exit_code == 0 and "updated: 0 files counted" in again.output
    rebuilt = runner.invoke(app, ["rollups", "-w", str(store.root), "--rebuild"])
    assert "rebuilt from the raw tables" in rebuilt.output
    check(store)
    missing = runner.invoke(app, ["rollups", "-w", str(tmp_path / "none")])
    assert missing.exit_code != 0 and "no warehouse at" in missing.output


def test_the_views_file_counts_from_the_raw_rows(tmp_path: Path) -> None:
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    rollups_update.update(root, compaction.snapshot(root))
    assert store.refresh_views_file()
    con = duckdb.connect(str(store.db_path), read_only=True)
    try:
        fast = ordered(con, "SELECT * FROM position_accuracy")
        assert_frame_equal(fast, ordered(con, PLAIN_POSITION_ACCURACY))
        assert check_answer_figures(con).height > 0
    finally:
        con.close()


def test_the_rollups_read_the_cells_as_the_views_do(tmp_path: Path) -> None:
    """The update creates only the `cells` view and the `result_region` macro (views.sql's own
    text): they give what the whole views give."""
    store = seeded(tmp_path / "wh")
    root = store.root.resolve()
    con = store.connect()
    alone = duckdb.connect()
    try:
        compaction.use_snapshot(alone, compaction.snapshot(root))
        alone.execute(views.some_views_sql(("cells", "result_region")))
        query = "SELECT *, result_region(region, depth) AS shown FROM cells"
        expected = ordered(con, query)
        assert expected.height == 3
        assert_frame_equal(ordered(alone, query), expected)
        created = {r[0] for r in alone.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        assert "cells" in created and "results" not in created
    finally:
        con.close()
        alone.close()
    with pytest.raises(KeyError, match="no view or macro results_x"):
        views.some_views_sql(("results_x",))
