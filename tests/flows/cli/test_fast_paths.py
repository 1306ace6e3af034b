"""Commands that need no orchestration never import Prefect (they must stay fast)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from needlescope.warehouse.store import Warehouse

PROBE = """
import sys
from needlescope.flows.cli._app import app
try:
    app({args!r})
except SystemExit as done:
    assert 'prefect' not in sys.modules, 'prefect was imported'
    sys.exit(done.code)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["sql", "SELECT count(*) AS n FROM results", "--warehouse", "{wh}"],
        ["report", "--warehouse", "{wh}", "--out", "{out}"],
        ["grade", "recall", "--expected", "[1234, 5678]", "--answer", '{{"1": 1234}}'],
        ["run", "{missing}"],
        ["stats", "--warehouse", "{wh}"],
        ["grade", "niah", "--expected", '["8462931"]', "--answer", "8462931"],
    ],
    ids=["sql", "report", "grade", "bad-config", "stats", "grade-ruler"],
)
def test_command_runs_without_prefect(tmp_path: Path, args: list[str]) -> None:
    Warehouse(tmp_path / "wh").ensure()
    filled = [
        a.format(wh=tmp_path / "wh", out=tmp_path / "out", missing=tmp_path / "none.yaml")
        for a in args
    ]
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=filled)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "prefect was imported" not in done.stderr
    assert done.returncode == (2 if args[0] == "run" else 0), done.stderr[-2000:]


def test_each_config_gets_a_nightly_deployment_beside_rerun_failed(write_config) -> None:
    from needlescope.flows.deployments import deployments_for

    scheduled = write_config(
        "name: recall\nmodels: [{name: m, provider: local}]\n"
        "probes: [{probe: recall, lengths: [200], needle_counts: [1]}]\n"
        "schedule: {cron: '30 1 * * 1-5', timezone: Europe/Paris}\n",
        "a.yaml",
    )
    plain = write_config(
        "name: stars\nmodels: [{name: m, provider: local}]\n"
        "probes: [{probe: recall, lengths: [200], needle_counts: [1]}]\n",
        "b.yaml",
    )
    nightly, default, rerun = deployments_for([scheduled, plain], warehouse="/data/wh", shards=3)
    assert [d.name for d in (nightly, default, rerun)] == [
        "nightly-recall",
        "nightly-stars",
        "rerun-failed",
    ]
    assert nightly.parameters == {
        "config_path": str(scheduled.resolve()),
        "warehouse": "/data/wh",
        "shards": 3,
    }
    cron = nightly.schedules[0].schedule
    assert (cron.cron, cron.timezone) == ("30 1 * * 1-5", "Europe/Paris")
    assert default.schedules[0].schedule.cron == "0 3 * * *"
    assert default.schedules[0].schedule.timezone == "UTC"
    # Workers import the flows by module path: no source folder to ship.
    assert nightly.entrypoint == "needlescope.flows.sweep.sweep"
    assert rerun.entrypoint == "needlescope.flows.rerun.rerun_failed"
    assert rerun.parameters == {"warehouse": "/data/wh"}
    (overridden,) = deployments_for([scheduled], cron="*/5 * * * *")[:1]
    assert overridden.schedules[0].schedule.cron == "*/5 * * * *"
    assert overridden.schedules[0].schedule.timezone == "UTC"


def test_shards_split_the_grid_into_disjoint_parts_that_cover_it() -> None:
    from needlescope.config._sweep import parse_config
    from needlescope.flows.run_cells import select_cells
    from needlescope.probes.registry import expand_grid

    config = parse_config(
        {
            "name": "split",
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {
                    "probe": "recall",
                    "lengths": [100, 200, 300],
                    "needle_counts": [1, 2, 3],
                    "repeats": 4,
                }
            ],
        }
    )
    cells = expand_grid(config)
    parts = [select_cells(cells, None, shard, 3) for shard in range(3)]
    ids = [c.cell_id for part in parts for c in part]
    assert sorted(ids) == sorted(c.cell_id for c in cells)
    assert len(set(ids)) == len(ids) == 36
    assert all(parts)  # a hash split: every shard gets cells
    chosen = {cells[0].cell_id, cells[5].cell_id}
    assert {c.cell_id for c in select_cells(cells, chosen, None, 1)} == chosen


def test_prefix_order_puts_prompts_sharing_a_haystack_side_by_side() -> None:
    from needlescope.config._sweep import parse_config
    from needlescope.flows.run_cells import uses_prefix_order
    from needlescope.grid._cells import order_cells
    from needlescope.probes.registry import expand_grid

    cases = str(Path(__file__).resolve().parents[3] / "configs" / "cases" / "en.yaml")
    config = parse_config(
        {
            "name": "order",
            "models": [
                {"name": "local", "provider": "local"},
                {"name": "claude", "provider": "anthropic", "model": "c"},
            ],
            "probes": [
                {
                    "probe": "cases",
                    "cases_file": cases,
                    "lengths": [500, 1000],
                    "depth_count": 4,
                    "fillers": ["prose-en", "pattern"],
                },
            ],
        }
    )
    cells = [c for c in expand_grid(config) if c.model == "local"]
    ordered = order_cells(cells, "prefix")
    assert sorted(c.cell_id for c in ordered) == sorted(c.cell_id for c in cells)
    # One filler's cells together, the needle's absolute position never rising within it.
    fillers = [c.filler for c in ordered]
    assert fillers == sorted(fillers, key=fillers.index)
    for filler in set(fillers):
        positions = [c.depth * c.length for c in ordered if c.filler == filler]  # type: ignore[operator]
        assert positions == sorted(positions, reverse=True)
    shuffled = order_cells(cells, "shuffled", seed=3)
    assert shuffled == order_cells(cells, "shuffled", seed=3) != cells
    assert order_cells(cells, "grid") == cells
    assert uses_prefix_order(config, "local") and not uses_prefix_order(config, "claude")
    forced = config.model_copy(update={"cell_order": "grid"})
    assert not uses_prefix_order(forced, "local")


def test_plan_and_import_legacy_run_without_prefect(tmp_path: Path) -> None:
    import sqlite3
    from contextlib import closing

    config = tmp_path / "c.yaml"
    config.write_text(
        "name: fast\nmodels: [{name: m, provider: local}]\n"
        "probes: [{probe: recall, lengths: [200], needle_counts: [1]}]\n",
        encoding="utf-8",
    )
    db = tmp_path / "seed.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "CREATE TABLE tokens_1000 (id INTEGER PRIMARY KEY, test_time TIMESTAMP, "
            "standard_json TEXT, model_response_json TEXT, elapsed_time REAL)"
        )
        conn.execute(
            "INSERT INTO tokens_1000 VALUES (1, '2025-11-23 07:27:30', '{\"1\": 1234}', "
            "'{\"1\": 1234}', 1.5)"
        )
        conn.commit()
    wh = tmp_path / "wh"
    for args in (
        ["plan", str(config), "--format", "json"],
        ["import-legacy", str(db), "--model", "m", "--warehouse", str(wh)],
    ):
        done = subprocess.run(
            [sys.executable, "-c", PROBE.format(args=args)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "prefect was imported" not in done.stderr
        assert done.returncode == 0, done.stderr[-2000:]
