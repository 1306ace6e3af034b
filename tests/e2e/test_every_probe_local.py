"""Every probe in one sweep on the real local model, then the report drawn in headless Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from needlescope.warehouse.store import Warehouse
from tests.e2e.test_report_browser import assert_all_drawn, chart_ids, chart_lines
from tests.support.browser import inspect_file, require_chromium

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

EVERY_PROBE = """
name: every-probe
seed: 3
models:
  - name: smol
    provider: local
    concurrency: 1
probes:
  - probe: recall
    lengths: [200, 300]
    needle_counts: [2]
  - probe: counting_stars
    stars: 4
    lengths: [400]
    languages: [en, zh]
    fillers: [prose-en, prose-zh]
  - probe: goto
    line_counts: [8]
    orders: [ordered, shuffled]
  - probe: cases
    cases_file: cases/en.yaml
    cases: [plum_cake_secrets]
    lengths: [400]
    depths: [0, 100]
    answer_buffer: 64
    judge: smol
  - probe: rag
    cases_file: cases/en.yaml
    cases: [plum_cake_secrets]
    lengths: [400]
    depths: [50]
    chunk_size: 300
    chunk_overlap: 50
    answer_buffer: 64
    top_k: 2
    judge: smol
"""

PROBE_CHARTS = {
    "recall": ["position_accuracy", "accuracy_by_length"],
    "counting_stars": ["counting_stars_star_index"],
    "goto": ["goto_success_by_n", "goto_wrong_offsets"],
}


def test_every_probe_runs_and_its_charts_draw(cli, tmp_path: Path) -> None:
    shutil.copytree(REPO / "configs" / "cases", tmp_path / "cases")
    config = tmp_path / "every.yaml"
    config.write_text(EVERY_PROBE)
    wh, report = tmp_path / "wh", tmp_path / "report"
    done = cli("run", str(config), "-w", str(wh), "--report-dir", str(report))
    assert done.returncode == 0, done.stderr[-3000:]

    con = Warehouse(wh).connect()
    by_probe = dict(con.execute("SELECT probe, count(*) FROM results GROUP BY probe").fetchall())
    assert by_probe == {"recall": 2, "counting_stars": 2, "goto": 2, "cases": 2, "rag": 1}
    assert con.execute("SELECT count(*) FROM failed_cells").fetchone() == (0,)
    # Every cases/rag answer went to the judge; its reply is stored whatever it said.
    judged = con.execute(
        "SELECT count(*) FROM results WHERE probe IN ('cases', 'rag') "
        "AND json_extract_string(detail, '$.judge_model') = 'smol'"
    ).fetchone()
    assert judged == (3,)
    retrieval = con.execute("SELECT count(*) FROM rag_retrieval").fetchone()
    assert retrieval is not None and retrieval[0] >= 1

    page = report / "report.html"
    names = chart_ids(page)
    # The 135M model fails most tasks: a chart with nothing to draw is one line saying why.
    lines = chart_lines(page)
    assert all(text.strip() for text in lines.values())
    for probe, expected in PROBE_CHARTS.items():
        assert set(expected) <= set(names) | set(lines), (probe, names, lines)
    assert {"cases_keyword_heatmap", "cases_llm_vs_rag"} <= set(names) | set(lines)
    require_chromium()
    assert_all_drawn(inspect_file(page), names)
