"""The report over the recall seed's own databases, imported, drawn in headless Chromium."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_report_browser import RECALL_CHARTS, assert_all_drawn, chart_ids
from tests.support.browser import inspect_file, require_chromium

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "seed_recall_results"
pytestmark = pytest.mark.skipif(
    not SEED.is_dir(), reason="the seed's result databases (../shared) are not beside the repo"
)

NEEDLESCOPE = Path(sys.executable).parent / "needlescope"


def raw_databases() -> list[Path]:
    """Each folder's answer database: the one with a bytes_stats or tokens_stats table."""
    import sqlite3

    found = []
    for path in sorted(SEED.glob("*/*.db")):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        names = {row[0] for row in con.execute("SELECT name FROM sqlite_master")}
        con.close()
        if names & {"bytes_stats", "tokens_stats"}:
            found.append(path)
    return found


def test_report_of_imported_seed_databases_draws_every_chart(tmp_path: Path) -> None:
    wh, report = tmp_path / "wh", tmp_path / "report"
    for db in raw_databases():
        done = subprocess.run(
            [str(NEEDLESCOPE), "import-legacy", str(db), "--model", db.stem, "-w", str(wh)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [str(NEEDLESCOPE), "report", "-w", str(wh), "--out", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    page = report / "report.html"
    names = chart_ids(page)
    assert set(RECALL_CHARTS) <= set(names)
    for db in raw_databases():
        assert db.stem in page.read_text(encoding="utf-8")
    require_chromium()
    assert_all_drawn(inspect_file(page), names)
