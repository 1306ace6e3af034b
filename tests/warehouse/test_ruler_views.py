"""RULER's views, per-string table, charts, effective lengths and `needlescope stats` on a
small warehouse: real RULER prompts (built by the probes with a made-up token count), made-up
replies graded by the probes' own grader, written as the sweep writes them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.grid._cells import Cell
from needlescope.haystack._fillers import PatternFiller, filler_from_spec
from needlescope.probes.base import BuildTools, Context
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.providers.base import Message, Reply
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import AnswerKey, cell_row, graded_row, table_rows

EPOCH = "ruler-2026-05-01"
RUN = "run-ruler"
T0 = datetime(2026, 5, 1, tzinfo=UTC)
CONFIG: dict[str, Any] = {
    "name": "ruler-views",
    "seed": 11,
    "models": [{"name": "alpha", "provider": "local"}],
    "probes": [
        {
            "probe": "niah",
            "presets": ["niah_single_1", "niah_multikey_1"],
            "lengths": [600, 1200, 2400],
            "repeats": 2,
        },
        {"probe": "variable_tracking", "lengths": [1200, 2400]},
        {"probe": "aggregation", "task": "cwe", "lengths": [1200]},
        {"probe": "aggregation", "task": "fwe", "lengths": [600]},
    ],
}


async def _count(text: str) -> int:
    return len(text) // 4


async def _count_messages(messages: tuple[Message, ...]) -> int:
    return sum(len(m.content) for m in messages) // 4 + 7


def _build(config: SweepConfig, cell: Cell) -> Context:
    filler = (
        PatternFiller(" ")
        if cell.filler.startswith("ruler-")
        else filler_from_spec(config.filler_spec(cell.filler))
    )
    tools = BuildTools(_count, _count, _count_messages, None)
    return asyncio.run(probe_module(cell.probe).build(cell, filler, "x", tools))


def _reply(context: Context, index: int) -> str:
    """Every expected string at the shortest length, then fewer; niah_multikey_1's longest
    cells name a distractor (another key's value) instead; the echoed prefill is kept."""
    expected = list(context.expected)
    kept = expected if context.cell.length <= 600 else expected[: max(0, len(expected) - index % 2)]
    facts = context.rendered.facts
    if context.cell.length == 2400 and facts.get("distractors") and context.cell.probe == "niah":
        kept = [facts["distractors"][0]]
    return str(facts["answer_prefix"]).strip() + " " + ", ".join(kept) + "."


@dataclass(frozen=True)
class Built:
    store: Warehouse
    contexts: list[Context]
    replies: list[str]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("ruler-wh")
    store = Warehouse(root).ensure()
    config = parse_config(CONFIG, "ruler-views.yaml")
    contexts = [_build(config, cell) for cell in expand_grid(config)]
    replies = [_reply(c, i) for i, c in enumerate(contexts)]
    tables: dict[str, list[dict[str, Any]]] = {"cells": [], "answers": []}
    by_probe: dict[str, list[int]] = {}
    for i, context in enumerate(contexts):
        by_probe.setdefault(context.cell.probe, []).append(i)
        tables["cells"].append(cell_row(context, RUN, length_basis="tokenizer"))
    for probe, indices in by_probe.items():
        chosen = [contexts[i] for i in indices]
        graded = probe_module(probe).grade_batch(
            [c.expected for c in chosen],
            [c.rendered.facts for c in chosen],
            [replies[i] for i in indices],
        )
        for i, grade in zip(indices, graded.grades, strict=True):
            reply = Reply(replies[i], "stop", contexts[i].prompt_length, 12, None, 0.2)
            row = graded_row(contexts[i], reply, grade, RUN, EPOCH, 1)
            row["answered_at"] = T0 + timedelta(seconds=i)
            tables["answers"].append(row)
        keys = [AnswerKey(RUN, EPOCH, c.cell.cell_id, c.cell.model, probe) for c in chosen]
        for table, rows in table_rows(graded.tables, keys).items():
            tables.setdefault(table, []).extend(rows)
    for table, rows in tables.items():
        store.append(table, rows)
    return Built(store, contexts, replies)


def test_rows_land_in_results_and_the_three_views(built: Built) -> None:
    con = built.store.connect()
    counts = dict(con.sql("SELECT probe, count(*) FROM results GROUP BY probe").fetchall())
    assert counts == {"niah": 12, "variable_tracking": 2, "aggregation": 2}
    niah = con.sql(
        "SELECT preset, type_haystack, num_needle_k, length, depth, score, found, missing,"
        " distractors_found, answer_prefix_mode, units FROM niah_results ORDER BY ALL"
    ).fetchall()
    assert len(niah) == 12
    assert {r[0] for r in niah} == {"niah_single_1", "niah_multikey_1"}
    assert {(r[0], r[1], r[2]) for r in niah} == {
        ("niah_single_1", "noise", 1),
        ("niah_multikey_1", "essay", 4),
    }
    assert all(r[9] == "prefill" and r[10] > 0 and 0 <= r[4] <= 100 for r in niah)
    # the distractor replies: multikey_1 at 2400 names another key's value, scores 0
    wrong = [r for r in niah if r[0] == "niah_multikey_1" and r[3] == 2400]
    assert [(r[5], r[6], r[8]) for r in wrong] == [(0.0, 0, 1)] * 2
    multikey = {
        r[0]
        for r in con.sql(
            "SELECT DISTINCT (expected_count, needles_planted) FROM niah_results"
            " WHERE preset = 'niah_multikey_1'"
        ).fetchall()
    }
    assert multikey == {(1, 4)}  # one key asked, four planted
    vt = con.sql("SELECT num_hops, expected_count, query_value, score FROM vt_results").fetchall()
    assert {r[:2] for r in vt} == {(4, 5)} and all(10000 <= r[2] <= 99999 for r in vt)
    agg = con.sql("SELECT task, num_cw, vocab_size, score FROM aggregation_results ORDER BY task")
    assert [r[:3] for r in agg.fetchall()] == [("cwe", 10, None), ("fwe", None, 2000)]


def test_per_string_outcomes_match_the_grades(built: Built) -> None:
    con = built.store.connect()
    per_answer = con.sql(
        "SELECT cell_id, count(*) FILTER (WHERE role = 'expected'),"
        " count(*) FILTER (WHERE role = 'expected' AND found),"
        " count(*) FILTER (WHERE role = 'distractor') FROM ruler_outcomes GROUP BY cell_id"
    ).fetchall()
    answers = {
        r[0]: r[1:]
        for r in con.sql(
            "SELECT cell_id, correct, missing, wrong, accuracy FROM results"
        ).fetchall()
    }
    assert len(per_answer) == len(built.contexts) == 16
    for cell_id, expected, found, distractors in per_answer:
        correct, missing, wrong, accuracy = answers[cell_id]
        assert (found, expected - found, distractors) == (correct, missing, wrong)
        assert accuracy == pytest.approx(100 * found / expected)
    texts = {
        r[0]
        for r in con.sql("SELECT text FROM ruler_outcomes WHERE role = 'distractor'").fetchall()
    }
    planted = {
        d for c in built.contexts if c.cell.probe == "niah" for d in c.rendered.facts["distractors"]
    }
    assert texts and texts <= planted


def test_scores_round_as_ruler_does(built: Built) -> None:
    con = built.store.connect()
    scores = {
        (r[0], r[1]): r[2:]
        for r in con.sql("SELECT task, length, score, answers FROM ruler_scores").fetchall()
    }
    assert scores[("niah_single_1", 600)] == (100.0, 2)
    assert scores[("niah_multikey_1", 2400)] == (0.0, 2)
    by_hand = con.execute(
        "SELECT round(avg(accuracy), 2) FROM results WHERE probe = 'aggregation'"
        " AND json_extract_string(probe_params, '$.task') = 'cwe'"
    ).fetchone()
    assert by_hand is not None and scores[("cwe", 1200)] == (by_hand[0], 1)


def test_charts_draw_each_family_and_the_depth_heatmap(built: Built) -> None:
    from needlescope.warehouse.report.figures import probe_figures

    con = built.store.connect()
    niah = probe_figures(con, "niah")
    assert niah is not None
    assert [name for name, _ in niah.figures] == ["score_by_length", "depth_heatmap"]
    heatmap = niah.figures[1][1].to_dict()
    assert "placeholder" not in json.dumps(heatmap).lower()
    assert [t.name for t in niah.drill] == ["niah"]
    for probe in ("variable_tracking", "aggregation"):
        own = probe_figures(con, probe)
        assert own is not None and [n for n, _ in own.figures] == ["score_by_length"]
        assert "mark" in json.dumps(own.figures[0][1].to_dict())


def test_drilldown_finds_the_niah_answers_and_rebuilds_their_prompts(built: Built) -> None:
    from needlescope.warehouse.report import drilldown

    con = built.store.connect()
    from needlescope.warehouse.probes.ruler.report import niah_target

    target = niah_target(drilldown.page_id("niah", "depth_heatmap"))
    collected = drilldown.collect(con, [target], source="results")
    groups = json.dumps(collected, default=str)
    # every niah answer is behind a heatmap cell; their haystacks were rebuilt, none refused
    assert groups.count('"cell_id"') >= 12
    assert "unavailable" not in groups  # every picked cell was rebuilt, none refused
    # each needle is shown in the haystack around it: the special magic number sentence
    assert "One of the special magic number" in groups


def test_effective_lengths_both_ways_with_intervals(built: Built) -> None:
    from needlescope.warehouse.stats.effective import effective_both

    con = built.store.connect()
    frame = effective_both(con, probe="niah")
    (row,) = frame.to_dicts()
    # Means by length (every answer pooled): 600 -> 100, 1200 -> 50, 2400 -> 25; bootstrap
    # intervals 100-100, 0-100, 0-75 (seed 0). RULER at 85.6: 600 (bounds: 600, 1200).
    # NoLiMa: no 250/500/1K lengths, so the base is the three shortest: (100 + 50 + 25) / 3,
    # threshold 0.85 x 58.33 = 49.58: means -> 1200, lows -> 600, highs -> 2400.
    assert (row["threshold"], row["lengths_tested"], row["longest_tested"]) == (85.6, 3, 2400)
    assert (row["effective_length"], row["effective_length_lo"], row["effective_length_hi"]) == (
        600,
        600,
        1200,
    )
    assert row["nolima_base"] == pytest.approx(175 / 3)
    assert row["nolima_base_lengths"] == "600, 1200, 2400 (shortest)"
    assert row["nolima_threshold"] == pytest.approx(0.85 * 175 / 3)
    nolima = tuple(row[f"nolima_effective_length{s}"] for s in ("", "_lo", "_hi"))
    assert nolima == (1200, 600, 2400)
    assert effective_both(con, probe="niah", threshold=10.0)["effective_length"][0] == 2400


def test_stats_command_prints_both_rules(built: Built) -> None:
    from needlescope.flows.cli._app import app

    runner = CliRunner()
    done = runner.invoke(
        app, ["stats", "-w", str(built.store.root), "--probe", "niah", "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)
    assert row["probe"] == "niah" and row["threshold"] == 85.6
    assert {"effective_length_lo", "nolima_effective_length_hi"} <= set(row)
    every = runner.invoke(app, ["stats", "-w", str(built.store.root), "--threshold", "50"])
    assert every.exit_code == 0 and "aggregation" in every.stdout and "50.0" in every.stdout
    bad = runner.invoke(app, ["stats", "-w", str(Path(built.store.root) / "nope")])
    assert bad.exit_code == 2


def test_schema_six_adds_the_per_string_table(tmp_path: Path) -> None:
    from needlescope.warehouse.store.schema import MIGRATIONS, TABLES

    assert MIGRATIONS[5][:2] == (6, "ruler-outcomes")
    assert {"role", "string_index", "text", "found"} <= set(TABLES["ruler_outcomes"].names)
    store = Warehouse(tmp_path / "wh").ensure()
    con = store.connect()
    assert con.execute("SELECT count(*) FROM ruler_outcomes").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM niah_results").fetchone() == (0,)


def test_report_draws_rulers_sections_and_both_rules(built: Built, tmp_path: Path) -> None:
    import re

    from needlescope.warehouse.report.page import write_report

    page = write_report(built.store.root, tmp_path / "report").read_text(encoding="utf-8")
    names = set(re.findall(r"<div class='vega' id='([^']+)'>", page))
    assert {
        "niah_score_by_length",
        "niah_depth_heatmap",
        "variable_tracking_score_by_length",
        "aggregation_score_by_length",
    } <= names
    assert not {n for n in names if n.endswith("parse_failures_by_length")}  # nothing parses
    assert "Effective context length (threshold 85.6%)" in page
    assert "RULER&#x27;s rule (85.6)" in page or "RULER's rule (85.6)" in page
    assert "NoLiMa" in page
    assert (tmp_path / "report" / "niah_depth_heatmap.png").stat().st_size > 0
