from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from needlescope.probes.counting_stars import probe as stars
from needlescope.provenance._hashing import canonical_json
from needlescope.warehouse.probes.counting_stars import charts as charts_stars
from needlescope.warehouse.store import Warehouse

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TRUTH = [2, 7, 10]
MISTAKEN = [3, 6, 11]


def params(order: str = "shuffled", language: str = "en", reasoning: bool = False) -> str:
    return canonical_json(
        {"stars": 3, "order": order, "language": language, "reasoning": reasoning}
    )


def cell_row(cell_id: str, length: int, probe_params: str, probe: str = stars.NAME) -> dict:
    return {
        "cell_id": cell_id,
        "context_id": f"ctx-{cell_id}",
        "run_id": "r1",
        "created_at": NOW,
        "model": "m",
        "probe": probe,
        "probe_params": probe_params,
        "filler": "prose-en",
        "prompt_version": "stars-en-v1",
        "length": length,
        "length_unit": "tokens",
        "needle_count": 3,
        "repeat": 0,
        "expected": json.dumps(TRUTH),
    }


def graded_rows(
    cell_id: str, response: str, facts: Mapping[str, Any] | None = None
) -> tuple[dict, list[dict]]:
    """The answers row and needle_outcomes rows the sweep would write for this reply."""
    grade = stars.grade(TRUTH, facts or {}, response)
    key = {"run_id": "r1", "epoch": "e1", "cell_id": cell_id, "model": "m", "probe": stars.NAME}
    answer = {
        **key,
        "answered_at": NOW,
        "response": response,
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": None if grade.answered is None else json.dumps(grade.answered),
    }
    outcomes = [
        {**key, "needle_index": n.needle_index, "expected": n.expected, "in_lcs": n.in_lcs}
        | {"outcome": n.outcome}
        for n in grade.needles
    ]
    return answer, outcomes


def reply(values: list[int]) -> str:
    return json.dumps({"little_penguin": values})


