"""Import of the recall seed's SQLite results: golden figures through the warehouse and SQL.

The golden tests import every result set in ``<workspace>/shared/data/seed_recall_results``
with the real CLI, then read the ``accuracy_by_length`` and ``position_accuracy`` views
back through ``needlescope sql`` and compare them with the seed's own summary and
position-accuracy databases. Discovery is generic: a folder's raw database is the one
holding ``bytes_stats``/``tokens_stats``; column names may carry a ``bytes_``/``tokens_``
prefix.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from needlescope.grading.recall import grade_recall
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.legacy import NOT_KEPT, import_legacy_db, legacy_epoch
from needlescope.warehouse.store.schema import TABLES

SEED_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "seed_recall_results"
CLI = Path(sys.executable).parent / "needlescope"
TOLERANCE = 1e-9

STATS_TABLE = re.compile(r"(bytes|tokens)_stats")
SUMMARY_TABLE = re.compile(r"(?:(bytes|tokens)_)?summary")
POSITION_TABLE = re.compile(r"(bytes|tokens)_([0-9]+)_position_accuracy")
COLUMN_PREFIX = re.compile(r"^(?:bytes|tokens)_")

Row = dict[str, Any]
Length = tuple[str | None, int]  # (unit, N); unit None when the seed's table does not say

needs_seed = pytest.mark.skipif(not SEED_DIR.is_dir(), reason=f"no seed results at {SEED_DIR}")


@dataclass(frozen=True)
class SeedSet:
    folder: Path
    raw_db: Path
    dbs: tuple[Path, ...]

    @property
    def model(self) -> str:
        return self.raw_db.stem


def connect(db: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True))


def table_names(db: Path) -> list[str]:
    with connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def read_rows(db: Path, table: str) -> tuple[str, list[Row]]:
    """(primary key column, rows), column names stripped of their bytes_/tokens_ prefix."""
    with connect(db) as conn:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        cursor = conn.execute(f'SELECT * FROM "{table}"')
        columns = [COLUMN_PREFIX.sub("", d[0]) for d in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor]
    key = next(COLUMN_PREFIX.sub("", c[1]) for c in info if c[5] == 1)
    return key, rows


def length_of(value: object) -> int:
    digits = re.search(r"[0-9]+", str(value))
    assert digits, f"no length in {value!r}"
    return int(digits[0])


def seed_sets() -> list[Any]:
    if not SEED_DIR.is_dir():
        return []
    found = []
    for folder in sorted(p for p in SEED_DIR.iterdir() if p.is_dir()):
        dbs = tuple(sorted(folder.glob("*.db")))
        raw = [db for db in dbs if any(STATS_TABLE.fullmatch(t) for t in table_names(db))]
        if raw:
            assert len(raw) == 1, f"{folder}: more than one raw results db: {raw}"
            found.append(pytest.param(SeedSet(folder, raw[0], dbs), id=folder.name))
    return found


SEED_SETS = seed_sets()


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NEEDLESCOPE_WAREHOUSE"}
    return subprocess.run(
        [str(CLI), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def sql(root: Path, query: str) -> list[Row]:
    done = run_cli("sql", query, "--warehouse", str(root), "--format", "json", cwd=root)
    assert done.returncode == 0, done.stderr
    rows: list[Row] = json.loads(done.stdout)
    return rows


def seed_stats(seed: SeedSet) -> dict[Length, Row]:
    stats: dict[Length, Row] = {}
    for table in table_names(seed.raw_db):
        if m := STATS_TABLE.fullmatch(table):
            key, rows = read_rows(seed.raw_db, table)
            stats.update(((m[1], length_of(row[key])), row) for row in rows)
    return stats


def seed_summaries(seed: SeedSet) -> dict[Length, Row]:
    summaries: dict[Length, Row] = {}
    for db in seed.dbs:
        for table in table_names(db):
            if m := SUMMARY_TABLE.fullmatch(table):
                key, rows = read_rows(db, table)
                summaries.update(((m[1], length_of(row[key])), row) for row in rows)
    return summaries


def seed_positions(seed: SeedSet) -> dict[Length, dict[int, Row]]:
    positions: dict[Length, dict[int, Row]] = {}
    for db in seed.dbs:
        for table in table_names(db):
            if m := POSITION_TABLE.fullmatch(table):
                _, rows = read_rows(db, table)
                positions[(m[1], int(m[2]))] = {int(r["key_position"]): r for r in rows}
    return positions


def view_rows(rows: list[Row], length: Length) -> list[Row]:
    unit, n = length
    return [r for r in rows if r["length"] == n and unit in (None, r["length_unit"])]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Row]]:
    """Each seed set imported once through the CLI: model -> (warehouse, import summary)."""
    result: dict[str, tuple[Path, Row]] = {}
    for param in SEED_SETS:
        seed: SeedSet = param.values[0]
        root = tmp_path_factory.mktemp(seed.folder.name)
        args = ("import-legacy", str(seed.raw_db), "--model", seed.model, "--warehouse")
        done = run_cli(*args, str(root), cwd=root)
        assert done.returncode == 0, done.stderr
        result[seed.model] = (root, json.loads(done.stdout))
    return result


@needs_seed
def test_seed_results_were_discovered() -> None:
    folders = {p.name for p in SEED_DIR.iterdir() if p.is_dir() and any(p.glob("*.db"))}
    assert {p.id for p in SEED_SETS} == folders


@needs_seed
@pytest.mark.parametrize("seed", SEED_SETS)
def test_accuracy_by_length_matches_the_seed_summary(
    seed: SeedSet, imported: dict[str, tuple[Path, Row]]
) -> None:
    root, summary = imported[seed.model]
    assert_matches_the_seed_summary(seed, root, summary)


def assert_matches_the_seed_summary(seed: SeedSet, root: Path, summary: Row) -> None:
    """accuracy_by_length, read through ``needlescope sql``, against the seed's own figures."""
    stats, summaries = seed_stats(seed), seed_summaries(seed)
    assert summaries, f"{seed.folder.name}: no summary table"
    quoted = seed.model.replace("'", "''")
    rows = sql(root, f"SELECT * FROM accuracy_by_length WHERE model = '{quoted}'")
    assert sum(r["answers"] for r in rows) == sum(s["answered_count"] for s in stats.values())
    assert summary["parse_failures_imported"] == sum(s["parse_fail_count"] for s in stats.values())
    for length, stat in stats.items():
        (row,) = view_rows(rows, length)
        assert (row["answers"], row["parse_failures"]) == (
            stat["answered_count"],
            stat["parse_fail_count"],
        ), length
    for length, published in summaries.items():
        (row,) = view_rows(rows, length)
        assert row["graded"] == published["record_count"], length
        for ours, theirs in (
            ("mean_accuracy", "avg_accuracy"),
            ("median_accuracy", "median_accuracy"),
            ("min_accuracy", "min_accuracy"),
            ("max_accuracy", "max_accuracy"),
        ):
            assert row[ours] == pytest.approx(published[theirs], abs=TOLERANCE, rel=0), (
                length,
                ours,
            )


