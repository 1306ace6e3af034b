"""mrcr, latent_list and distractor answers in the warehouse: real cells and grades written as
the sweep writes them, read back through their views, and charted."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path

import altair as alt
import duckdb

from needlescope.config._file import load_config
from needlescope.config._sweep import FillerSpec, parse_config
from needlescope.fitting import tokens
from needlescope.grid._cells import Cell
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.base import BuildTools, Context
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.providers.base import Message, Reply
from needlescope.warehouse.report.figures import probe_figures
from needlescope.warehouse.report.sections.answers_side import answers_html
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import cell_row, graded_row

REPO = Path(__file__).resolve().parents[2]
PROSE = filler_from_spec(FillerSpec(kind="prose", language="en"))


async def _text(text: str) -> int:
    return tokens.count(text)


async def _messages(messages: tuple[Message, ...]) -> int:
    return sum(tokens.count(m.content) for m in messages)


TOOLS = BuildTools(measure=_text, measure_messages=_messages)


def _build(cell: Cell) -> Context:
    return asyncio.run(probe_module(cell.probe).build(cell, PROSE, "prose", TOOLS))


def _store(tmp_path: Path, answered: list[tuple[Context, str]]) -> duckdb.DuckDBPyConnection:
    store = Warehouse(tmp_path / "wh").ensure()
    cells, answers = [], []
    for context, text in answered:
        grade = probe_module(context.cell.probe).grade(
            context.expected, context.rendered.facts, text
        )
        reply = Reply(text, "stop", context.prompt_length, 20, None, 0.5)
        cells.append(cell_row(context, "r", planned_tokens=context.prompt_length))
        answers.append(graded_row(context, reply, grade, "r", "e", 1))
    store.append("cells", cells)
    store.append("answers", answers)
    return store.connect()


def _config(entry: dict[str, object]):
    return parse_config(
        {"name": "t", "models": [{"name": "m", "provider": "local"}], "probes": [entry]}
    )


def test_mrcr_views_score_nonce_and_wrong_occurrence(tmp_path: Path) -> None:
    cells = expand_grid(_config({"probe": "mrcr", "lengths": [1500, 2500], "needles": [2]}))
    built = [_build(c) for c in cells]
    first, second = built
    asked = first.expected
    other = asked["replies"][2 - asked["ask"]]  # the repeat not asked for
    con = _store(
        tmp_path,
        [(first, asked["nonce"] + other), (second, second.expected["reply"])],  # no nonce
    )
    rows = con.execute(
        "SELECT length, needles, score, nonce_hit, wrong_occurrence, ask, bin_low, bin_high,"
        " measured_tokens FROM mrcr_results ORDER BY length"
    ).fetchall()
    assert rows[0][:5] == (1500, 2, rows[0][2], True, 3 - asked["ask"])
    assert 0 < rows[0][2] < 100 and rows[0][5] == asked["ask"]
    assert rows[0][6] <= rows[0][8] < rows[0][7] == 2 * rows[0][6]
    assert (rows[0][6], rows[1][6]) == (1024, 2048)  # OpenAI's doubling bins, continued down
    assert rows[1][2:5] == (0.0, False, None)  # no nonce: 0, whatever it copied
    scores = con.execute(
        "SELECT length, answers, mean_score, nonce_hit_rate, wrong_occurrences FROM mrcr_scores"
        " ORDER BY length"
    ).fetchall()
    assert scores[0][1:] == (1, rows[0][2], 100.0, 1) and scores[1][1:] == (1, 0.0, 0.0, 0)
    charts = probe_figures(con, "mrcr")
    assert charts is not None and [name for name, _ in charts.figures] == ["score", "nonce_hits"]
    # The drill-down: the asked reply and the one the answer reproduced, side by side.
    shown = answers_html(con, "mrcr")
    assert shown.count("<details class='answer'>") == 2
    first_block = shown.split("<details class='answer'>")[1]  # lowest score first: the 0
    assert "nonce missed" in first_block
    wrong_block = shown.split("<details class='answer'>")[2]
    asked_cell, reproduced_cell = wrong_block.split("<td>")[1:3]
    assert html.escape(asked["reply"][:200]) in asked_cell
    assert html.escape(other[:200]) in reproduced_cell
    assert f"occurrence {3 - asked['ask']}, not the asked {asked['ask']}" in wrong_block
    for _, chart in charts.figures:
        assert isinstance(chart.to_dict(), dict)


def test_latent_views_score_and_consistent_prefix(tmp_path: Path) -> None:
    entry = {"probe": "latent_list", "lengths": [400], "operations": [4, 8], "irrelevant": [2]}
    four, eight = (_build(c) for c in expand_grid(_config(entry)))
    states = eight.expected["states"]
    con = _store(
        tmp_path,
        [(four, str(four.expected["answer"])), (eight, f"x = {states[5]}"), (eight, "no idea")],
    )
    rows = con.execute(
        "SELECT operations, irrelevant, query, score, success, consistent_with, parse_ok"
        " FROM latent_list_results ORDER BY operations"
    ).fetchall()
    assert rows[0] == (4, 2, "list", 100.0, True, 4, True)
    # The second answer of the 8-operation cell is the one results keeps (the latest).
    assert rows[1] == (8, 2, "list", None, False, None, False)
    scores = con.execute(
        "SELECT operations, answers, successes, parse_failures, mean_score FROM latent_list_scores"
        " ORDER BY operations"
    ).fetchall()
    assert scores == [(4, 1, 1, 0, 100.0), (8, 1, 0, 1, 0.0)]
    assert "6 of 8 operations" not in answers_html(con, "latent_list")  # its latest: unread
    assert "consistent with 4 of 4 operations" in answers_html(con, "latent_list")
    charts = probe_figures(con, "latent_list")
    assert charts is not None and len(charts.figures) == 2
    assert isinstance(charts.figures[1][1], alt.TopLevelMixin)


def test_distractor_view_counts_which_near_miss_fooled_the_model(tmp_path: Path) -> None:
    cells = expand_grid(load_config(REPO / "configs" / "cases.yaml"))
    stew = next(c for c in cells if c.params()["case"] == "morrow_stew_secrets")
    plum = next(c for c in cells if c.params()["case"] == "plum_cake_secrets")
    con = _store(
        tmp_path,
        [(_build(stew), "Dried juniper, I think."), (_build(plum), "Plums.")],
    )
    rows = con.execute(
        'SELECT model, "case", length, distractor, distractor_text FROM distractor_results'
    ).fetchall()
    assert rows == [
        (
            "smollm2-135m",
            "morrow_stew_secrets",
            1024,
            2,
            "Dried juniper is one of the secret ingredients of Admiral Morrow's fish stew.",
        )
    ]
    counted = con.execute("SELECT distractor, count(*) FROM distractor_results GROUP BY 1")
    assert counted.fetchall() == [(2, 1)]