@pytest.fixture
def con(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    store = Warehouse(tmp_path).ensure()
    store.append(
        "cells",
        [
            cell_row("a", 1000, params()),
            cell_row("b", 3000, params()),
            cell_row("c", 3000, params()),
            cell_row("d", 1000, params(reasoning=True)),
            cell_row("x", 1000, '{"digits":4,"snap":"auto"}', probe="recall"),
        ],
    )
    answers, outcomes = [], []
    for cell_id, response, facts in [
        ("a", reply([7, 2, 10]), None),  # all three, in another order: 100
        ("b", reply([2, 5]), None),  # one of three: 33.3
        ("c", "I lost count.", None),  # no list: a parse failure scored 0, every star missed
        ("d", reply([2, 6, 11]), {"reasoning": True, "mistaken": MISTAKEN}),  # 1 + .25 + .25
    ]:
        answer, rows = graded_rows(cell_id, response, facts)
        answers.append(answer)
        outcomes += rows
    answers.append({**graded_rows("x", reply([1]))[0], "cell_id": "x", "probe": "recall"})
    store.append("answers", answers)
    store.append("needle_outcomes", outcomes)
    connection = store.connect()
    yield connection
    connection.close()


def frame(con: duckdb.DuckDBPyConnection, query: str) -> pl.DataFrame:
    return con.sql(query).pl()


def test_stars_results_carry_the_probe_axes(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.sql(
        'SELECT cell_id, language, "order", reasoning FROM stars_results ORDER BY cell_id'
    ).fetchall()
    assert rows == [
        ("a", "en", "shuffled", False),
        ("b", "en", "shuffled", False),
        ("c", "en", "shuffled", False),
        ("d", "en", "shuffled", True),
    ]


def test_stars_by_index_shares(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.sql(
        "SELECT length, reasoning, needle_index, answers, found, share_found, mean_score "
        "FROM stars_by_index ORDER BY reasoning, length, needle_index"
    ).fetchall()
    assert rows == [
        (1000, False, 1, 1, 1, 1.0, 1.0),
        (1000, False, 2, 1, 1, 1.0, 1.0),
        (1000, False, 3, 1, 1, 1.0, 1.0),
        # The parse failure at 3000 missed every star: shares are over all the answers.
        (3000, False, 1, 2, 1, 0.5, 0.5),
        (3000, False, 2, 2, 0, 0.0, 0.0),
        (3000, False, 3, 2, 0, 0.0, 0.0),
        (1000, True, 1, 1, 1, 1.0, 1.0),
        (1000, True, 2, 1, 0, 0.0, 0.25),
        (1000, True, 3, 1, 0, 0.0, 0.25),
    ]


def test_accuracy_by_length_and_the_length_weighted_score(
    con: duckdb.DuckDBPyConnection,
) -> None:
    data = frame(
        con,
        "SELECT * FROM stars_accuracy_by_length WHERE NOT reasoning ORDER BY length",
    )
    assert data["length"].to_list() == [1000, 3000]
    assert data["answers"].to_list() == [1, 2]
    assert data["parse_failures"].to_list() == [0, 1]
    # The reply with no list scores 0 and stays in the mean; the parsed-only mean leaves it out.
    assert data["graded"].to_list() == [1, 2]
    assert data["mean_accuracy"].to_list() == pytest.approx([100.0, 100 / 6])
    assert data["mean_accuracy_parsed"].to_list() == pytest.approx([100.0, 100 / 3])
    assert data["mean_stars_found"].to_list() == pytest.approx([3.0, 0.5])
    assert data["mean_over_lengths"].to_list() == pytest.approx([175 / 3] * 2)
    # (1000 × 100 + 3000 × 16.7) / 4000 = 37.5: the long context weighs three times as much.
    assert data["length_weighted_accuracy"].to_list() == pytest.approx([37.5, 37.5])

    scores = frame(con, "SELECT * FROM stars_scores ORDER BY reasoning")
    assert scores["lengths"].to_list() == [2, 1]
    assert scores["answers"].to_list() == [3, 1]
    assert scores["mean_over_lengths"].to_list() == pytest.approx([175 / 3, 50.0])
    assert scores["length_weighted_accuracy"].to_list() == pytest.approx([37.5, 50.0])


def find(spec: Any, key: str) -> Iterator[Any]:
    if isinstance(spec, dict):
        for k, v in spec.items():
            if k == key:
                yield v
            yield from find(v, key)
    elif isinstance(spec, list):
        for item in spec:
            yield from find(item, key)


def test_charts_build_with_fixed_colour_and_accuracy_scales(
    con: duckdb.DuckDBPyConnection,
) -> None:
    heat = charts_stars.star_index_heatmap(frame(con, "SELECT * FROM stars_by_index")).to_dict()
    assert [0.0, 1.0] in list(find(heat, "domain"))
    # Plain and reasoning cells differ: one block of model panels per variant.
    assert "vconcat" in heat

    lines = charts_stars.stars_accuracy_by_length(
        frame(con, "SELECT * FROM stars_accuracy_by_length")
    ).to_dict()
    assert [0.0, 100.0] in list(find(lines, "domain"))
    series = {row["series"] for rows in lines["datasets"].values() for row in rows}
    assert series == {"m · plain", "m · reasoning"}

    bars = charts_stars.stars_weighted_scores(frame(con, "SELECT * FROM stars_scores")).to_dict()
    values = [row for rows in bars["datasets"].values() for row in rows]
    assert {row["score"] for row in values} == {"mean over lengths", "length-weighted"}
    plain = {row["score"]: row["value"] for row in values if row["entry"] == "m · plain"}
    assert plain == {"mean over lengths": pytest.approx(58.33), "length-weighted": 37.5}


def test_empty_warehouse_gives_placeholders(tmp_path: Path) -> None:
    con = Warehouse(tmp_path).ensure().connect()
    for view in ("stars_results", "stars_by_index", "stars_accuracy_by_length", "stars_scores"):
        assert con.sql(f"SELECT count(*) FROM {view}").fetchall() == [(0,)]
    builders = [
        (charts_stars.star_index_heatmap, "stars_by_index"),
        (charts_stars.stars_accuracy_by_length, "stars_accuracy_by_length"),
        (charts_stars.stars_weighted_scores, "stars_scores"),
    ]
    for build, view in builders:
        spec = build(frame(con, f"SELECT * FROM {view}")).to_dict()
        assert spec["mark"]["type"] == "text"


def test_parse_failures_graded_before_the_zero_rule_read_as_zero(tmp_path: Path) -> None:
    """An answer stored when a reply with no list had no accuracy (before issue 13) reads as
    the rule scores it now, in results and in every view over it."""
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell_row("a", 1000, params()), cell_row("b", 1000, params())])
    old = {**graded_rows("a", "I lost count.")[0], "accuracy": None}
    for figure in ("correct", "missing", "extra"):
        old.pop(figure)
    store.append("answers", [old, graded_rows("b", reply([2, 7]))[0]])
    con = store.connect()
    rows = con.sql("SELECT cell_id, parse_ok, accuracy FROM results ORDER BY cell_id").fetchall()
    assert rows == [("a", False, 0.0), ("b", True, pytest.approx(200 / 3))]
    summary = con.sql(
        "SELECT graded, parse_failures, mean_accuracy, mean_stars_found"
        " FROM stars_accuracy_by_length"
    ).fetchall()
    assert summary == [(2, 1, pytest.approx(100 / 3), 1.0)]
    generic = con.sql("SELECT graded, mean_accuracy FROM accuracy_by_length").fetchall()
    assert generic == [(2, pytest.approx(100 / 3))]
    con.close()


def test_the_papers_fixed_counts_are_their_own_order(tmp_path: Path) -> None:
    store = Warehouse(tmp_path).ensure()
    paper = canonical_json({"stars": 3, "counts": "paper", "language": "en", "reasoning": False})
    store.append("cells", [cell_row("a", 1000, paper), cell_row("b", 1000, params())])
    store.append("answers", [graded_rows(c, reply(TRUTH))[0] for c in ("a", "b")])
    con = store.connect()
    rows = con.sql('SELECT cell_id, "order" FROM stars_results ORDER BY cell_id').fetchall()
    assert rows == [("a", "paper"), ("b", "shuffled")]
    con.close()