@needs_seed
@pytest.mark.parametrize("seed", SEED_SETS)
def test_position_accuracy_matches_the_seed(
    seed: SeedSet, imported: dict[str, tuple[Path, Row]]
) -> None:
    root, _ = imported[seed.model]
    positions = seed_positions(seed)
    assert positions, f"{seed.folder.name}: no position accuracy tables"
    quoted = seed.model.replace("'", "''")
    rows = sql(root, f"SELECT * FROM position_accuracy WHERE model = '{quoted}'")
    for length, published in positions.items():
        ours = {r["needle_index"]: r for r in view_rows(rows, length)}
        assert ours, length
        assert set(published) <= set(ours), f"{length}: published rows for needles never hidden"
        for index, row in ours.items():
            seed_row = published.get(index)
            if seed_row is None:  # the seed wrote no row for a needle matched in no answer
                assert row["frequency"] == 0, (length, index)
                continue
            assert (row["frequency"], row["total_records"]) == (
                seed_row["frequency"],
                seed_row["total_records"],
            ), (length, index)


def table_counts(root: Path) -> dict[str, int]:
    store = Warehouse(root)
    glob = (store.parquet / "{}" / "**" / "*.parquet").as_posix()
    con = store.connect()
    try:
        return {
            t: con.execute(f"SELECT count(*) FROM read_parquet('{glob.format(t)}')").fetchone()[0]
            for t in TABLES
        }
    finally:
        con.close()


