"""Commands that need no orchestration never import Prefect (they must stay fast)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from needlescope.warehouse.store import Warehouse

PROBE = """
import sys
from needlescope.cli import app
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
    ],
    ids=["sql", "report", "grade", "bad-config"],
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


def test_sweep_is_servable_as_a_deployment(write_config) -> None:
    from needlescope.flows.deployments import sweep_deployment

    config = write_config(
        "name: nightly-recall\nmodels: [{name: m, provider: local}]\n"
        "probes: [{probe: recall, lengths: [200], needle_counts: [1]}]\n"
    )
    deployment = sweep_deployment(config, cron="0 3 * * *", warehouse="/data/wh")
    assert deployment.name == "nightly-recall"
    assert deployment.parameters == {"config_path": str(config.resolve()), "warehouse": "/data/wh"}
    assert deployment.schedules and deployment.schedules[0].schedule.cron == "0 3 * * *"
    assert deployment.entrypoint is not None and deployment.entrypoint.endswith("sweep.py:sweep")
