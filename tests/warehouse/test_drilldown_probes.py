"""The drill-down of the probes' own heatmaps (Counting-Stars, needle cases and RAG): every
cell a chart draws finds the answers behind it, with their per-needle outcomes and the
rebuilt haystack around each needle, within the page's shared bounds. Without a browser."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from needlescope.probes.base import Context
from needlescope.warehouse.charts import vega
from needlescope.warehouse.probes.cases import charts as charts_cases
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report import page as report
from needlescope.warehouse.report.drilldown import assemble as drilldown_collect
from needlescope.warehouse.report.figures import ProbeCharts, probe_figures
from needlescope.warehouse.store.rows import cell_row
from tests.support.synthetic_sweep import (
    PROBES_EPOCH,
    Built,
    build_probe_warehouse,
    build_warehouse,
)

# cells of the heatmaps: stars 2 models × 2 lengths × 2 orders; cases 2 models × 2 cases ×
# (llm, rag · topk) × 2 lengths × 4 depths
STARS_CELLS, CASES_CELLS = 8, 64


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_probe_warehouse(tmp_path_factory.mktemp("probes") / "wh")


@pytest.fixture
def con(built: Built) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = built.store.connect()
    yield connection
    connection.close()


def _own(con: duckdb.DuckDBPyConnection) -> dict[str, ProbeCharts]:
    found = {probe: probe_figures(con, probe) for probe in ("counting_stars", "cases")}
    assert all(charts is not None for charts in found.values())
    return {probe: charts for probe, charts in found.items() if charts is not None}


def _targets(own: dict[str, ProbeCharts]) -> list[drilldown.Target]:
    return [target for charts in own.values() for target in charts.drill]


def _datums(chart: Any) -> list[dict[str, Any]]:
    """Every data row of a chart's spec: for a heatmap, the datum of each of its cells."""
    spec = vega.chart_spec(chart)
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_key_parts_are_what_javascript_string_gives() -> None:
    # String(1500), String(50) for 50.0, String(33.333), String(true), String('a · b')
    assert [drilldown.key_part(v) for v in (1500, 50.0, 33.333, True, "a · b")] == [
        "1500",
        "50",
        "33.333",
        "true",
        "a · b",
    ]
    assert drilldown.key_part(0.1 + 0.2) == "0.30000000000000004"  # shortest round trip
    assert drilldown.cell_key("cases", "m", "llm", 1500, 0.0) == "cases\x1fm\x1fllm\x1f1500\x1f0"


def test_every_cell_of_the_probe_heatmaps_opens_its_own_answers(
    con: duckdb.DuckDBPyConnection, built: Built
) -> None:
    own = _own(con)
    data = drilldown.collect(con, _targets(own))
    assert set(data["charts"]) == {
        "counting_stars_star_index",
        "cases_keyword_heatmap",
        "cases_judge_heatmap",
    }
    assert len(data["groups"]) == STARS_CELLS + CASES_CELLS
    figures = {
        drilldown.page_id(probe, name): chart
        for probe, charts in own.items()
        for name, chart in charts.figures
    }
    checked = 0
    for chart_id, chart in data["charts"].items():
        datums = _datums(figures[chart_id])
        assert datums, chart_id
        for datum in datums:
            values = [datum.get(name, absent) for name, _, absent in chart["fields"]]
            group = data["groups"][drilldown.cell_key(chart["target"], *values)]
            assert group["shown"] and len(group["shown"]) <= data["per_cell"]
            for answer_id in group["shown"]:
                _assert_behind(built.contexts[data["answers"][answer_id]["cell_id"]], datum)
            checked += 1
    assert checked > STARS_CELLS + CASES_CELLS  # star-index rows are per star: more than cells


