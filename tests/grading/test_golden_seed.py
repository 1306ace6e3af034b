"""Golden tests: the grader reproduces every figure the recall seed published.

Reads the seed's SQLite result sets from ``<workspace>/shared/data/seed_recall_results``:
every folder may hold a raw ``<model>.db`` (tables ``bytes_<N>`` / ``tokens_<N>``), a
``model_summary_*.db`` (table ``summary``, ``bytes_summary`` or ``tokens_summary``) and a
``position_accuracy_*.db`` (tables ``<raw table>_position_accuracy``). Column names may
carry a ``bytes_``/``tokens_`` prefix. Discovery is generic, so any other result set
published in this format is checked the same way.
"""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from needlescope.grading.recall import grade_recall, lcs_anchors
from needlescope.probes.recall import probe as recall_probe

SEED_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "seed_recall_results"

if not SEED_DIR.is_dir():
    pytest.skip(f"seed results not present at {SEED_DIR}", allow_module_level=True)

RAW_TABLE = re.compile(r"(bytes|tokens)_([0-9]+)")
SUMMARY_TABLE = re.compile(r"(?:(bytes|tokens)_)?summary")
POSITION_TABLE = re.compile(r"((?:bytes|tokens)_[0-9]+)_position_accuracy")
COLUMN_PREFIX = re.compile(r"^(?:bytes|tokens)_")
ANALYSIS_DB = re.compile(r"(model_summary|position_accuracy|error_stats)_.*\.db")
TOLERANCE = 1e-9

Row = dict[str, Any]


@dataclass(frozen=True)
class SummaryCase:
    raw_db: Path
    raw_table: str
    row: Row


@dataclass(frozen=True)
class PositionCase:
    raw_db: Path
    raw_table: str
    rows: dict[int, Row]


@dataclass(frozen=True)
class GradedTable:
    accuracies: tuple[float, ...]  # one per reply that parsed
    anchored_keys: tuple[tuple[int, ...], ...]  # needle keys in the LCS, per parsed reply
    needle_keys: frozenset[int]  # every key of every expected answer


def connect(db: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True))


def table_names(db: Path) -> list[str]:
    with connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def primary_key(db: Path, table: str) -> str:
    with connect(db) as conn:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    return COLUMN_PREFIX.sub("", next(col[1] for col in info if col[5] == 1))


def read_rows(db: Path, table: str) -> list[Row]:
    """All rows, with column names stripped of their bytes_/tokens_ prefix."""
    with connect(db) as conn:
        cursor = conn.execute(f'SELECT * FROM "{table}"')
        columns = [COLUMN_PREFIX.sub("", d[0]) for d in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor]


def raw_db_of(folder: Path) -> Path:
    candidates = [p for p in sorted(folder.glob("*.db")) if not ANALYSIS_DB.fullmatch(p.name)]
    assert len(candidates) == 1, f"{folder}: expected one raw results db, found {candidates}"
    return candidates[0]


def raw_table_for(raw_tables: list[str], unit: str | None, length: str) -> str:
    matches = [
        t
        for t in raw_tables
        if (m := RAW_TABLE.fullmatch(t)) and m[2] == length and unit in (None, m[1])
    ]
    assert len(matches) == 1, f"no single raw table for length {length}: {matches}"
    return matches[0]


def discover() -> tuple[list[Any], list[Any]]:
    summaries: list[Any] = []
    positions: list[Any] = []
    for folder in sorted(p for p in SEED_DIR.iterdir() if p.is_dir()):
        dbs = sorted(folder.glob("*.db"))
        if not dbs:
            continue
        raw_db = raw_db_of(folder)
        raw_tables = [t for t in table_names(raw_db) if RAW_TABLE.fullmatch(t)]
        for db in dbs:
            if db.name.startswith("model_summary_"):
                for table in table_names(db):
                    if not (m := SUMMARY_TABLE.fullmatch(table)):
                        continue
                    key = primary_key(db, table)  # byte_count, or file_name for tokens
                    for row in read_rows(db, table):
                        length = re.search(r"[0-9]+", str(row[key]))
                        assert length, f"{db.name}: no length in {row[key]!r}"
                        raw_table = raw_table_for(raw_tables, m[1], length[0])
                        summary = SummaryCase(raw_db, raw_table, row)
                        summaries.append(pytest.param(summary, id=f"{folder.name}/{raw_table}"))
            elif db.name.startswith("position_accuracy_"):
                for table in table_names(db):
                    if not (m := POSITION_TABLE.fullmatch(table)):
                        continue
                    assert m[1] in raw_tables, f"{db.name}: {table} has no raw table"
                    rows = {int(r["key_position"]): r for r in read_rows(db, table)}
                    position = PositionCase(raw_db, m[1], rows)
                    positions.append(pytest.param(position, id=f"{folder.name}/{m[1]}"))
    return summaries, positions