@needs_seed
@pytest.mark.parametrize("seed", SEED_SETS)
def test_importing_twice_adds_nothing(seed: SeedSet, tmp_path: Path) -> None:
    store = Warehouse(tmp_path)
    first = import_legacy_db(seed.raw_db, seed.model, store)
    before = table_counts(tmp_path)
    assert before["runs"] == 2 and before["answers"] == before["cells"] > 0
    second = import_legacy_db(seed.raw_db, seed.model, store)
    assert table_counts(tmp_path) == before
    total = first["answers_imported"] + first["parse_failures_imported"]
    assert second["skipped"] == total == before["answers"]
    assert second["run_id"] is None and set(second["rows"].values()) == {0}
    assert (second["answers_imported"], second["parse_failures_imported"]) == (0, 0)
    assert all(length["skipped"] > 0 for length in second["lengths"])


# -- a synthetic database ------------------------------------------------------------------

EXPECTED = {"1": 1111, "2": 2222, "3": 3333}
REPLIES = [
    '{"1": 1111, "2": 2222, "3": 3333}',
    'Here they are:\n```json\n{"1": 1111, "2": 2222, "3": 3333}\n```\nDone.',
    '{"1": 2222, "2": 1111, "3": 4444, "4": 2222}',
]


def synthetic_db(path: Path) -> Path:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TABLE tokens_1000 (id INTEGER PRIMARY KEY AUTOINCREMENT, "
            "test_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP, standard_json TEXT NOT NULL, "
            "model_response_json TEXT NOT NULL, elapsed_time REAL)"
        )
        conn.executemany(
            "INSERT INTO tokens_1000 (test_time, standard_json, model_response_json, "
            "elapsed_time) VALUES (?, ?, ?, ?)",
            [
                (f"2025-11-23 07:27:3{i}", json.dumps(EXPECTED), reply, 1.5 + i)
                for i, reply in enumerate(REPLIES)
            ],
        )
        conn.execute(
            "CREATE TABLE tokens_stats (file_name TEXT PRIMARY KEY, answered_count INTEGER, "
            "parse_fail_count INTEGER, last_updated TIMESTAMP)"
        )
        # 2000 kept no parsed answer at all: its one failure still counts.
        conn.executemany(
            "INSERT INTO tokens_stats VALUES (?, ?, ?, NULL)", [("1000", 5, 2), ("2000", 1, 1)]
        )
        conn.commit()
    return path


def test_synthetic_database_imports_with_the_right_counts(tmp_path: Path) -> None:
    db = synthetic_db(tmp_path / "toy_model.db")
    store = Warehouse(tmp_path / "wh")
    summary = import_legacy_db(db, "toy", store)
    assert summary["source"] == "toy_model.db" and summary["epoch"] == legacy_epoch("toy")
    assert (summary["answers_imported"], summary["parse_failures_imported"]) == (3, 3)
    assert summary["rows"] == {
        "runs": 2,
        "cells": 6,
        "needle_outcomes": 9,
        "hallucinations": 1,
        "duplicates": 1,
        "answers": 6,
    }
    con = store.connect()
    by_length = con.execute(
        "SELECT length, length_unit, needle_count, answers, parse_failures, graded, "
        "mean_accuracy FROM accuracy_by_length ORDER BY length"
    ).fetchall()
    grades = [grade_recall(list(EXPECTED.values()), reply) for reply in REPLIES]
    mean = sum(g.accuracy or 0 for g in grades) / 3
    assert by_length[0][:6] == (1000, "tokens", 3, 5, 2, 3)
    assert by_length[0][6] == pytest.approx(mean, abs=TOLERANCE)
    assert by_length[1][:6] == (2000, "tokens", None, 1, 1, 0)

    fenced = con.execute(
        "SELECT parse_ok, response_kept, accuracy, answered_at, latency_s, expected, filler, "
        "prompt_version FROM results WHERE response LIKE 'Here they are%'"
    ).fetchone()
    assert fenced is not None
    assert fenced[:3] == (True, True, 100.0)
    assert fenced[3] == datetime(2025, 11, 23, 7, 27, 31, tzinfo=UTC)
    assert fenced[4:] == (2.5, "[1111, 2222, 3333]", "legacy", "legacy")
    failures = con.execute(
        "SELECT DISTINCT response, response_kept, parse_error, expected FROM results "
        "WHERE NOT parse_ok"
    ).fetchall()
    assert failures == [(None, False, NOT_KEPT, None)]
    config = json.loads(con.execute("SELECT config_json FROM runs").fetchone()[0])
    assert config["source"] == "toy_model.db"

    again = import_legacy_db(db, "toy", store)
    assert again["skipped"] == 6 and again["rows"]["answers"] == 0


