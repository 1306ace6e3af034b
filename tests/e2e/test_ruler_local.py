"""RULER's 11 presets (configs/ruler.yaml) on the real local model: rows in ``results`` and in
the three families' views, the per-string outcomes, the answer prefix sent as a prefill that
llama.cpp continued, and the report's RULER charts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlescope.warehouse.store import Warehouse
from tests.e2e.test_report_browser import chart_ids

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RULER_CHARTS = {
    "niah_score_by_length",
    "niah_depth_heatmap",
    "variable_tracking_score_by_length",
    "aggregation_score_by_length",
}


def test_ruler_config_runs_into_its_views_and_report(cli, tmp_path: Path) -> None:
    wh, report = tmp_path / "wh", tmp_path / "report"
    done = cli(
        "run", str(REPO / "configs" / "ruler.yaml"), "-w", str(wh), "--report-dir", str(report)
    )
    assert done.returncode == 0, done.stderr[-3000:]

    con = Warehouse(wh).connect()
    by_probe = dict(con.execute("SELECT probe, count(*) FROM results GROUP BY probe").fetchall())
    assert by_probe == {"niah": 8, "variable_tracking": 1, "aggregation": 2}
    assert con.execute("SELECT count(*) FROM failed_cells").fetchone() == (0,)
    cells = con.execute(
        "SELECT probe, length, prompt_length, max_tokens, facts, expected FROM cells"
    ).fetchall()
    assert sum(row[2] for row in cells) <= 12_000  # prompt tokens, chat template included
    budgets = {"niah": 128, "variable_tracking": 30}
    for probe, length, prompt_length, max_tokens, _, _ in cells:
        assert max_tokens == budgets.get(probe, max_tokens) and max_tokens in (128, 30, 120, 50)
        # RULER's max_seq_length keeps tokens_to_generate; the chat template adds a few
        assert prompt_length <= length - max_tokens + 64

    views = {
        view: con.execute(f"SELECT count(*), count(score) FROM {view}").fetchone()
        for view in ("niah_results", "vt_results", "aggregation_results")
    }
    # every answer has RULER's score, a reply cut at tokens_to_generate included
    assert views == {"niah_results": (8, 8), "vt_results": (1, 1), "aggregation_results": (2, 2)}
    counted = con.execute("SELECT sum(answers), sum(invalid) FROM ruler_scores").fetchone()
    invalid = con.execute("SELECT count(*) FROM results WHERE validity <> 'valid'").fetchone()
    assert counted is not None and invalid is not None and counted == (11, invalid[0])
    presets = con.execute("SELECT DISTINCT preset FROM niah_results").fetchall()
    assert len(presets) == 8
    tasks = con.execute("SELECT task FROM aggregation_results ORDER BY task").fetchall()
    assert tasks == [("cwe",), ("fwe",)]

    # one per-string row for every expected string of every answer, found as graded
    expected_strings = sum(len(json.loads(row[5])) for row in cells)
    outcomes = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE found) FROM ruler_outcomes WHERE role = 'expected'"
    ).fetchone()
    found = con.execute("SELECT sum(correct) FROM results").fetchone()
    assert outcomes is not None and found is not None
    assert outcomes == (expected_strings, found[0])

    # Sent as a prefill, which llama.cpp continued: it returns the prefilled turn whole.
    answers = con.execute(
        "SELECT r.response, c.facts, r.detail FROM results r JOIN cells c USING (cell_id)"
    ).fetchall()
    for response, facts_json, detail_json in answers:
        facts, detail = json.loads(facts_json), json.loads(detail_json)
        assert facts["answer_prefix_mode"] == "prefill"
        assert response.lstrip().startswith(facts["answer_prefix"].strip())
        assert detail["prefill_echoed"] is True

    names = set(chart_ids(report / "report.html"))
    assert names >= RULER_CHARTS, names
    for name in RULER_CHARTS:
        assert (report / f"{name}.png").stat().st_size > 0
    page = (report / "report.html").read_text(encoding="utf-8")
    assert "RULER&#x27;s rule (85.6)" in page or "RULER's rule (85.6)" in page
    assert "NoLiMa" in page