def _assert_behind(context: Context, datum: dict[str, Any]) -> None:
    """The answer's cell is one the clicked heatmap cell pools."""
    cell = context.cell
    assert cell.length == datum["length"]
    if cell.probe == "counting_stars":
        assert cell.model == datum["model"]
        assert cell.params()["order"] == datum["variant"]  # only the order varies here
        assert 1 <= datum["needle_index"] <= cell.needle_count
        return
    setting = "rag · topk" if cell.probe == "rag" else "llm"
    assert cell.probe in ("cases", "rag") and setting == datum["setting"]
    assert datum["panel"] == f"{cell.model} · {cell.params()['case']}"
    assert cell.depth == pytest.approx(datum["depth"], abs=1e-4)


def test_groups_count_the_answers_and_show_parsed_ones_first(
    con: duckdb.DuckDBPyConnection, built: Built
) -> None:
    data = drilldown.collect(con, _targets(_own(con)))
    stars = {k: g for k, g in data["groups"].items() if k.startswith("counting_stars\x1f")}
    assert {g["answers"] for g in stars.values()} == {2}  # two repeats a cell
    lost = stars[drilldown.cell_key("counting_stars", "beta", "shuffled", 2400)]
    assert lost["parsed"] == 1 and lost["errors"] == 0
    first, second = (data["answers"][a] for a in lost["shown"])
    assert first["parse_ok"] is True and second["parse_ok"] is False
    assert second["response"] == "I lost count of the stars, sorry."
    names = data["outcome_names"]
    assert [names[int(c, 36)] for c in first["outcomes"]] == [
        "correct",
        "correct",
        "missing",
        "missing",
    ]
    # A reply with no list missed every star (needlescope's rule: scored 0, kept in the mean).
    assert [names[int(c, 36)] for c in second["outcomes"]] == ["missing"] * 4
    cases = {k: g for k, g in data["groups"].items() if k.startswith("cases\x1f")}
    assert {g["answers"] for g in cases.values()} == {1}
    judged = [a for a in data["answers"].values() if "judge" in a]
    assert judged and all(a["judge"][0] in (2, 9) for a in judged)
    assert all(built.contexts[a["cell_id"]].cell.model == "alpha" for a in judged)


def test_each_probe_shows_its_needles_in_the_rebuilt_haystack(
    con: duckdb.DuckDBPyConnection, built: Built
) -> None:
    data = drilldown.collect(con, _targets(_own(con)))
    assert len(data["contexts"]) == len(built.contexts)
    for cell_id, found in data["contexts"].items():
        context = built.contexts[cell_id]
        assert found["source"] == "rebuilt", found.get("unavailable")
        parts = found["needles"]
        if context.cell.probe == "counting_stars":
            counts = [str(v) for v in context.expected]
            assert found["expected"] == context.expected
            assert [p[1] for p in parts] == counts
            # the count inside its star sentence, whatever numbers sit around it
            assert all(p[0].endswith("counted ") and p[2].startswith(" ★") for p in parts)
            continue
        expected = context.expected
        assert (
            found["expected"] == expected["needles"]
            and [p[1] for p in parts] == (expected["needles"])
        )
        assert found["question"] == expected["question"]
        assert found["keywords"] == expected["keywords"]
        offset = context.rendered.offsets[0]
        assert parts[0][0].lstrip("…") == context.haystack_text[max(0, offset - 120) : offset]
        if context.cell.probe == "rag":  # where retrieval put each needle
            records = context.rendered.facts["retrieval"]
            assert len(found["retrieval"]) == len(records)
            for note, record in zip(found["retrieval"], records, strict=True):
                assert ("not retrieved" in note) == (
                    not record["retrieved"] and not record["partial"]
                )
                assert note.endswith(f"(its chunk ranked {record['rank']})")
        else:
            assert "retrieval" not in found


