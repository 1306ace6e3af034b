"""Views and charts of the needle-cases probes on a temporary warehouse.

Rows are built the way the sweep builds them: real cases / rag contexts (a character measure and a
fake embedder), graded by the probes' own grader, with judge records from
needlescope.grading._judge.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from needlescope.config._sweep import parse_config
from needlescope.fitting._search import measure_text
from needlescope.grading import _judge as judge
from needlescope.haystack._fillers import SyntheticProseFiller
from needlescope.probes.base import Context
from needlescope.probes.build import build_context
from needlescope.probes.cases import probe as cases
from needlescope.probes.cases.entry import CasesProbe
from needlescope.probes.rag import probe as rag
from needlescope.probes.rag.entry import RagProbe
from needlescope.warehouse.charts import vega
from needlescope.warehouse.probes.cases import charts as charts_cases
from needlescope.warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
PROSE = SyntheticProseFiller("en", 0)
MARKERS = ("cardamom", "hazelnut", "elderflower", "secret", "ingredient", "plum", "cake")
ALL_THREE = "Ground cardamom, toasted hazelnuts and elderflower syrup."


async def by_chars(text: str) -> int:
    return measure_text(text, "chars")


async def fake_embed(texts: list[str]) -> list[list[float]]:
    return [[float(t.lower().count(w)) for w in MARKERS] + [0.05] for t in texts]


def contexts() -> tuple[list[Context], list[Context]]:
    shared = {
        "cases_file": str(REPO / "configs" / "cases" / "en.yaml"),
        "cases": ["plum_cake_secrets"],
        "lengths": [1500, 3000],
        "length_unit": "chars",
        "depths": [0, 50, 100],
    }
    config = parse_config(
        {
            "name": "t",
            "models": [
                {"name": "m1", "provider": "local"},
                {"name": "judge", "provider": "local", "under_test": False},
            ],
            "probes": [
                {"probe": "cases", "judge": "judge", **shared},
                {"probe": "rag", "judge": "judge", "chunk_size": 300, "top_k": 2, **shared},
            ],
        }
    )

    llm_probe, rag_probe = config.probes
    assert isinstance(llm_probe, CasesProbe) and isinstance(rag_probe, RagProbe)

    async def build_all() -> tuple[list[Context], list[Context]]:
        llm = [
            await build_context(cases, c, PROSE, "prose", by_chars)
            for c in cases.expand(config, llm_probe)
        ]
        retrieved = [
            await rag.retrieve(c, PROSE, "prose", fake_embed, by_chars)
            for c in rag.expand(config, rag_probe)
        ]
        return llm, retrieved

    return asyncio.run(build_all())


def cell_row(context: Context) -> dict[str, Any]:
    cell, rendered = context.cell, context.rendered
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
        "filler_chars": context.filler_chars,
        "prompt_length": context.prompt_length,
        "expected": json.dumps(rendered.expected),
        "needle_fractions": json.dumps(list(rendered.fractions)),
        "needle_offsets": json.dumps(list(rendered.offsets)),
        "facts": json.dumps(dict(rendered.facts)),
    }


def answer_row(
    context: Context, reply: str, judge_reply: str | None, at: datetime = NOW
) -> dict[str, Any]:
    """The answers row the sweep writes: the keyword grade, then the judge's verdict."""
    module = rag if context.cell.probe == "rag" else cases
    grade = module.grade(context.expected, context.rendered.facts, reply)
    detail = dict(grade.detail)
    if judge_reply is not None:
        verdict = judge.parse_verdict(judge_reply)
        detail |= judge.judge_record(
            verdict, model="judge", keyword_accuracy=grade.accuracy, raw=judge_reply
        )
    return {
        "run_id": "r1",
        "epoch": "e1",
        "cell_id": context.cell.cell_id,
        "model": context.cell.model,
        "probe": context.cell.probe,
        "answered_at": at,
        "response": reply,
        "response_kept": True,
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": json.dumps(grade.answered),
        "detail": json.dumps(detail),
    }


