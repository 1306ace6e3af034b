"""configs/mrcr.yaml and configs/latent.yaml on the real local model, into one warehouse: rows
in results and in the probes' views, prompts rebuilt from their cell rows, and the report's
sections with their charts."""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from needlescope.config_file import load_config
from needlescope.fillers import filler_from_spec
from needlescope.probes.build import rebuild
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.warehouse.report.drilldown import page_id
from needlescope.warehouse.store import Warehouse
from tests.e2e.test_report_browser import chart_ids

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _rebuilt_sha(config: Path, cell_id: str, filler_chars: int) -> str:
    """The prompt rebuilt from the cell row's filler size alone (mrcr: its filler pairs)."""
    loaded = load_config(config)
    cell = next(c for c in expand_grid(loaded) if c.cell_id == cell_id)
    kind = "none" if cell.probe == "mrcr" else "prose"
    filler = filler_from_spec(loaded.filler_spec("pattern" if kind == "none" else cell.filler))
    context = rebuild(probe_module(cell.probe), cell, filler, kind, filler_chars, 0)
    return context.prompt_sha256


def test_mrcr_and_latent_configs_run_on_the_local_model(cli, tmp_path: Path) -> None:
    wh, report = tmp_path / "wh", tmp_path / "report"
    mrcr, latent = REPO / "configs" / "mrcr.yaml", REPO / "configs" / "latent.yaml"
    done = cli("run", str(mrcr), "-w", str(wh), "--no-report")
    assert done.returncode == 0, done.stderr[-3000:]
    done = cli("run", str(latent), "-w", str(wh), "--report-dir", str(report))
    assert done.returncode == 0, done.stderr[-3000:]
    con = Warehouse(wh).connect()
    assert con.execute("SELECT count(*) FROM failed_cells").fetchone() == (0,)

    cells = con.execute(
        "SELECT probe, cell_id, filler_chars, prompt_length, prompt_sha256 FROM cells"
    ).fetchall()
    assert sorted(c[0] for c in cells) == ["latent_list"] * 4 + ["mrcr"] * 4
    for probe, cell_id, filler_chars, _, sha in cells:
        assert _rebuilt_sha(mrcr if probe == "mrcr" else latent, cell_id, filler_chars) == sha
    by_probe = {p: sum(c[3] for c in cells if c[0] == p) for p in ("mrcr", "latent_list")}
    assert by_probe["mrcr"] <= 8000 and by_probe["latent_list"] <= 8000

    # mrcr: every answer graded by OpenAI's rule, its figures in the view.
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

    # latent_list: exact match or a parse failure; the consistent prefix when something was read.
    rows = con.execute(
        "SELECT operations, irrelevant, score, parse_ok, consistent_with FROM latent_list_results"
    ).fetchall()
    assert sorted((r[0], r[1]) for r in rows) == [(3, 4), (3, 4), (6, 4), (6, 4)]
    for _, _, score, parse_ok, consistent_with in rows:
        assert (score is None) == (not parse_ok) and score in (None, 0.0, 100.0)
        assert consistent_with is None or 0 <= consistent_with <= 6
    assert con.execute("SELECT sum(answers) FROM latent_list_scores").fetchone() is not None

    names = chart_ids(report / "report.html")
    for probe, figures in {
        "mrcr": ("score", "nonce_hits"),
        "latent_list": ("score", "consistent_prefix"),
    }.items():
        assert {page_id(probe, f) for f in figures} <= set(names), names