SUMMARY_CASES, POSITION_CASES = discover()


@cache
def graded(raw_db: Path, raw_table: str) -> GradedTable:
    accuracies: list[float] = []
    anchored: list[tuple[int, ...]] = []
    needle_keys: set[int] = set()
    for row in read_rows(raw_db, raw_table):
        standard = json.loads(row["standard_json"])
        keys = sorted(int(k) for k in standard)
        needle_keys.update(keys)
        expected = [standard[str(k)] for k in keys]
        grade = grade_recall(expected, row["model_response_json"])
        if not grade.parse_ok or grade.accuracy is None:  # a failure, or not counted
            continue
        assert grade.accuracy is not None and grade.answered is not None
        accuracies.append(grade.accuracy)
        anchored.append(tuple(keys[e] for e, _ in lcs_anchors(expected, grade.answered)))
    return GradedTable(tuple(accuracies), tuple(anchored), frozenset(needle_keys))


def test_seed_results_were_discovered() -> None:
    folders = {p.name for p in SEED_DIR.iterdir() if p.is_dir() and any(p.glob("*.db"))}
    assert folders
    for kind, cases in (("summary", SUMMARY_CASES), ("position accuracy", POSITION_CASES)):
        covered = {c.id.split("/")[0] for c in cases}
        assert covered == folders, f"{kind} rows missing for {folders - covered}"


@cache
def graded_as_the_sweep_does(raw_db: Path, raw_table: str) -> tuple[float, ...]:
    """Accuracies of the counted replies through the recall probe's batch grader: the path of
    the sweep's grade task and of `needlescope grade recall`."""
    rows = read_rows(raw_db, raw_table)
    expected = []
    for row in rows:
        standard = json.loads(row["standard_json"])
        expected.append([standard[str(k)] for k in sorted(int(k) for k in standard)])
    batch = recall_probe.grade_batch(
        expected, [{}] * len(rows), [r["model_response_json"] for r in rows]
    )
    return tuple(g.accuracy for g in batch.grades if g.parse_ok and g.accuracy is not None)


@pytest.mark.parametrize("case", SUMMARY_CASES)
@pytest.mark.parametrize("path", ["grade_recall", "probe batch"])
def test_summary_row_is_reproduced(case: SummaryCase, path: str) -> None:
    if path == "grade_recall":
        accuracies = graded(case.raw_db, case.raw_table).accuracies
    else:
        accuracies = graded_as_the_sweep_does(case.raw_db, case.raw_table)
    assert len(accuracies) == case.row["record_count"]
    assert accuracies, "a summary row over zero answers"
    ours = {
        "avg_accuracy": statistics.fmean(accuracies),
        "median_accuracy": statistics.median(accuracies),
        "min_accuracy": min(accuracies),
        "max_accuracy": max(accuracies),
    }
    for column, value in ours.items():
        assert value == pytest.approx(case.row[column], abs=TOLERANCE, rel=0), column


@pytest.mark.parametrize("case", POSITION_CASES)
def test_position_accuracy_is_reproduced(case: PositionCase) -> None:
    table = graded(case.raw_db, case.raw_table)
    frequency = Counter(key for keys in table.anchored_keys for key in keys)
    assert set(case.rows) <= table.needle_keys, "published rows for needles never hidden"
    for key in sorted(table.needle_keys):
        published = case.rows.get(key)
        if published is None:  # the seed wrote no row for a needle matched in no answer
            assert frequency[key] == 0, f"needle {key}"
            continue
        assert (frequency[key], len(table.anchored_keys)) == (
            published["frequency"],
            published["total_records"],
        ), f"needle {key}"
