"""The report's drill-down and model comparison, clicked and chosen in a real browser.

The warehouses hold real contexts (built by needlescope's core, so the haystack around each
needle can be rebuilt) and synthetic answers of two models: recall over two epochs, and
Counting-Stars, needle cases and their RAG twins, whose own heatmaps drill down too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from needlescope.warehouse.report.page import write_report
from tests.support.browser import PageSession, find_chromium, open_page
from tests.support.synthetic_sweep import (
    EPOCHS,
    INJECTED,
    PROBES_EPOCH,
    Built,
    build_probe_warehouse,
    build_warehouse,
)

pytestmark = pytest.mark.skipif(
    find_chromium() is None and not os.environ.get("CI"),
    reason="needs Chromium: `make browser` (apt-get install chromium)",
)

MARKS = "#{chart} g.mark-rect.role-mark path"
PANEL_OPEN = "!document.getElementById('answers-panel').hidden"
# The index of the first mark of a chart whose datum has the given fields.
FIND_MARK = """((selector, wanted) => Array.from(document.querySelectorAll(selector))
  .findIndex((el) => el.__data__ && el.__data__.datum
    && Object.entries(wanted).every(([k, v]) => el.__data__.datum[k] === v)))"""


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    base = tmp_path_factory.mktemp("drill")
    built = build_warehouse(base / "wh")
    return write_report(base / "wh", base / "report"), built


def chart_ids(page: Path) -> list[str]:
    return re.findall(r"<div class='vega' id='([^']+)'>", page.read_text(encoding="utf-8"))


async def _panel(page: PageSession) -> dict[str, Any]:
    return dict(
        await page.evaluate(
            """(() => {
              const panel = document.getElementById('answers-panel');
              const first = panel.querySelector('.answer');
              return {
                title: document.getElementById('answers-title').textContent,
                summary: document.getElementById('answers-summary').textContent,
                text: panel.innerText,
                answers: panel.querySelectorAll('.answer').length,
                cell: first ? first.dataset.cellId : null,
                cells: Array.from(panel.querySelectorAll('.answer')).map((a) => a.dataset.cellId),
                replies: Array.from(panel.querySelectorAll('pre.reply')).map((p) => p.textContent),
                needles: Array.from(panel.querySelectorAll('.needle')).map((n) => n.textContent),
                focus: panel.querySelectorAll('tr.focus').length,
                images: panel.querySelectorAll('img, b').length,
              };
            })()"""
        )
    )


async def _close_panel(page: PageSession) -> None:
    await page.click("#answers-close")
    assert await page.wait_for("document.getElementById('answers-panel').hidden")


async def test_clicking_a_heatmap_cell_shows_the_answers_behind_it(
    drill: tuple[Path, Built],
) -> None:
    path, built = drill
    names = chart_ids(path)
    assert {"position_accuracy", "missing_by_position", "hallucinations_by_interval"} <= set(names)
    async with open_page(path.resolve().as_uri()) as page:
        report = page.report()
        problems = report.problems(names) + [f"warning: {w}" for w in report.console_warnings]
        assert not problems, "\n".join(problems)
        assert [c["id"] for c in report.charts] == names
        assert all(c["rendered"] == "ok" for c in report.charts)
        assert await page.evaluate(PANEL_OPEN) is False

        clicked = await page.click(MARKS.format(chart="position_accuracy"), index=7)
        datum = clicked["datum"]
        assert {"model", "length", "needle_index"} <= set(datum)
        assert await page.wait_for(PANEL_OPEN), "the answers panel did not open"
        shown = await _panel(page)
        assert (
            datum["model"] in shown["title"] and f"needle {datum['needle_index']}" in shown["title"]
        )
        assert 1 <= shown["answers"] <= 8
        context = built.contexts[str(shown["cell"])]
        assert context.cell.model == datum["model"] and context.cell.length == datum["length"]
        expected = ", ".join(f"{i}: {v}" for i, v in enumerate(context.expected, start=1))
        assert f"expected: {expected}" in shown["text"]
        epoch = next(e for e in reversed(EPOCHS) if (e, context.cell.cell_id) in built.replies)
        assert shown["replies"][0] == built.replies[(epoch, context.cell.cell_id)][:4000]
        # the haystack around every needle, rebuilt: the needles are where the prompt had them
        values = [str(v) for v in context.expected]
        assert shown["needles"][: len(values)] == values
        haystack = context.haystack_text
        offset = context.rendered.offsets[0]
        assert haystack[offset + len(values[0]) : offset + len(values[0]) + 40] in shown["text"]
        assert shown["focus"] >= 1  # the clicked needle's rows are marked
        assert "context unavailable" not in shown["text"]
        await _close_panel(page)

        # The reply with HTML in it: shown as text, never run or parsed as markup.
        injected = next(
            c
            for c in built.contexts.values()
            if (EPOCHS[0], c.cell.cell_id) in built.replies
            and built.replies[(EPOCHS[0], c.cell.cell_id)].startswith(INJECTED)
        )
        variant = f"{injected.cell.needle_count} needles · {injected.cell.filler}"
        wanted = {"model": injected.cell.model, "length": injected.cell.length, "variant": variant}
        selector = MARKS.format(chart="missing_by_position")
        index = await page.evaluate(f"{FIND_MARK}({json.dumps(selector)}, {json.dumps(wanted)})")
        assert index >= 0, f"no mark for {wanted}"
        await page.click(selector, index=index)
        assert await page.wait_for(PANEL_OPEN)
        shown = await _panel(page)
        assert any(r.startswith(INJECTED) for r in shown["replies"])
        assert shown["images"] == 0
        assert await page.evaluate("window.__injected === undefined")
        assert "reply cut at 4000 of" in shown["text"] or "padding" not in shown["text"]
        await _close_panel(page)

        # A hallucinations cell opens the same answers, focused on an interval.
        await page.click(MARKS.format(chart="hallucinations_by_interval"), index=0)
        assert await page.wait_for(PANEL_OPEN)
        shown = await _panel(page)
        assert "Hallucinations" in str(shown["title"]) and shown["answers"] >= 1

        report = page.report()
        assert not report.console_errors and not report.exceptions
        assert not [u for u in report.requests if not u.startswith(("file:", "data:", "blob:"))]


async def _comparison(page: PageSession) -> dict[str, Any]:
    return dict(
        await page.evaluate(
            """(() => ({
              overall: document.getElementById('compare-overall').textContent,
              overallClass: document.getElementById('compare-overall').className,
              rows: Array.from(document.querySelectorAll('#compare-table tbody tr'))
                .map((tr) => [tr.className, tr.innerText]),
              a: document.getElementById('compare-a').value,
              b: document.getElementById('compare-b').value,
            }))()"""
        )
    )


async def test_the_comparison_selects_change_the_table(drill: tuple[Path, Built]) -> None:
    path, _ = drill
    sep = "\x1f"
    async with open_page(path.resolve().as_uri()) as page:
        first = await _comparison(page)
        assert (first["a"], first["b"]) == ("alpha", "beta")
        assert "pairs" in str(first["overall"]) and "McNemar p" in str(first["overall"])
        assert len(first["rows"]) == 4  # 2 lengths × 2 needle counts
        assert first["overallClass"] == "worse"  # beta recalls far less than alpha

        await page.select("#compare-a", f"beta{sep}{EPOCHS[0]}")
        await page.select("#compare-b", f"beta{sep}{EPOCHS[1]}")
        drift = await _comparison(page)
        assert drift["rows"] != first["rows"] and drift["overall"] != first["overall"]
        assert drift["overallClass"] == "worse"  # beta dropped in the second epoch

        await page.select("#compare-a", "beta")
        await page.select("#compare-b", "alpha")
        flipped = await _comparison(page)
        assert flipped["overallClass"] == "better"  # the same pair read the other way
        assert len(flipped["rows"]) == 4

        await page.select("#compare-b", f"alpha{sep}{EPOCHS[0]}")
        mixed = await _comparison(page)
        assert "Not compared" in str(mixed["overall"]) and mixed["rows"] == []

        await page.click("#compare-swap")
        swapped = await _comparison(page)
        assert (swapped["a"], swapped["b"]) == (f"alpha{sep}{EPOCHS[0]}", "beta")

        report = page.report()
        assert not report.console_errors and not report.exceptions


def test_the_page_states_its_statistics_and_runs(drill: tuple[Path, Built]) -> None:
    text = drill[0].read_text(encoding="utf-8")
    for heading in ("Effective context length", "Drift", "Unstable cells", "Run metadata"):
        assert heading in text
    assert "<tr class='drift'>" in text  # beta's drop between the epochs is flagged
    assert text.count("<details class='run'>") == 2
    assert "&quot;needle_counts&quot;" in text  # the config, pretty-printed and escaped
    assert INJECTED not in text  # replies only ever travel inside the escaped JSON


@pytest.fixture(scope="module")
def probes_drill(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    base = tmp_path_factory.mktemp("drill-probes")
    built = build_probe_warehouse(base / "wh")
    return write_report(base / "wh", base / "report"), built


async def _click_cell(page: PageSession, chart: str, wanted: dict[str, object]) -> dict[str, Any]:
    """Click the mark of ``chart`` whose datum has the ``wanted`` fields; the panel opens."""
    selector = MARKS.format(chart=chart)
    index = await page.evaluate(f"{FIND_MARK}({json.dumps(selector)}, {json.dumps(wanted)})")
    assert index >= 0, f"{chart}: no mark for {wanted}"
    clicked = await page.click(selector, index=index)
    assert await page.wait_for(PANEL_OPEN), f"{chart}: the answers panel did not open"
    return dict(clicked["datum"])


async def test_the_stars_and_cases_heatmaps_drill_into_their_answers(
    probes_drill: tuple[Path, Built],
) -> None:
    path, built = probes_drill
    names = chart_ids(path)
    heatmaps = {"counting_stars_star_index", "cases_keyword_heatmap", "cases_judge_heatmap"}
    assert heatmaps <= set(names)
    async with open_page(path.resolve().as_uri()) as page:
        report = page.report()
        problems = report.problems(names) + [f"warning: {w}" for w in report.console_warnings]
        assert not problems, "\n".join(problems)
        drillable = await page.evaluate(
            "Array.from(document.querySelectorAll('.vega.drillable')).map((el) => el.id)"
        )
        assert set(drillable) == heatmaps  # the bar and line charts are not clickable

        # A star-index cell: beta at 2400 characters, shuffled counts, the third star.
        wanted = {"model": "beta", "length": 2400, "variant": "shuffled", "needle_index": 3}
        await _click_cell(page, "counting_stars_star_index", wanted)
        shown = await _panel(page)
        assert shown["title"] == "Stars found: beta · shuffled · length 2400 · star 3"
        contexts = [built.contexts[str(c)] for c in shown["cells"]]
        assert len(contexts) == 2  # both repeats
        for context in contexts:
            cell = context.cell
            assert (cell.probe, cell.model, cell.length) == ("counting_stars", "beta", 2400)
            assert cell.params()["order"] == "shuffled"
        # the parsed answer first, then the one that lost count
        assert "1 parsed of 2 answers" in str(shown["summary"])
        replies = [built.replies[(PROBES_EPOCH, c.cell.cell_id)] for c in contexts]
        assert shown["replies"] == replies and replies[1] == "I lost count of the stars, sorry."
        counts = [str(v) for v in contexts[0].expected]
        assert shown["needles"][:4] == counts  # each count, found in its rebuilt star sentence
        assert "the little penguin counted" in str(shown["text"])
        assert "correct" in str(shown["text"]) and "missing" in str(shown["text"])
        assert "context unavailable" not in str(shown["text"])
        assert shown["focus"] >= 1  # the third star's rows are marked
        await _close_panel(page)

        # A keyword-recall cell of RAG answers, at a depth that is no whole number.
        wanted = {
            "panel": "alpha · plum_cake_secrets",
            "setting": "rag · topk",
            "length": 3000,
            "depth": 33.333,
        }
        await _click_cell(page, "cases_keyword_heatmap", wanted)
        shown = await _panel(page)
        assert shown["title"] == (
            "Keyword recall: alpha · plum_cake_secrets · rag · topk · length 3000 · depth 33.3%"
        )
        assert shown["answers"] == 1
        context = built.contexts[str(shown["cell"])]
        cell = context.cell
        assert (cell.probe, cell.model, cell.length, cell.depth) == ("rag", "alpha", 3000, 33.333)
        assert shown["replies"] == [built.replies[(PROBES_EPOCH, cell.cell_id)]]
        assert shown["needles"] == context.expected["needles"]  # the document, rebuilt
        text = str(shown["text"])
        assert f"question: {context.expected['question']}" in text
        assert "keyword accuracy 100" in text and "judge 9/10" in text
        assert "in the prompt" in text or "not retrieved" in text
        assert "context unavailable" not in text
        await _close_panel(page)

        # A judge-score cell: the same panels, an LLM answer that recalled nothing.
        wanted = {
            "panel": "alpha · lighthouse_colour",
            "setting": "llm",
            "length": 1500,
            "depth": 66.667,
        }
        await _click_cell(page, "cases_judge_heatmap", wanted)
        shown = await _panel(page)
        assert str(shown["title"]).startswith("Judge score: alpha · lighthouse_colour · llm")
        context = built.contexts[str(shown["cell"])]
        assert (context.cell.probe, context.cell.depth) == ("cases", 66.667)
        assert shown["replies"] == ["I do not know."]
        assert "judge 2/10" in str(shown["text"]) and "missing" in str(shown["text"])
        assert shown["needles"] == context.expected["needles"]

        report = page.report()
        assert not report.console_errors and not report.exceptions