def failure_row(context: Context) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "epoch": "e1",
        "cell_id": context.cell.cell_id,
        "model": context.cell.model,
        "probe": context.cell.probe,
        "answered_at": NOW - timedelta(seconds=5),
        "response_kept": False,
        "error_kind": "timeout",
        "error": "slow",
    }


# Replies by (mode, depth): LLM recall fades with depth, RAG recalls all.
REPLIES = {
    ("llm", 0): (ALL_THREE, '{"score": 10, "reason": "all three"}'),  # agree
    ("llm", 50): ("Just cardamom.", "[[8]]"),  # keywords 16.7 vs judge 8: disagree
    ("llm", 100): ("I do not know.", "no idea"),  # the judge gave no score
    ("rag", 0): (ALL_THREE, "Score: 3"),  # keywords 100 vs judge 3: disagree
    ("rag", 50): (ALL_THREE, "Score: 9"),
    ("rag", 100): (ALL_THREE, None),  # not judged
}


@pytest.fixture(scope="module")
def built() -> tuple[list[Context], list[Context]]:
    return contexts()


@pytest.fixture
def con(tmp_path: Path, built: tuple[list[Context], list[Context]]) -> duckdb.DuckDBPyConnection:
    llm, retrieved = built
    store = Warehouse(tmp_path).ensure()
    store.append("cells", [cell_row(c) for c in [*llm, *retrieved]])
    rows = [failure_row(llm[0])]  # a failed attempt, then the graded answer: the latter wins
    for mode, group in (("llm", llm), ("rag", retrieved)):
        for context in group:
            reply, judged = REPLIES[(mode, int(context.cell.depth or 0))]
            rows.append(answer_row(context, reply, judged))
    store.append("answers", rows)
    return store.connect()


def test_scores_carry_case_depth_mode_and_both_grades(con: Any) -> None:
    frame = con.sql("SELECT * FROM cases_scores ORDER BY mode, length, depth").pl()
    assert frame.height == 12
    assert set(frame["case"]) == {"plum_cake_secrets"}
    assert frame.filter(frame["mode"] == "rag")["rag_mode"].to_list() == ["topk"] * 6
    assert frame.filter(frame["mode"] == "llm")["rag_mode"].null_count() == 6
    assert sorted(set(frame["depth"].to_list())) == [0.0, 50.0, 100.0]
    assert frame["error_kind"].null_count() == 12
    for row in frame.iter_rows(named=True):
        reply, judged = REPLIES[(row["mode"], int(row["depth"]))]
        assert row["response"] == reply
        assert row["disagreement"] is judge.disagreement(
            row["keyword_accuracy"], row["judge_score"]
        )
        if judged is None:
            assert row["judge_score"] is None and row["judge_error"] is None
    disagreeing = frame.filter(frame["disagreement"])
    assert sorted(zip(disagreeing["mode"], disagreeing["depth"], strict=True)) == [
        ("llm", 50.0),
        ("llm", 50.0),
        ("rag", 0.0),
        ("rag", 0.0),
    ]
    no_score = frame.filter((frame["mode"] == "llm") & (frame["depth"] == 100))
    assert no_score["judge_score"].to_list() == [None, None]
    assert set(no_score["judge_error"]) == {"no score found in the judge's reply"}


def test_depth_length_grid(con: Any) -> None:
    rows = con.sql(
        "SELECT mode, length, depth, answers, mean_keyword_accuracy, judged, disagreements "
        "FROM cases_depth_length ORDER BY ALL"
    ).fetchall()
    assert len(rows) == 12
    llm_1500 = [r for r in rows if r[0] == "llm" and r[1] == 1500]
    assert [(r[2], r[3], round(r[4], 1), r[5], r[6]) for r in llm_1500] == [
        (0.0, 1, 100.0, 1, 0),
        (50.0, 1, 16.7, 1, 1),
        (100.0, 1, 0.0, 0, 0),
    ]


