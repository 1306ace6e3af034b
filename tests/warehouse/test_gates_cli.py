"""`needlescope gates` judges an epoch again from the config it was swept with (exit 4 when a
gate failed, else 0), and a change of the local model's chat template between two epochs is
listed beside the drift: in the command's output and the report's drift table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
from typer.testing import CliRunner

from needlescope.config._sweep import parse_config
from needlescope.flows.cli._app import app
from needlescope.warehouse.report.sections.statistics import section
from needlescope.warehouse.stats.gates import serving_changes
from tests.warehouse.test_significance import Sweep, pattern

CONFIG: dict[str, Any] = {
    "name": "nightly",
    "models": [{"name": "m", "provider": "local"}],
    "probes": [{"probe": "recall", "lengths": [1000, 2000], "needle_counts": [4]}],
}
TEMPLATE_E1, TEMPLATE_E2 = "a" * 64, "b" * 64


def two_nights(root: Path, gates: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    """Night e1: every needle found; night e2: half of them at 2000. The local model's chat
    template changed between the nights; nothing else did."""
    config_json = parse_config({**CONFIG, "gates": gates}).model_dump_json()
    sweep = Sweep(root)
    for day, epoch in enumerate(("e1", "e2")):
        sweep.run(f"run-{epoch}", epoch, day=day)
        sweep.rows[("runs", "")][-1]["config_json"] = config_json
    for repeat in range(12):
        for length in (1000, 2000):
            sweep.answer("m", "e1", length, pattern(4), repeat=repeat)
            sweep.answer("m", "e2", length, pattern(4 if length == 1000 else 2), repeat=repeat)
    for row in sweep.rows[("answers", "m")]:
        row["chat_template_sha256"] = TEMPLATE_E1 if row["epoch"] == "e1" else TEMPLATE_E2
        row["gguf_sha256"] = "1" * 64
        row["llama_cpp"] = "xllamacpp 0.2.0"
    return sweep.connect()


CHANGE = "chat template hash changed (aaaaaaaaaaaa → bbbbbbbbbbbb)"


def test_a_failed_gate_exits_4_and_names_the_gate(tmp_path: Path) -> None:
    two_nights(tmp_path, [{"probe": "recall", "min_accuracy": 90, "lengths": [2000]}]).close()
    result = CliRunner().invoke(app, ["gates", "--warehouse", str(tmp_path)])
    assert result.exit_code == 4, result.output
    assert "gate recall min_accuracy 90 failed: model m: at 2000 tokens: accuracy 50.0" in (
        result.stdout
    )
    assert f"serving change: m: {CHANGE}" in result.stdout

    # The first night met the same gate: exit 0.
    first = CliRunner().invoke(app, ["gates", "--epoch", "e1", "--warehouse", str(tmp_path)])
    assert first.exit_code == 0, first.output
    assert "gate recall min_accuracy 90 passed: model m: accuracy 100.0 at 2000 tokens" in (
        first.stdout
    )


def test_the_json_carries_one_entry_per_gate_and_model(tmp_path: Path) -> None:
    gates = [{"probe": "recall", "max_drop": 5}, {"max_failed_cells": 0}]
    two_nights(tmp_path, gates).close()
    result = CliRunner().invoke(app, ["gates", "-w", str(tmp_path), "--format", "json"])
    assert result.exit_code == 4, result.output
    out = json.loads(result.stdout)
    assert out["epoch"] == "e2"
    assert [(g["gate"], g["model"], g["status"]) for g in out["gates"]] == [
        ("recall max_drop 5", "m", "failed"),
        ("max_failed_cells 0", "m", "passed"),
    ]
    drop = out["gates"][0]["figures"]
    assert drop["previous_epoch"] == "e1" and drop["pairs"] == 24 and drop["drop"] == 25.0
    assert out["serving_changes"] == {"m": [CHANGE]}


def test_unknown_epoch_is_one_line(tmp_path: Path) -> None:
    two_nights(tmp_path, []).close()
    result = CliRunner().invoke(app, ["gates", "--epoch", "e9", "-w", str(tmp_path)])
    assert result.exit_code == 2
    assert f"the warehouse at {tmp_path} has no epoch 'e9'" in " ".join(result.output.split())


def test_the_drift_table_lists_the_chat_template_change(tmp_path: Path) -> None:
    con = two_nights(tmp_path, [])
    assert serving_changes(con, "e2") == {"m": [CHANGE]}
    html = section(con, ["recall"], threshold=85, spread=30)
    assert "serving changes" in html and CHANGE in html


def test_a_failed_gate_is_flagged_in_the_reports_summary(tmp_path: Path) -> None:
    from needlescope.warehouse.report.sections import summary as summary_section

    gate = {"probe": "recall", "min_accuracy": 90, "lengths": [2000]}
    two_nights(tmp_path, [gate]).close()
    rows, flags = summary_section.collect(tmp_path, threshold=85.0, spread=30.0)
    assert flags[("m", "recall")] == [("gate recall min_accuracy 90 failed", "statistics")]
    html = summary_section.section(rows, flags)
    assert "<a href='#statistics'>gate recall min_accuracy 90 failed</a>" in html


def test_a_met_gate_raises_no_flag(tmp_path: Path) -> None:
    from needlescope.warehouse.report.sections import summary as summary_section

    two_nights(tmp_path, [{"probe": "recall", "min_accuracy": 40}]).close()
    _, flags = summary_section.collect(tmp_path, threshold=85.0, spread=30.0)
    assert ("m", "recall") not in flags
