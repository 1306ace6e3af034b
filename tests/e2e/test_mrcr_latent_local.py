"""configs/mrcr.yaml and configs/latent.yaml on the real local model: rows in results and in
the probes' views, prompts rebuilt from their cell rows, and the report's section with its
charts and answers side by side."""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from pathlib import Path

import duckdb
import pytest

from needlescope.config._file import load_config
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.build import rebuild
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.warehouse.report.drilldown import page_id
from needlescope.warehouse.store import Warehouse

pytestmark = pytest.mark.e2e


def chart_ids_of(page: str) -> list[str]:
    """The charts drawn, and those with nothing to draw (each one line saying why, issue 20:
    the 135M model's replies may all be cut off, leaving no valid score to chart)."""
    drawn = re.findall(r"<div class='vega' id='([^']+)'>", page)
    return drawn + re.findall(r"<p class='muted chart-empty' id='([^']+)'>[^<]+</p>", page)


REPO = Path(__file__).resolve().parents[2]


def _run(cli, config: Path, tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, str]:
    wh, report = tmp_path / "wh", tmp_path / "report"
    done = cli("run", str(config), "-w", str(wh), "--report-dir", str(report))
    assert done.returncode == 0, done.stderr[-3000:]
    con = Warehouse(wh).connect()
    assert con.execute("SELECT count(*) FROM failed_cells").fetchone() == (0,)
    return con, (report / "report.html").read_text(encoding="utf-8")


def _check_rebuilt(con: duckdb.DuckDBPyConnection, config: Path, probe: str) -> None:
    """Every prompt sent rebuilds from its cell row's filler size alone (mrcr: filler pairs);
    the config stays within 6,000 prompt tokens."""
    loaded = load_config(config)
    cells = {c.cell_id: c for c in expand_grid(loaded)}
    rows = con.execute("SELECT cell_id, filler_chars, prompt_length, prompt_sha256 FROM cells")
    found = rows.fetchall()
    assert len(found) == 4 and sum(r[2] for r in found) <= 6000
    for cell_id, filler_chars, _, sha in found:
        cell = cells[cell_id]
        kind = "none" if probe == "mrcr" else "prose"
        filler = filler_from_spec(loaded.filler_spec("pattern" if kind == "none" else cell.filler))
        context = rebuild(probe_module(probe), cell, filler, kind, filler_chars, 0)
        assert context.prompt_sha256 == sha


def test_mrcr_config_runs_on_the_local_model(cli, tmp_path: Path) -> None:
    config = REPO / "configs" / "mrcr.yaml"
    con, page = _run(cli, config, tmp_path)
    _check_rebuilt(con, config, "mrcr")
    # Every answer graded by OpenAI's rule, its figures in the view.
    rows = con.execute(
        "SELECT m.response, m.score, m.nonce_hit, m.needles, m.bin_low, r.expected"
        " FROM mrcr_results m JOIN results r USING (epoch, cell_id)"
    ).fetchall()
    assert len(rows) == 4
    for response, score, nonce_hit, needles, bin_low, expected_json in rows:
        expected = json.loads(expected_json)
        hit = response.startswith(expected["nonce"])
        assert nonce_hit is hit and needles in (2, 4) and bin_low in (512, 1024, 2048)
        body = response.removeprefix(expected["nonce"])
        ratio = SequenceMatcher(None, body, expected["reply"]).ratio() if hit else 0.0
        assert score == pytest.approx(100 * ratio)
    assert con.execute("SELECT count(*) FROM mrcr_scores").fetchone() == (4,)
    assert {page_id("mrcr", f) for f in ("score", "nonce_hits")} <= set(chart_ids_of(page))
    assert page.count("<table class='side-by-side'>") == 4  # asked and reproduced replies


def test_latent_config_runs_on_the_local_model(cli, tmp_path: Path) -> None:
    config = REPO / "configs" / "latent.yaml"
    con, page = _run(cli, config, tmp_path)
    _check_rebuilt(con, config, "latent_list")
    # Exact match or a parse failure; the consistent prefix when something was read.
    rows = con.execute(
        "SELECT operations, irrelevant, score, parse_ok, consistent_with FROM latent_list_results"
    ).fetchall()
    assert sorted((r[0], r[1]) for r in rows) == [(3, 4), (3, 4), (6, 4), (6, 4)]
    for operations, _, score, parse_ok, consistent_with in rows:
        assert (score is None) == (not parse_ok) and score in (None, 0.0, 100.0)
        assert consistent_with is None or 0 <= consistent_with <= operations
    (answers,) = con.execute("SELECT sum(answers) FROM latent_list_scores").fetchone() or (0,)
    invalid = con.execute("SELECT count(*) FROM results WHERE validity NOT IN ('valid', 'unknown')")
    assert answers + invalid.fetchone()[0] == 4
    wanted = {page_id("latent_list", f) for f in ("score", "consistent_prefix")}
    assert wanted <= set(chart_ids_of(page))