# -- answers the seed stored with no digit key -----------------------------------------------

# What the seed's extraction kept: an empty object (from a ```json {} ``` fence), and an object
# whose keys are ranges (a gemini-2.5-pro range set). Both were counted as answered.
STORED = [
    ('{"1": 4711, "2": 1234, "3": 9876, "4": 5555}', 100.0),
    ("{}", 0.0),
    ('{"1-7170": -1, "7171-14340": 1234}', 25.0),  # keys as strings: [-1, 1234]; 3 edits of 4
]


def stored_answers_set(folder: Path) -> SeedSet:
    """A result set in the seed's shape: the raw answers and the seed's summary of them (its
    figures worked by hand: 3 answers, accuracies 100, 0 and 25)."""
    folder.mkdir()
    raw, summary = folder / "toy_ranges.db", folder / "model_summary_toy_ranges.db"
    expected = json.dumps({"1": 4711, "2": 1234, "3": 9876, "4": 5555})
    with closing(sqlite3.connect(raw)) as conn:
        conn.execute(
            "CREATE TABLE bytes_4000 (id INTEGER PRIMARY KEY AUTOINCREMENT, test_time TIMESTAMP,"
            " standard_json TEXT, model_response_json TEXT, elapsed_time REAL)"
        )
        conn.executemany(
            "INSERT INTO bytes_4000 (test_time, standard_json, model_response_json, elapsed_time)"
            " VALUES ('2025-10-01 10:00:00', ?, ?, 2.0)",
            [(expected, reply) for reply, _ in STORED],
        )
        conn.execute(
            "CREATE TABLE bytes_stats (byte_count INTEGER PRIMARY KEY, answered_count INTEGER,"
            " parse_fail_count INTEGER)"
        )
        conn.execute("INSERT INTO bytes_stats VALUES (4000, 4, 1)")
        conn.commit()
    with closing(sqlite3.connect(summary)) as conn:
        conn.execute(
            "CREATE TABLE summary (byte_count INTEGER PRIMARY KEY, record_count INTEGER,"
            " avg_accuracy REAL, median_accuracy REAL, min_accuracy REAL, max_accuracy REAL)"
        )
        conn.execute("INSERT INTO summary VALUES (4000, 3, ?, 25.0, 0.0, 100.0)", (125 / 3,))
        conn.commit()
    return SeedSet(folder, raw, (raw, summary))


def test_a_stored_object_without_digit_keys_is_an_answer(tmp_path: Path) -> None:
    seed = stored_answers_set(tmp_path / "set")
    root = tmp_path / "wh"
    args = ("import-legacy", str(seed.raw_db), "--model", seed.model, "--warehouse", str(root))
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["answers_imported"], summary["parse_failures_imported"]) == (3, 1)
    assert_matches_the_seed_summary(seed, root, summary)
    graded = sql(root, "SELECT response, parse_ok, accuracy FROM results WHERE response_kept")
    assert sorted((r["response"], r["parse_ok"], r["accuracy"]) for r in graded) == sorted(
        (reply, True, accuracy) for reply, accuracy in STORED
    )


def test_a_fresh_reply_of_an_empty_object_is_still_a_parse_failure() -> None:
    """The seed's extraction, for a reply as the model sent it: a bare ``{}`` has no digit
    key (only a fence decides whatever its keys)."""
    assert grade_recall([4711], "Nothing found: {}").parse_ok is False
    assert grade_recall([4711], "```json\n{}\n```").parse_ok is True


# -- one-line errors through the CLI -------------------------------------------------------


def not_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "notes.db"
    path.write_text("these are notes, not a database\n" * 20, encoding="utf-8")
    return path


def no_raw_tables(tmp_path: Path) -> Path:
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE things (id INTEGER)")
        conn.commit()
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing.db", "no such database file"),
        (not_sqlite, "not a SQLite database"),
        (no_raw_tables, "no bytes_<N> or tokens_<N> tables"),
    ],
    ids=["missing", "not-sqlite", "no-raw-tables"],
)
def test_bad_input_is_a_one_line_error(tmp_path: Path, make: Any, message: str) -> None:
    db = make(tmp_path)
    done = run_cli(
        "import-legacy", str(db), "--model", "m", "--warehouse", str(tmp_path / "wh"), cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "wh").exists(), "a bad database must not create a warehouse"