def test_llm_and_rag_answers_pair_cell_by_cell(con: Any, built: Any) -> None:
    llm, retrieved = built
    pairs = con.sql("SELECT * FROM cases_llm_vs_rag").pl()
    assert pairs.height == 6
    expected = {
        r.cell.cell_id: next(
            c.cell.cell_id
            for c in llm
            if (c.cell.length, c.cell.depth) == (r.cell.length, r.cell.depth)
        )
        for r in retrieved
    }
    assert dict(zip(pairs["rag_cell_id"], pairs["llm_cell_id"], strict=True)) == expected
    gain = {(r["length"], r["depth"]): r["rag_minus_llm"] for r in pairs.iter_rows(named=True)}
    assert gain[(3000, 0.0)] == 0 and gain[(3000, 100.0)] == 100


def test_rag_retrieval_per_needle(con: Any, built: Any) -> None:
    _, retrieved = built
    frame = con.sql("SELECT * FROM rag_retrieval ORDER BY cell_id, needle_index").pl()
    assert frame.height == 6 * 3
    assert frame["needle_index"].to_list()[:3] == [1, 2, 3]
    assert frame["rank"].null_count() == 0 and frame["chunk"].null_count() == 0
    stored = {
        (c.cell.cell_id, r["needle"]): (r["retrieved"], r["rank"])
        for c in retrieved
        for r in c.rendered.facts["retrieval"]
    }
    for row in frame.iter_rows(named=True):
        assert stored[(row["cell_id"], row["needle_index"])] == (row["retrieved"], row["rank"])
        assert row["recalled"] is True  # every RAG reply named all three


def test_charts_build_from_the_views(con: Any, tmp_path: Path) -> None:
    frames = charts_cases.load(con)
    figures = dict(charts_cases.figures(frames))
    assert list(figures) == [
        "cases_keyword_heatmap",
        "cases_judge_heatmap",
        "cases_llm_vs_rag",
        "cases_judge_vs_keywords",
    ]
    heatmap = figures["cases_keyword_heatmap"].to_dict()
    # one grid (the settings have the same depths): a row per setting, llm then rag · topk
    (grid,) = heatmap["vconcat"]
    assert grid["facet"]["row"]["sort"][0] == "llm"
    assert grid["facet"]["row"]["sort"][1].startswith("rag · topk")
    assert json.dumps(heatmap).count('"llm"') >= 2  # its rows' data too
    scale = heatmap["vconcat"][0]["spec"]["encoding"]["color"]["scale"]
    assert (scale["domain"][0], scale["domain"][-1]) == (0.0, 100.0)  # fixed, whatever the data
    judge_scale = figures["cases_judge_heatmap"].to_dict()["vconcat"][0]["spec"]["encoding"]
    assert judge_scale["color"]["scale"]["domain"][-1] == 10.0
    pairs = figures["cases_llm_vs_rag"].to_dict()
    assert [layer["mark"]["type"] for layer in pairs["layer"]] == ["rule", "circle"]
    verdicts = figures["cases_judge_vs_keywords"].to_dict()["title"]["subtitle"]
    assert verdicts.startswith("4 of 8 judged answers (50%) disagree")
    vega.save_spec(vega.chart_spec(figures["cases_keyword_heatmap"]), tmp_path / "heatmap")
    vega.save_spec(vega.chart_spec(figures["cases_llm_vs_rag"]), tmp_path / "pairs")
    assert (tmp_path / "heatmap.svg").stat().st_size > 1000
    assert (tmp_path / "pairs.png").stat().st_size > 1000


def test_charts_on_an_empty_warehouse_are_placeholders(tmp_path: Path) -> None:
    con = Warehouse(tmp_path).ensure().connect()
    frames = charts_cases.load(con)
    assert frames.scores.is_empty() and frames.grid.is_empty() and frames.pairs.is_empty()
    for name, chart in charts_cases.figures(frames):
        assert chart.to_dict()["mark"]["type"] == "text", name
