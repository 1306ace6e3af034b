from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from needlescope.config._sweep import parse_config
from needlescope.grid._cells import Cell
from needlescope.probes.goto import probe as goto
from needlescope.probes.goto.entry import GotoProbe
from needlescope.warehouse.probes.goto import charts as charts_goto
from needlescope.warehouse.store import Warehouse

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def goto_cell(model: str, n: int, order: str, repeat: int) -> Cell:
    config = parse_config(
        {
            "name": "t",
            "models": [{"name": model, "provider": "local"}],
            "probes": [{"probe": "goto", "line_counts": [n], "orders": [order], "repeats": 4}],
        }
    )
    probe = config.probes[0]
    assert isinstance(probe, GotoProbe)
    return next(c for c in goto.expand(config, probe) if c.repeat == repeat)


def cell_row(cell: Cell) -> dict[str, Any]:
    rendered = goto.render(cell, None, goto.FILLER, 0)
    return {
        "cell_id": cell.cell_id,
        "context_id": cell.context_id,
        "run_id": "r1",
        "created_at": NOW,
        "model": cell.model,
        "probe": cell.probe,
        "probe_params": cell.probe_params,
        "filler": cell.filler,
        "filler_spec": cell.filler_spec,
        "placement": cell.placement,
        "region": cell.region,
        "prompt_version": cell.prompt_version,
        "seed": cell.seed,
        "length": cell.length,
        "length_unit": cell.length_unit,
        "needle_count": cell.needle_count,
        "repeat": cell.repeat,
        "expected": json.dumps(rendered.expected),
        "needle_fractions": json.dumps(list(rendered.fractions)),
        "needle_offsets": json.dumps(list(rendered.offsets)),
        "facts": json.dumps(dict(rendered.facts)),
    }


def answer_row(cell: Cell, reply: str, at: datetime = NOW) -> dict[str, Any]:
    """The answers row the sweep writes for a graded reply."""
    rendered = goto.render(cell, None, goto.FILLER, 0)
    grade = goto.grade(rendered.expected, json.loads(json.dumps(rendered.facts)), reply)
    return {
        "run_id": "r1",
        "epoch": "e1",
        "cell_id": cell.cell_id,
        "model": cell.model,
        "probe": cell.probe,
        "answered_at": at,
        "response": reply,
        "response_kept": True,
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": None if grade.answered is None else json.dumps(grade.answered),
        "detail": json.dumps(dict(grade.detail)) if grade.detail else None,
    }


def failure_row(cell: Cell, at: datetime = NOW) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "epoch": "e1",
        "cell_id": cell.cell_id,
        "model": cell.model,
        "probe": cell.probe,
        "answered_at": at,
        "response_kept": False,
        "error_kind": "timeout",
        "error": "slow",
    }


def value_of(cell: Cell, line: int) -> int:
    return int(goto.render(cell, None, goto.FILLER, 0).facts["line_values"][line - 1])


def right(cell: Cell) -> str:
    return f"<{goto.render(cell, None, goto.FILLER, 0).expected}>"


def neighbour(cell: Cell, step: int) -> tuple[str, int]:
    """A reply naming the value of line k + step (or k − step near the end), and that offset."""
    k = int(goto.render(cell, None, goto.FILLER, 0).facts["k"])
    line = k + step if k + step <= cell.length else k - step
    return str(value_of(cell, line)), line - k


@pytest.fixture
def warehouse(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, dict[str, int]]:
    a = [goto_cell("m1", 10, "ordered", r) for r in range(4)]
    b = [goto_cell("m1", 10, "shuffled", r) for r in range(3)]
    c = [goto_cell("m1", 25, "ordered", r) for r in range(2)]
    d = [goto_cell("m2", 10, "ordered", r) for r in range(2)]
    wrong_a, offset_a = neighbour(a[1], 2)
    wrong_b, offset_b = neighbour(b[0], 1)
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell_row(x) for x in [*a, *b, *c, *d]])
    later = NOW + timedelta(seconds=5)
    store.append(
        "answers",
        [
            answer_row(a[0], right(a[0])),
            answer_row(a[1], f"The answer is {wrong_a}."),
            answer_row(a[2], "I cannot tell."),  # parse failure: an answer, not a success
            answer_row(a[3], right(a[3])),
            answer_row(b[0], wrong_b),
            answer_row(b[1], "99999"),  # on no line (values stop at 10000)
            failure_row(b[2]),  # a request that failed: not an answer
            failure_row(c[0]),
            answer_row(c[0], right(c[0]), at=later),  # retried: the graded answer wins
            answer_row(c[1], right(c[1])),
            answer_row(d[0], right(d[0])),
            answer_row(d[1], right(d[1])),
        ],
    )
    return store.connect(), {"a": offset_a, "b": offset_b}


