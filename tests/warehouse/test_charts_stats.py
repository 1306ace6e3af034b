"""Statistics, chart builders, the CSV/Excel tables and the report on small hand-made data."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import altair as alt
import duckdb
import polars as pl
import pytest
from altair.utils.data import MaxRowsError
from openpyxl import load_workbook

from needlescope.grading.recall import grade_recall
from needlescope.warehouse.charts import lines, vega
from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.report.page import write_report
from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.stats import tables
from needlescope.warehouse.store import Warehouse, figures
from needlescope.warehouse.store.rows import analysis_rows

NOW = datetime(2026, 1, 1, tzinfo=UTC)
AXIS_VALUES = {
    "probe": "recall",
    "length_unit": "tokens",
    "needle_count": 4,
    "filler": "pattern",
    "prompt_version": "v1",
    "placement": "even",
    "region": "whole",
}


def result(model: str, length: int, repeat: int, accuracy: float | None, **extra: Any) -> dict:
    """One row of the `results` view, with only the columns the statistics read."""
    return {
        **AXIS_VALUES,
        "model": model,
        "length": length,
        "epoch": "e1",
        "repeat": repeat,
        "error_kind": None,
        "parse_ok": accuracy is not None,
        "accuracy": accuracy,
        "latency_s": 1.0 + repeat,
        "validity": "valid",
        **extra,
    }


RESULTS = pl.DataFrame(
    [
        # m @1000: three parsed repeats that disagree, a parse failure and a failed request.
        result("m", 1000, 0, 100.0),
        result("m", 1000, 1, 90.0),
        result("m", 1000, 2, 50.0),
        result("m", 1000, 3, None),
        result(
            "m", 1000, 4, None, error_kind="timeout", parse_ok=None, latency_s=None, validity=None
        ),
        # m @2000: two repeats that agree.
        result("m", 2000, 0, 70.0),
        result("m", 2000, 1, 75.0),
        # other @1000: nothing parsed.
        result("other", 1000, 0, None),
        result("other", 1000, 1, None),
    ],
    schema_overrides={"accuracy": pl.Float64, "latency_s": pl.Float64, "error_kind": pl.Utf8},
)


@pytest.fixture
def results_con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("results", RESULTS)
    # the view's figures over these rows (a warehouse's view reads them from its tallies:
    # tests/warehouse/test_rollups.py holds the two equal)
    con.execute(f"CREATE VIEW recall_stats AS {figures.summary_sql(figures.AXES)}")
    return con


def row(frame: pl.DataFrame, **where: Any) -> dict[str, Any]:
    matches = frame.filter(*(pl.col(k) == v for k, v in where.items()))
    assert matches.height == 1, matches
    return matches.row(0, named=True)


# ----------------------------------------------------------------------------- statistics


def test_recall_stats_figures_of_one_config(results_con: duckdb.DuckDBPyConnection) -> None:
    table = stats.recall_stats(results_con)
    first = row(table, model="m", length=1000)
    assert first["answers"] == 4  # the failed request is not an answer
    assert first["parse_failures"] == 1
    assert first["graded"] == 3
    assert first["errors"] == 1
    assert first["parse_failure_rate"] == pytest.approx(0.25)
    assert first["mean_accuracy"] == pytest.approx(80.0)
    assert first["median_accuracy"] == pytest.approx(90.0)
    assert first["min_accuracy"] == 50.0
    assert first["max_accuracy"] == 100.0
    assert first["sd_accuracy"] == pytest.approx(700**0.5)
    assert first["accuracy_range"] == 50.0
    assert first["repeats"] == 5 and first["epochs"] == 1
    # Student t with 2 degrees of freedom (4.303), clipped to 0-100.
    assert first["ci95_low"] == pytest.approx(80 - 4.303 * 700**0.5 / 3**0.5)
    assert first["ci95_high"] == 100.0
    assert first["mean_latency_s"] == pytest.approx((1 + 2 + 3 + 4) / 4)


def test_unstable_flag_follows_the_threshold(results_con: duckdb.DuckDBPyConnection) -> None:
    default = stats.recall_stats(results_con)
    assert row(default, model="m", length=1000)["unstable"] is True  # range 50 > 30
    assert row(default, model="m", length=2000)["unstable"] is False  # range 5
    assert row(default, model="other", length=1000)["unstable"] is False  # nothing parsed
    lenient = stats.recall_stats(results_con, unstable_range=60)
    assert row(lenient, model="m", length=1000)["unstable"] is False
    strict = stats.recall_stats(results_con, unstable_range=4)
    assert row(strict, model="m", length=2000)["unstable"] is True


def test_parse_failures_only_give_counts_and_no_accuracy(
    results_con: duckdb.DuckDBPyConnection,
) -> None:
    other = row(stats.recall_stats(results_con), model="other")
    assert (other["answers"], other["parse_failures"], other["graded"]) == (2, 2, 0)
    assert other["parse_failure_rate"] == 1.0
    assert other["mean_accuracy"] is None and other["median_accuracy"] is None
    assert other["ci95_low"] is None


def test_median_of_an_even_count_and_pooling_by_other_axes(
    results_con: duckdb.DuckDBPyConnection,
) -> None:
    assert row(stats.recall_stats(results_con), length=2000)["median_accuracy"] == 72.5
    pooled = row(stats.accuracy_summary(results_con, ["model"]), model="m")
    assert pooled["graded"] == 5
    assert pooled["median_accuracy"] == 75.0
    assert pooled["mean_accuracy"] == pytest.approx((100 + 90 + 50 + 70 + 75) / 5)


def test_the_view_sql_is_the_one_recall_stats_reads(
    results_con: duckdb.DuckDBPyConnection,
) -> None:
    from_view = results_con.sql("SELECT * FROM recall_stats ORDER BY model, length").pl()
    assert from_view.equals(stats.recall_stats(results_con))
    results_con.execute("SET VARIABLE recall_unstable_range = 60")
    assert not results_con.sql("SELECT bool_or(unstable) FROM recall_stats").fetchall()[0][0]


# ----------------------------------------------------------------------------- charts


def summary(models: int = 2, lengths: tuple[int, ...] = (1000, 2000, 4000)) -> pl.DataFrame:
    rows = []
    for m in range(models):
        for i, length in enumerate(lengths):
            for filler in ("pattern", "prose"):
                mean = 90.0 - 10 * i - 5 * m
                rows.append(
                    {
                        **AXIS_VALUES,
                        "model": f"model-{m}",
                        "length": length,
                        "filler": filler,
                        "answers": 3,
                        "parse_failures": i,
                        "graded": 3 - i,
                        "mean_accuracy": mean if i < 2 else None,
                        "ci95_low": mean - 5,
                        "ci95_high": mean + 5,
                        "parse_failure_rate": i / 3,
                    }
                )
    return pl.DataFrame(rows)


def needle_frame(models: int = 2) -> pl.DataFrame:
    rows = [
        {
            "model": f"model-{m}",
            "length": length,
            "needle_index": index,
            "position_accuracy": 100.0 - 30 * m - index,
            "parsed_answers": 3,
        }
        for m in range(models)
        for length in (16000, 500, 2000)
        for index in range(1, 5)
    ]
    return pl.DataFrame(rows)


def spec(chart: charts.Chart) -> dict[str, Any]:
    return chart.to_dict()  # validates against the Vega-Lite schema


def find(node: Any, key: str) -> list[Any]:
    """Every value of ``key`` anywhere in a spec."""
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                found.append(v)
            found += find(v, key)
    elif isinstance(node, list):
        for item in node:
            found += find(item, key)
    return found


def test_every_builder_returns_a_valid_chart() -> None:
    frame = charts.with_label(summary(), ["filler"], "panel")
    built = [
        lines.accuracy_by_length(frame, panel="panel"),
        lines.accuracy_by_length(summary(), color="filler", panel="model"),
        lines.parse_failures_by_length(frame, panel="panel"),
        lines.accuracy_by_filler(summary()),
        charts.heatmap(needle_frame(), value="position_accuracy", title="Position accuracy"),
    ]
    for chart in built:
        assert spec(chart)["$schema"].startswith("https://vega.github.io/schema/vega-lite/")


def test_heatmap_panels_share_one_colour_domain() -> None:
    chart = charts.heatmap(needle_frame(3), value="position_accuracy", title="Position")
    data = spec(chart)
    assert data["facet"]["field"] == "model"
    assert data["resolve"]["scale"]["color"] == "shared"
    assert find(data["spec"]["encoding"]["color"], "domain") == [[0.0, 100.0]]
    x = data["spec"]["encoding"]["x"]
    assert x["type"] == "ordinal" and x["sort"] == [500, 2000, 16000]  # numeric order


def test_heatmap_blocks_per_variant_share_one_colour_scale() -> None:
    frame = pl.concat(
        [needle_frame().with_columns(pl.lit(label).alias("variant")) for label in ("a", "b")]
    )
    chart = charts.heatmap(
        frame,
        value="position_accuracy",
        row="variant",
        row_sort=["b", "a"],
        colors=charts.REDS,
        domain=(0.0, 50.0),
        title="Missing",
    )
    data = spec(chart)
    # the same needle indices: one grid, a row per variant (in row_sort's order), a column per
    # model, sharing the x and y scales
    (grid,) = data["vconcat"]
    assert grid["facet"]["row"]["sort"] == ["b", "a"]
    assert grid["facet"]["column"]["sort"] == ["model-0", "model-1"]
    assert grid["resolve"]["scale"] == {"x": "shared", "y": "shared", "color": "shared"}
    domains = find(data["vconcat"], "domain")
    assert len(domains) == 1 and domains[0] == [0.0, 50 / 3, 100 / 3, 50.0]
    assert data["resolve"]["scale"]["color"] == "shared"


def test_heatmap_variants_with_other_rows_get_grids_of_their_own() -> None:
    frames = [
        needle_frame().with_columns(pl.lit(label).alias("variant")) for label in ("a", "b", "c")
    ]
    # "b" has needle indices 1-2 only: a grid of its own, so "a" and "c" keep their 4 rows
    frames[1] = frames[1].filter(pl.col("needle_index") <= 2)
    chart = charts.heatmap(
        pl.concat(frames), value="position_accuracy", row="variant", title="Position"
    )
    data = spec(chart)
    assert [g["facet"]["row"]["sort"] for g in data["vconcat"]] == [["a", "c"], ["b"]]
    assert data["resolve"]["scale"]["color"] == "shared"


def test_heatmap_with_more_models_than_a_row_holds_stacks_a_block_per_variant() -> None:
    frame = pl.concat(
        [
            needle_frame(charts.GRID_PANELS + 1).with_columns(pl.lit(label).alias("variant"))
            for label in ("a", "b")
        ]
    )
    chart = charts.heatmap(frame, value="position_accuracy", row="variant", title="Position")
    data = spec(chart)
    assert [block["title"]["text"] for block in data["vconcat"]] == ["a", "b"]
    assert {block["columns"] for block in data["vconcat"]} == {4}  # model panels wrapped


def test_a_heatmap_of_more_rows_than_altair_allows_gets_a_spec() -> None:
    frame = pl.DataFrame(
        {"model": "m", "length": length, "needle_index": index, "position_accuracy": 50.0}
        for length in range(1_000, 61_000, 1_000)
        for index in range(1, 101)
    )
    chart = charts.heatmap(frame, value="position_accuracy", title="Position")
    data = vega.chart_spec(chart)
    assert sum(len(rows) for rows in data["datasets"].values()) == 6_000
    with pytest.raises(MaxRowsError):  # Altair's own setting is left as it was
        chart.to_dict()


def test_degenerate_frames_give_placeholders_not_errors() -> None:
    empty = summary().clear()
    nothing_parsed = summary().with_columns(pl.lit(None, pl.Float64).alias("mean_accuracy"))
    for chart in (
        lines.accuracy_by_length(empty),
        lines.accuracy_by_length(nothing_parsed),
        lines.accuracy_by_filler(nothing_parsed),
        lines.parse_failures_by_length(empty),
        charts.heatmap(needle_frame().clear(), value="position_accuracy", title="P"),
    ):
        data = spec(chart)
        assert data["mark"]["type"] == "text"
        assert "nothing to chart" in json.dumps(data["datasets"])
    # Parse failures alone still chart their rate.
    assert "layer" in spec(lines.parse_failures_by_length(nothing_parsed))


def test_one_length_and_many_models() -> None:
    one = spec(lines.accuracy_by_length(summary(lengths=(4000,))))
    assert find(one, "x")[0]["type"] == "ordinal"
    many = spec(lines.accuracy_by_length(summary(models=15)))
    assert "tableau20" in json.dumps(many)
    heat = spec(charts.heatmap(needle_frame(12), value="position_accuracy", title="P"))
    assert heat["columns"] == 4


def test_length_axis_formats() -> None:
    assert charts.length_format([1000, 32000]) == "~s"
    assert charts.length_format([10389, 20389]) == ",d"
    assert charts.nice_max(0.37) == 0.5 and charts.nice_max(73) == 100 and charts.nice_max(0) > 0


# ----------------------------------------------------------------------------- tables


def test_csv_and_excel_one_sheet_per_model(
    results_con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    table = stats.recall_stats(results_con)
    csv = tables.write_csv(table, tmp_path / "stats.csv")
    assert pl.read_csv(csv).height == table.height
    book = load_workbook(tables.write_excel(table, tmp_path / "stats.xlsx"))
    assert book.sheetnames == ["m", "other"]
    sheet = book["m"]
    header = [cell.value for cell in sheet[1]]
    assert header == table.columns
    assert sheet.max_row == 1 + 2
    shaded = [r for r in range(2, sheet.max_row + 1) if sheet.cell(r, 1).fill.fill_type]
    flags = [sheet.cell(r, header.index("unstable") + 1).value for r in range(2, 4)]
    assert flags == [True, False] and shaded == [2]  # the unstable row is shaded


def test_excel_of_an_empty_table_and_awkward_model_names(tmp_path: Path) -> None:
    empty = load_workbook(tables.write_excel(pl.DataFrame({"model": []}), tmp_path / "e.xlsx"))
    assert empty.sheetnames == ["no data"]
    names = tables.sheet_names(["a/b", "a:b", "x" * 40, "x" * 40 + "y"])
    assert names["a/b"] == "a_b" and names["a:b"] == "a_b~2"
    assert all(len(n) <= 31 for n in names.values()) and len(set(names.values())) == 4


# ----------------------------------------------------------------------------- report


def tiny_warehouse(root: Path) -> Warehouse:
    """Two models, two lengths, one needle pattern; a hallucination only at one length."""
    store = Warehouse(root).ensure()
    expected = [1111, 2222, 3333]
    replies = {
        ("a", 100): '{"1": 1111, "2": 2222, "3": 3333}',
        ("a", 200): '{"1": 1111, "2": 9999, "3": 3333}',
        ("b", 100): '{"1": 2222, "2": 1111}',
        ("b", 200): "no json",
    }
    cells, answers, outcomes, invented = [], [], [], []
    for i, ((model, length), reply) in enumerate(replies.items()):
        cell_id = f"c{i}"
        cells.append(
            {
                **AXIS_VALUES,
                "cell_id": cell_id,
                "run_id": "r1",
                "created_at": NOW,
                "model": model,
                "length": length,
                "needle_count": 3,
                "repeat": 0,
                "expected": json.dumps(expected),
            }
        )
        grade = grade_recall(expected, reply)
        answers.append(
            {
                "run_id": "r1",
                "epoch": "e1",
                "cell_id": cell_id,
                "model": model,
                "probe": "recall",
                "answered_at": NOW + timedelta(seconds=i),
                "response": reply,
                "parse_ok": grade.parse_ok,
                "accuracy": grade.accuracy,
                "latency_s": 1.5,
            }
        )
        found, hallucinated, _ = analysis_rows(
            expected, grade, "r1", "e1", cell_id, model, "recall"
        )
        outcomes += found
        invented += hallucinated
    for table, rows in (
        ("cells", cells),
        ("answers", answers),
        ("needle_outcomes", outcomes),
        ("hallucinations", invented),
    ):
        store.append(table, rows)
    return store


def test_needle_and_hallucination_rates(tmp_path: Path) -> None:
    con = tiny_warehouse(tmp_path).connect()
    rates = stats.needle_rates(con)
    b = row(rates, model="b", needle_index=3)
    assert (b["parsed_answers"], b["missing_rate"], b["position_accuracy"]) == (1, 100.0, 0.0)
    assert row(rates, model="b", needle_index=1)["misorder_rate"] == 100.0
    invented = stats.hallucination_rates(con)
    # Model a hallucinated once at length 200; length 100 shows the same interval at 0.
    assert invented.filter(pl.col("model") == "a").select("length", "interval", "per_answer").rows(
        named=False
    ) == [(100, "1–3", 0.0), (200, "1–3", 1.0)]


def test_report_writes_every_chart_and_table(tmp_path: Path) -> None:
    tiny_warehouse(tmp_path / "wh")
    page = write_report(tmp_path / "wh", tmp_path / "out")
    text = page.read_text(encoding="utf-8")
    for name in (
        "accuracy_by_length",
        "accuracy_by_filler",
        "parse_failures_by_length",
        "position_accuracy",
        "missing_by_position",
        "misorder_by_position",
        "hallucinations_by_interval",
    ):
        assert (tmp_path / "out" / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / "out" / f"{name}.svg").read_text().startswith("<svg")
        assert f"id='{name}'" in text
    assert "<script src" not in text and "<link" not in text  # offline: all inline
    assert load_workbook(tmp_path / "out" / "stats.xlsx").sheetnames == ["a", "b"]
    assert pl.read_csv(tmp_path / "out" / "stats.csv").height == 4


def test_report_of_an_empty_or_older_warehouse(tmp_path: Path) -> None:
    Warehouse(tmp_path / "empty").ensure()
    assert "No answers in the warehouse yet" in write_report(
        tmp_path / "empty", tmp_path / "out1"
    ).read_text(encoding="utf-8")
    older = tiny_warehouse(tmp_path / "older")  # as written before needle tables existed
    shutil.rmtree(older.parquet / "needle_outcomes")
    shutil.rmtree(older.parquet / "hallucinations")
    assert write_report(older.root, tmp_path / "out2").is_file()


def test_another_probe_gets_its_own_section_without_needle_charts(tmp_path: Path) -> None:
    store = tiny_warehouse(tmp_path / "wh")
    store.append(
        "cells",
        [
            {
                **AXIS_VALUES,
                "probe": "counting_stars",
                "cell_id": "s1",
                "created_at": NOW,
                "model": "a",
                "length": 100,
            }
        ],
    )
    store.append(
        "answers",
        [
            {
                "run_id": "r1",
                "epoch": "e1",
                "cell_id": "s1",
                "model": "a",
                "probe": "counting_stars",
                "answered_at": NOW,
                "parse_ok": True,
                "accuracy": 50.0,
            }
        ],
    )
    text = write_report(store.root, tmp_path / "out").read_text(encoding="utf-8")
    assert "Probe: counting_stars" in text and "Probe: recall" in text
    assert (tmp_path / "out" / "counting_stars_accuracy_by_length.png").is_file()
    assert not (tmp_path / "out" / "counting_stars_position_accuracy.png").exists()


def test_chart_to_dict_is_plain_json() -> None:
    chart = charts.heatmap(needle_frame(), value="position_accuracy", title="P")
    assert json.loads(json.dumps(chart.to_dict()))
    assert isinstance(chart, alt.FacetChart)
