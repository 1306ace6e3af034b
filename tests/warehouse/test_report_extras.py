"""The report's drill-down data, comparisons, statistics and run metadata, without a browser."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from needlescope.config._sweep import parse_config
from needlescope.flows.cli._app import app
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.build import build_context
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_grid
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report.drilldown import assemble as drilldown_collect
from needlescope.warehouse.report.html import json_script
from needlescope.warehouse.report.page import write_report
from needlescope.warehouse.report.sections import compare as compare_section
from needlescope.warehouse.stats import significance
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import cell_row
from tests.support.synthetic_sweep import EPOCHS, INJECTED, Built, build_warehouse

VARIANTS = ("needle_count", "filler")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_warehouse(tmp_path_factory.mktemp("extras") / "wh")


def _blob(page: str, element_id: str) -> Any:
    found = re.search(
        rf"<script type='application/json' id='{element_id}'>(.*?)</script>", page, re.S
    )
    assert found, element_id
    return json.loads(found.group(1))


def test_drilldown_rebuilds_every_haystack_and_caps_the_answers(built: Built) -> None:
    con = built.store.connect()
    try:
        data = drilldown.collect(con, [drilldown.recall_target("recall", VARIANTS)], per_cell=3)
    finally:
        con.close()
    assert set(data["charts"]) == set(drilldown.HEATMAPS)
    # a heatmap cell: model × needle count × filler × length, 2 repeats × 2 epochs behind it
    assert len(data["groups"]) == 2 * 2 * 2 * 2
    for group in data["groups"].values():
        assert group["answers"] == 4 and len(group["shown"]) == 3
    key = drilldown.cell_key("recall", "alpha", "3 needles · pattern", 600)
    assert key in data["groups"]
    for answer_id in data["groups"][key]["shown"]:
        answer = data["answers"][answer_id]
        context = built.contexts[answer["cell_id"]]
        cell = data["contexts"][answer["cell_id"]]
        assert cell["expected"] == list(context.expected)
        outcomes = [data["outcome_names"][int(code, 36)] for code in answer["outcomes"]]
        assert len(outcomes) == len(context.expected)
        assert set(outcomes) <= {"correct", "missing", "misorder"}
        snippets = cell["needles"]
        assert [s[1] for s in snippets] == [str(v) for v in context.expected]
        offset = context.rendered.offsets[-1]
        assert snippets[-1][0].lstrip("…") == context.haystack_text[max(0, offset - 120) : offset]
    assert all(c.get("source") == "rebuilt" for c in data["contexts"].values())
    long = [a for a in data["answers"].values() if (a["response_chars"] or 0) > 4000]
    assert long and all(len(a["response"]) == drilldown.RESPONSE_CHARS for a in long)


def test_drilldown_shows_fewer_answers_per_cell_when_there_are_many_cells(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drilldown_collect, "MAX_ANSWERS", 20)  # 16 heatmap cells: 1 answer each
    monkeypatch.setattr(drilldown_collect, "RESPONSE_BUDGET", 100)
    con = built.store.connect()
    try:
        data = drilldown.collect(con, [drilldown.recall_target("recall", VARIANTS)])
    finally:
        con.close()
    assert data["per_cell"] == 1 and data["response_chars"] == 500
    assert {len(g["shown"]) for g in data["groups"].values()} == {1}
    assert max(len(a["response"] or "") for a in data["answers"].values()) <= 500


def test_json_blocks_cannot_end_their_script_element() -> None:
    block = json_script("x", {"reply": INJECTED + "<!-- -->"})
    inner = block.split(">", 1)[1].rsplit("</script>", 1)[0]
    assert "</" not in inner and "<!--" not in inner
    assert json.loads(inner)["reply"] == INJECTED + "<!-- -->"


def test_a_context_that_cannot_be_rebuilt_says_why(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The river ran on. " * 200, encoding="utf-8")
    config = parse_config(
        {
            "name": "c",
            "models": [{"name": "m", "provider": "local"}],
            "fillers": {"novel": {"kind": "corpus", "path": str(corpus)}},
            "probes": [
                {
                    "probe": "recall",
                    "lengths": [500],
                    "length_unit": "chars",
                    "needle_counts": [2],
                    "fillers": ["novel"],
                }
            ],
        }
    )
    cell = expand_grid(config)[0]
    spec = config.filler_spec("novel")

    async def measure(text: str) -> int:
        return len(text)

    context = asyncio.run(build_context(recall, cell, filler_from_spec(spec), spec.kind, measure))
    row = cell_row(context, "r1", haystack_length=None, planned_tokens=None, keep_prompt=False)
    rebuilder = drilldown.Rebuilder({"r1": config.model_dump_json()})
    haystack, offsets, _ = rebuilder.haystack(row)  # the corpus path comes from the config
    assert haystack == context.haystack_text and offsets == list(context.rendered.offsets)

    # Stored with its prompt (save_prompts): the needles are found in the stored text.
    store = Warehouse(tmp_path / "wh").ensure()
    store.append("cells", [{**row, "prompt_text": context.prompt_text}])
    store.append(
        "answers",
        [
            {
                "run_id": "r1",
                "epoch": "e1",
                "cell_id": cell.cell_id,
                "model": "m",
                "probe": "recall",
                "response": "{}",
                "parse_ok": True,
                "accuracy": 0.0,
            }
        ],
    )
    store.append(
        "runs",
        [
            {
                "run_id": "r1",
                "epoch": "e1",
                "event": "start",
                "config_json": config.model_dump_json(),
            }
        ],
    )

    shutil.rmtree(corpus)
    con = store.connect()
    try:
        data = drilldown.collect(con, [drilldown.recall_target("recall", [])])
    finally:
        con.close()
    found = data["contexts"][cell.cell_id]
    assert found["source"] == "found in the stored prompt"
    assert [part[1] for part in found["needles"]] == [str(v) for v in context.expected]
    with pytest.raises(drilldown.ContextUnavailable, match="corpus"):
        drilldown.Rebuilder({"r1": config.model_dump_json()}).haystack(row)
    with pytest.raises(drilldown.ContextUnavailable, match="corpus folder"):
        drilldown.Rebuilder({}).haystack(row)  # no config: the folder is unknown
    with pytest.raises(drilldown.ContextUnavailable, match="hash to its id"):
        drilldown.Rebuilder({}).haystack({**row, "length": 501})
    with pytest.raises(drilldown.ContextUnavailable, match="never built"):
        drilldown.Rebuilder({}).haystack({**row, "filler_chars": None})


def test_comparisons_are_the_significance_figures(built: Built) -> None:
    con = built.store.connect()
    try:
        data = compare_section.collect(con, ["recall"])
        direct = significance.paired_comparison(
            con, significance.Side("beta", EPOCHS[0]), significance.Side("beta", EPOCHS[1])
        )
    finally:
        con.close()
    recall_pairs = data["recall"]["pairs"]
    sep = compare_section.SEP
    assert set(recall_pairs) == {
        f"alpha{sep * 2}beta",
        f"alpha{sep}{EPOCHS[0]}{sep * 2}alpha{sep}{EPOCHS[1]}",
        f"beta{sep}{EPOCHS[0]}{sep * 2}beta{sep}{EPOCHS[1]}",
    }
    drift = recall_pairs[f"beta{sep}{EPOCHS[0]}{sep * 2}beta{sep}{EPOCHS[1]}"]
    assert drift["diff"] == pytest.approx(direct.diff) and drift["significant"]
    assert drift["pairing"] == "cell_id" and len(drift["cells"]) == 4
    models = recall_pairs[f"alpha{sep * 2}beta"]
    assert models["pairing"] == "epoch, context_id" and models["diff"] < 0
    assert data["recall"]["default"] == ["alpha", "beta"]


def test_the_page_shows_intervals_effective_lengths_drift_and_runs(
    built: Built, tmp_path: Path
) -> None:
    page = write_report(
        built.store.root, tmp_path / "out", effective_threshold=20.0, unstable_spread=0.0
    ).read_text(encoding="utf-8")
    assert "Accuracy with 95% intervals" in page and "parsed (n)" in page
    assert "Effective context length (threshold 20%)" in page
    # spread 0: every config whose answers differ at all is listed
    assert "<table id='unstable-recall'>" in page
    assert "<tr class='drift'>" in page
    assert page.count("<details class='run'>") == 2
    assert re.search(r"python \d+\.\d+", page) and "polars " in page and "duckdb " in page
    drill = _blob(page, "drilldown")
    assert drill["groups"] and all(c["source"] == "rebuilt" for c in drill["contexts"].values())
    assert set(_blob(page, "comparison-data")) == {"recall"}
    assert 'id="answers-panel"' in page


def test_a_report_without_answers_has_no_drilldown(tmp_path: Path) -> None:
    Warehouse(tmp_path / "wh").ensure()
    page = write_report(tmp_path / "wh", tmp_path / "out").read_text(encoding="utf-8")
    assert "No answers in the warehouse yet" in page
    assert 'id="answers-panel"' not in page and "id='comparison'" not in page
    assert "Run metadata" in page


def test_report_command_takes_threshold_and_spread(built: Built, tmp_path: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "--threshold" in shown.output and "--unstable-spread" in shown.output
    done = runner.invoke(
        app,
        [
            "report",
            "--warehouse",
            str(built.store.root),
            "--out",
            str(tmp_path / "out"),
            "--threshold",
            "60",
            "--unstable-spread",
            "10",
        ],
    )
    assert done.exit_code == 0, done.output
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "threshold 60%" in page and "span more than 10 accuracy points" in page
    bad = runner.invoke(app, ["report", "--threshold", "150"])
    assert bad.exit_code == 2


def test_big_warehouses_compare_models_within_the_latest_epoch(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compare_section, "POOLED_MAX_ANSWERS", 10)
    con = built.store.connect()
    try:
        data = compare_section.collect(con, ["recall"])["recall"]
        monkeypatch.setattr(compare_section, "COMPARE_SECONDS", 0.0)
        late = compare_section.collect(con, ["recall"])["recall"]
    finally:
        con.close()
    sep = compare_section.SEP
    latest = f"alpha{sep}{EPOCHS[1]}{sep * 2}beta{sep}{EPOCHS[1]}"
    assert data["default"] == latest.split(sep * 2)
    assert data["pairs"][latest]["pairing"] == "context_id"
    assert "latest epoch" in data["note"]
    assert all("not computed" in p["error"] for p in late["pairs"].values())
    assert "left out for time" in late["note"]


def test_run_metadata_prices_each_models_answers_both_ways(tmp_path: Path) -> None:
    """Cost as charged (a batch at half price, cache reads at Anthropic's 0.1x) beside the
    same tokens at list price one by one with no cache, and the cache hit rate."""
    from needlescope.warehouse.report.sections import run_metadata

    config = parse_config(
        {
            "name": "c",
            "models": [
                {
                    "name": "claude",
                    "provider": "anthropic",
                    "model": "claude-x",
                    "price": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
                },
                {"name": "m", "provider": "local"},
            ],
            "probes": [{"probe": "goto", "line_counts": [10], "orders": ["ordered"]}],
        }
    )
    store = Warehouse(tmp_path / "wh").ensure()
    start = {"run_id": "r1", "epoch": "e1", "event": "start"}
    store.append("runs", [{**start, "config_json": config.model_dump_json()}])
    price = config.model("claude").price
    assert price is not None
    answers = []
    for i, (prompt, cached, batch) in enumerate([(1000, 800, "msgbatch_1"), (1000, 0, None)]):
        cost = price.cost(prompt, 10, cached, discounted=batch is not None)
        key = {"run_id": "r1", "epoch": "e1", "cell_id": f"c{i}", "model": "claude"}
        answers.append(
            {
                **key,
                "probe": "goto",
                "prompt_tokens": prompt,
                "completion_tokens": 10,
                "cached_tokens": cached,
                "cost_usd": cost,
                "batch_id": batch,
            }
        )
    failed = {"run_id": "r1", "epoch": "e1", "cell_id": "c9", "model": "claude"}
    answers.append({**failed, "probe": "goto", "error_kind": "batch_expired"})
    store.append("answers", answers)
    con = store.connect()
    try:
        page = run_metadata.section(con)
    finally:
        con.close()
    charged = sum(a["cost_usd"] for a in answers[:2])
    listed = (2000 * 3.0 + 20 * 15.0) / 1e6
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page.split("synchronous, no cache")[1])
    assert cells[:6] == ["claude", "2", f"{charged:.4f}", f"{listed:.4f}", "40.0", "1"]
    assert charged < listed
