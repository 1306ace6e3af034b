"""The views and statistics computed the fast way give what their plain definitions give.

position_accuracy and stats.needle_rates number the results' configs before joining the needle
rows, and results picks each cell's attempt before joining cells; these compare them with the
straightforward SQL on a warehouse with the awkward cases: a failed then graded attempt, a
second (older) graded answer, needle rows of no stored answer, an answer without a cell row, a
NULL axis, two probes and two models.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.store import Warehouse, figures

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cell(cell_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "cell_id": cell_id,
        "context_id": "ctx",
        "run_id": "r1",
        "created_at": NOW,
        "model": "m",
        "probe": "recall",
        "filler": "pattern",
        "placement": "even",
        "region": "whole",
        "prompt_version": "v1",
        "length": 100,
        "length_unit": "tokens",
        "needle_count": 3,
        "repeat": 0,
        "expected": "[1, 2, 3]",
        **extra,
    }


def answer(cell_id: str, epoch: str, run: str, second: int, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": run,
        "epoch": epoch,
        "cell_id": cell_id,
        "model": "m",
        "probe": "recall",
        "answered_at": NOW + timedelta(seconds=second),
        "parse_ok": True,
        "accuracy": 50.0 + second,
        "latency_s": 1.0,
        **extra,
    }


def needles(run: str, epoch: str, cell_id: str, **extra: Any) -> list[dict[str, Any]]:
    outcomes = ("correct", "missing", "misorder")
    return [
        {
            "run_id": run,
            "epoch": epoch,
            "cell_id": cell_id,
            "model": "m",
            "probe": "recall",
            "needle_index": i + 1,
            "expected": 1000 + i,
            "in_lcs": outcomes[(i + len(run)) % 3] == "correct",
            "outcome": outcomes[(i + len(run)) % 3],
            **extra,
        }
        for i in range(3)
    ]


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    store = Warehouse(tmp_path).ensure()
    store.append(
        "cells",
        [
            cell("c1"),
            cell("c1", run_id="r2", created_at=NOW + timedelta(hours=1)),  # a second copy
            cell("c2", filler=None, length=200),
            cell("c3", probe="counting_stars"),
            cell("c6", model="m2"),
        ],
    )
    store.append(
        "answers",
        [
            answer("c1", "e1", "r1", 1, error_kind="timeout", parse_ok=None, accuracy=None),
            answer("c1", "e1", "r1", 5),
            answer("c1", "e1", "r2", 3),  # older graded answer of the same epoch: not picked
            answer("c1", "e2", "r1", 2),
            answer("c2", "e1", "r1", 1),
            answer("c3", "e1", "r1", 1, probe="counting_stars"),
            answer("c5", "e1", "r1", 1),  # no cells row
            answer("c6", "e1", "r1", 1, model="m2", parse_ok=False, accuracy=None),
            answer("c6", "e1", "r3", 2, model="m2"),
        ],
    )
    store.append(
        "needle_outcomes",
        needles("r1", "e1", "c1")
        + needles("r2", "e1", "c1")  # of the answer results did not pick
        + needles("r9", "e1", "c1")  # of no stored answer
        + needles("r1", "e2", "c1")
        + needles("r1", "e1", "c2")
        + needles("r1", "e1", "c3", probe="counting_stars")
        + needles("r1", "e1", "c5")
        + needles("r3", "e1", "c6", model="m2"),
    )
    store.append(
        "hallucinations",
        [
            {
                "run_id": run,
                "epoch": "e1",
                "cell_id": "c1",
                "model": "m",
                "probe": "recall",
                "answer_index": 1,
                "value": "9",
                "key_from": 1,
                "key_to": 2,
            }
            for run in ("r1", "r2", "r9")
        ],
    )
    return store.connect()


def frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    return con.sql(f"SELECT * FROM ({sql}) ORDER BY ALL").pl()


def test_results_pick_the_same_attempts_as_the_plain_definition(
    con: duckdb.DuckDBPyConnection,
) -> None:
    plain = """
        SELECT a.epoch, a.cell_id, a.run_id, a.accuracy, c.filler
        FROM answers a JOIN cells c USING (cell_id)
        QUALIFY row_number() OVER (
            PARTITION BY a.epoch, a.cell_id
            ORDER BY (a.error_kind IS NULL) DESC, a.answered_at DESC
        ) = 1
    """
    picked = frame(con, "SELECT epoch, cell_id, run_id, accuracy, filler FROM results")
    assert_frame_equal(picked, frame(con, plain))
    assert picked.height == 5  # c1 twice (two epochs), c2, c3, c6; not c5
    probe = frame(con, "SELECT cell_id FROM results WHERE probe = 'counting_stars'")
    assert probe["cell_id"].to_list() == ["c3"]


# position_accuracy's plain definition: the needle_outcomes view grouped
PLAIN_POSITION_ACCURACY = """
    SELECT model, probe, length, length_unit, needle_count, filler, prompt_version,
           needle_index,
           count(*) FILTER (WHERE in_lcs) AS frequency,
           count(*) AS total_records,
           100.0 * count(*) FILTER (WHERE in_lcs) / count(*) AS probability
    FROM needle_outcomes
    GROUP BY ALL
"""


def test_position_accuracy_is_needle_outcomes_grouped(con: duckdb.DuckDBPyConnection) -> None:
    fast = frame(con, "SELECT * FROM position_accuracy")
    assert_frame_equal(fast, frame(con, PLAIN_POSITION_ACCURACY))
    assert fast.filter(pl.col("filler").is_null()).height == 3  # a NULL axis is a config
    # Only the picked answers' needles: c1 in two epochs, c2, c3 (stars) and c6.
    assert fast["total_records"].sum() == 5 * 3


@pytest.mark.parametrize("snapshot", [False, True])
def test_needle_and_hallucination_rates_match_the_plain_grouping(
    con: duckdb.DuckDBPyConnection, snapshot: bool
) -> None:
    source = "results"
    if snapshot:  # as the report reads them: from a table holding the results' columns
        con.execute("CREATE TEMP TABLE snap AS SELECT * FROM results")
        source = "snap"
    axes = ", ".join(f'"{a}"' for a in figures.AXES)
    plain = f"""
        SELECT {axes}, needle_index,
               count(*) AS parsed_answers,
               count(*) FILTER (WHERE in_lcs) AS in_order,
               count(*) FILTER (WHERE outcome = 'missing') AS missing,
               count(*) FILTER (WHERE outcome = 'misorder') AS misorder,
               100.0 * count(*) FILTER (WHERE in_lcs) / count(*) AS position_accuracy,
               100.0 * count(*) FILTER (WHERE outcome = 'missing') / count(*) AS missing_rate,
               100.0 * count(*) FILTER (WHERE outcome = 'misorder') / count(*) AS misorder_rate
        FROM needle_outcomes
        GROUP BY ALL
    """
    rates = stats.needle_rates(con, source=source)
    assert_frame_equal(rates.sort(pl.all()), frame(con, plain).sort(pl.all()))
    invented = stats.hallucination_rates(con, source=source)
    assert invented["hallucinations"].sum() == 1  # r2's and r9's rows are not the result's
    assert_frame_equal(invented, stats.hallucination_rates(con))