def test_a_rag_cell_without_its_retrieval_order_says_so(built: Built) -> None:
    context = next(c for c in built.contexts.values() if c.cell.probe == "rag")
    row = cell_row(context, "r", haystack_length=None, planned_tokens=None, keep_prompt=False)
    rebuilder = drilldown.Rebuilder({})
    haystack, offsets, values = rebuilder.haystack(row)
    assert offsets == list(context.rendered.offsets)
    assert haystack == context.haystack_text and values == context.expected["needles"]
    facts = json.loads(row["facts"])
    unordered = {k: v for k, v in facts.items() if k != "order"}
    with pytest.raises(drilldown.ContextUnavailable, match="retrieval order"):
        rebuilder.haystack({**row, "facts": json.dumps(unordered)})
    other = {**facts, "order": facts["order"][:-1] if facts["order"] else [0]}
    with pytest.raises(drilldown.ContextUnavailable, match="differs from the one sent"):
        rebuilder.haystack({**row, "facts": json.dumps(other)})


def test_a_count_is_found_whole_in_its_sentence() -> None:
    text = "Filler. The penguin counted 14 ★. More filler. The penguin counted 4 ★. End."
    second = text.index("The penguin counted 4")
    assert drilldown.locate(text, second, "4") == text.index(" 4 ★") + 1
    assert drilldown.locate("The penguin counted 14 ★.", 0, "4") is None  # not inside 14
    assert drilldown.locate(text, 0, "Filler.") == 0
    [[before, needle, after]] = drilldown.snippets(text, [second], [4], width=10)
    assert (before, needle, after) == ("…n counted ", "4", " ★. End.")
    # a needle that is nowhere near: its place is shown, not a match elsewhere
    assert drilldown.snippets(text, [0], [99], width=5) == [["", "", "Fille…"]]


def test_the_panels_of_both_cases_heatmaps_are_named_alike(
    con: duckdb.DuckDBPyConnection,
) -> None:
    frames = charts_cases.load(con)
    # judge scores for one case only: its heatmap still names the case in its panels
    grid = frames.grid.with_columns(
        pl.when(pl.col("case") == "plum_cake_secrets")
        .then(pl.col("mean_judge_score"))
        .alias("mean_judge_score")
    )
    keyword = _datums(charts_cases.depth_length_heatmap(grid))
    judge = _datums(charts_cases.depth_length_heatmap(grid, value="mean_judge_score"))
    assert {d["panel"] for d in judge} == {"alpha · plum_cake_secrets"}
    assert {d["panel"] for d in judge} <= {d["panel"] for d in keyword}
    labelled = charts_cases.cell_labels(grid, charts_cases.panel_axes(grid))
    assert set(labelled["panel"]) == {d["panel"] for d in keyword}


def test_a_page_bounds_all_its_heatmaps_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "wh"
    build_warehouse(root)  # recall: 16 needle-heatmap cells
    build_probe_warehouse(root)
    monkeypatch.setattr(drilldown_collect, "MAX_ANSWERS", 100)  # 16 + 72 cells: one answer each
    page = report.write_report(root, tmp_path / "out").read_text(encoding="utf-8")
    found = re.search(r"<script type='application/json' id='drilldown'>(.*?)</script>", page, re.S)
    assert found
    data = json.loads(found.group(1))
    assert set(data["charts"]) == {
        *drilldown.HEATMAPS,
        "counting_stars_star_index",
        "cases_keyword_heatmap",
        "cases_judge_heatmap",
    }
    assert data["per_cell"] == 1 and len(data["groups"]) == 16 + STARS_CELLS + CASES_CELLS
    assert {len(g["shown"]) for g in data["groups"].values()} == {1}
    assert len(data["answers"]) == 16 + STARS_CELLS + CASES_CELLS
    assert any(a["epoch"] == PROBES_EPOCH for a in data["answers"].values())
    hinted = {
        probe
        for probe in ("recall", "counting_stars", "cases", "rag")
        if "Click a cell of a heatmap below" in _section(page, probe)
    }
    assert hinted == {"recall", "counting_stars", "cases"}  # rag's heatmaps are in cases'


def _section(page: str, probe: str) -> str:
    start = page.index(f"<section id='probe-{probe}'>")
    end = page.find("<section id='probe-", start + 1)
    return page[start : end if end > 0 else len(page)]