def test_success_view_counts_answers_and_successes(warehouse: Any) -> None:
    con, _ = warehouse
    frame = con.sql('SELECT * FROM goto_success ORDER BY model, n, "order"').pl()
    rows = {
        (r["model"], r["n"], r["order"]): (
            r["answers"],
            r["successes"],
            r["parse_failures"],
            r["errors"],
        )
        for r in frame.iter_rows(named=True)
    }
    assert rows == {
        ("m1", 10, "ordered"): (4, 2, 1, 0),
        ("m1", 10, "shuffled"): (2, 0, 0, 1),
        ("m1", 25, "ordered"): (2, 2, 0, 0),
        ("m2", 10, "ordered"): (2, 2, 0, 0),
    }
    rates = {
        (r["model"], r["n"], r["order"]): r["success_rate"] for r in frame.iter_rows(named=True)
    }
    assert rates[("m1", 10, "ordered")] == pytest.approx(0.5)
    assert rates[("m1", 10, "shuffled")] == 0.0
    bounds = frame.select("ci95_low", "success_rate", "ci95_high").iter_rows()
    assert all(0 <= low <= rate <= high <= 1 for low, rate, high in bounds)
    half = frame.filter(pl.col("success_rate") == 0.5).row(0, named=True)
    # Wilson's interval for 2 of 4: 0.150 to 0.850.
    assert half["ci95_low"] == pytest.approx(0.1500, abs=1e-3)
    assert half["ci95_high"] == pytest.approx(0.8500, abs=1e-3)


def test_wrong_offsets_trace_wrong_values_to_their_lines(warehouse: Any) -> None:
    con, offsets = warehouse
    rows = con.sql(
        'SELECT model, n, "order", "offset", answered_line, k, answered_k '
        'FROM goto_wrong_offsets ORDER BY "order"'
    ).fetchall()
    assert len(rows) == 3
    ordered = [r for r in rows if r[2] == "ordered"]
    shuffled = [r for r in rows if r[2] == "shuffled"]
    assert [(r[0], r[1], r[3]) for r in ordered] == [("m1", 10, offsets["a"])]
    assert ordered[0][4] == ordered[0][5] + offsets["a"]
    assert sorted((r[3] for r in shuffled), key=lambda v: v is None) == [offsets["b"], None]


def test_results_view_joins_the_picked_answer_only(warehouse: Any) -> None:
    con, _ = warehouse
    counts = con.execute(
        "SELECT count(*), count(DISTINCT (epoch, cell_id)), count(*) FILTER (WHERE success) "
        "FROM goto_results"
    ).fetchone()
    assert counts == (11, 11, 6)
    assert con.execute("SELECT count(*) FROM goto_results WHERE k IS NULL").fetchone() == (0,)


def test_charts_build_from_the_views(warehouse: Any) -> None:
    con, _ = warehouse
    success = charts_goto.success_by_n(con.sql("SELECT * FROM goto_success").pl())
    offsets = charts_goto.wrong_offsets(con.sql("SELECT * FROM goto_wrong_offsets").pl())
    shown = charts_goto.wrong_offsets(
        con.sql("SELECT * FROM goto_wrong_offsets").pl(), x="shown_offset"
    )
    for chart in (success, offsets, shown):
        spec = chart.to_dict()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    success_spec = success.to_dict()
    assert len(success_spec["layer"]) == 3
    assert "1 wrong answer(s) named a value found on no line" in json.dumps(offsets.to_dict())


def test_charts_on_an_empty_warehouse_are_placeholders(tmp_path: Path) -> None:
    con = Warehouse(tmp_path).ensure().connect()
    success = con.sql("SELECT * FROM goto_success").pl()
    wrong = con.sql("SELECT * FROM goto_wrong_offsets").pl()
    assert success.is_empty() and wrong.is_empty()
    for chart in (charts_goto.success_by_n(success), charts_goto.wrong_offsets(wrong)):
        assert chart.to_dict()["mark"]["type"] == "text"


def test_one_line_per_model_and_order() -> None:
    frame = pl.DataFrame(
        {
            "model": ["m1", "m1", "m1", "m1", "m2", "m2"],
            "n": [10, 50, 10, 50, 10, 50],
            "order": ["ordered", "ordered", "shuffled", "shuffled", "ordered", "ordered"],
            "prompt_version": ["goto-v1"] * 6,
            "answers": [2] * 6,
            "successes": [2, 1, 1, 0, 2, 2],
            "parse_failures": [0] * 6,
            "success_rate": [1.0, 0.5, 0.5, 0.0, 1.0, 1.0],
            "ci95_low": [0.3, 0.1, 0.1, 0.0, 0.3, 0.3],
            "ci95_high": [1.0, 0.9, 0.9, 0.7, 1.0, 1.0],
        }
    )
    spec = charts_goto.success_by_n(frame).to_dict()
    line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
    assert line["encoding"]["color"]["field"] == "series"
    assert line["encoding"]["strokeDash"]["field"] == "order"
    series = {(row["series"], row["order"]) for row in next(iter(spec["datasets"].values()))}
    assert series == {("m1", "ordered"), ("m1", "shuffled"), ("m2", "ordered")}


def seed_goto_cells(shuffle_block: int | None, instruction_at: str) -> list[Cell]:
    probe: dict[str, Any] = {
        "probe": "goto",
        "line_counts": [20],
        "orders": ["shuffled"],
        "prompts": ["goto-seed"],
        "instruction_at": instruction_at,
        "repeats": 2,
    }
    if shuffle_block is not None:
        probe["shuffle_block"] = shuffle_block
    config = parse_config(
        {"name": "t", "models": [{"name": "m1", "provider": "local"}], "probes": [probe]}
    )
    entry = config.probes[0]
    assert isinstance(entry, GotoProbe)
    return list(goto.expand(config, entry))


def test_block_sizes_and_placements_are_series_of_their_own(tmp_path: Path) -> None:
    whole = seed_goto_cells(None, "random")
    blocks = seed_goto_cells(5, "seed")
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell_row(x) for x in [*whole, *blocks]])
    store.append(
        "answers",
        [
            answer_row(whole[0], right(whole[0])),
            answer_row(whole[1], "nothing"),
            answer_row(blocks[0], right(blocks[0])),
            answer_row(blocks[1], "REGISTER_CONTENT is <０>"),  # full-width, on no line
        ],
    )
    con = store.connect()
    rows = con.execute(
        'SELECT "order", shuffle_block, instruction_at, answers, successes, parse_failures '
        "FROM goto_success ORDER BY shuffle_block NULLS FIRST"
    ).fetchall()
    assert rows == [("shuffled", None, "random", 2, 1, 1), ("shuffled", 5, "seed", 2, 1, 0)]
    wrong = con.execute("SELECT shuffle_block, answered FROM goto_wrong_offsets").fetchall()
    assert wrong == [(5, 0)]
    spec = charts_goto.success_by_n(con.sql("SELECT * FROM goto_success").pl()).to_dict()
    data = next(iter(spec["datasets"].values()))
    assert {(row["order"], row["series"]) for row in data} == {
        ("shuffled", "m1 · instruction at random"),
        ("shuffled in blocks of 5", "m1 · instruction at seed"),
    }
    line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
    assert line["encoding"]["strokeDash"]["sort"] == ["shuffled", "shuffled in blocks of 5"]
    offsets = charts_goto.wrong_offsets(con.sql("SELECT * FROM goto_wrong_offsets").pl())
    assert "1 wrong answer(s) named a value found on no line" in json.dumps(offsets.to_dict())
