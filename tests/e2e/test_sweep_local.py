"""The whole pipeline on the real local model under a real Prefect server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from needlescope.config._file import load_config
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.build import rebuild
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_grid
from needlescope.warehouse.store import Warehouse

pytestmark = pytest.mark.e2e

TINY = """
name: tiny
seed: 11
models:
  - name: smol
    provider: local
    concurrency: 1
probes:
  - probe: recall
    lengths: [160, 240]
    length_unit: tokens
    needle_counts: [1, 3]
    fillers: [pattern]
    repeats: 1
"""


def rows(store: Warehouse, query: str) -> list[tuple]:
    con = store.connect()
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def answer_files(store: Warehouse) -> list[Path]:
    return [p for p in (store.parquet / "answers").rglob("*.parquet") if p.name != "_empty.parquet"]


def test_sweep_rerun_then_a_killed_new_epoch_resumes(cli, write_config, tmp_path: Path) -> None:
    config = write_config(TINY)
    wh = tmp_path / "wh"
    first = cli(
        "run",
        str(config),
        "--warehouse",
        str(wh),
        "--epoch",
        "e1",
        "--report-dir",
        str(tmp_path / "rep"),
    )
    assert first.returncode == 0, first.stderr[-3000:]
    store = Warehouse(wh)
    results = rows(
        store,
        "SELECT cell_id, error_kind, parse_ok, prompt_tokens, planned_tokens, length, "
        "length_unit, haystack_length, response FROM results WHERE epoch = 'e1'",
    )
    assert len(results) == 4
    for (
        _,
        error_kind,
        parse_ok,
        prompt_tokens,
        planned,
        length,
        unit,
        haystack,
        response,
    ) in results:
        assert error_kind is None
        assert parse_ok is not None and response is not None
        assert unit == "tokens"
        # The prompt is fitted with the model's own tokenizer, chat template included.
        assert planned == prompt_tokens
        assert length - 3 <= planned <= length
        assert 0 < haystack < planned
    # `needlescope plan` said beforehand what the sweep then recorded (the tokenizer is exact).
    planned = cli("plan", str(config), "--warehouse", str(tmp_path / "none"), "--format", "json")
    assert planned.returncode == 0, planned.stderr
    plan_total = json.loads(planned.stdout)["total"]
    recorded = sum(row[3] for row in results)
    assert plan_total["to_send"] == 4
    assert abs(plan_total["prompt_tokens"] - recorded) <= 3 * 4
    page = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    # The chart is drawn (and saved as PNG) when an answer parsed; else it is one line saying
    # why (issue 20): the 135M model's four answers may all be truncated.
    [(parsed,)] = rows(
        store,
        "SELECT count(*) FROM results WHERE epoch = 'e1' AND parse_ok"
        " AND validity IN ('valid', 'unknown')",
    )
    if parsed:
        assert (tmp_path / "rep" / "accuracy_by_length.png").is_file()
    else:
        assert "<p class='muted chart-empty' id='accuracy_by_length'>" in page
        assert not (tmp_path / "rep" / "accuracy_by_length.png").exists()
    files_after_first = answer_files(store)

    second = cli(
        "run", str(config), "--warehouse", str(wh), "--epoch", "e1", "--no-report", "--json"
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert '"cells_skipped": 4' in second.stdout
    assert '"cells_graded": 0' in second.stdout
    assert answer_files(store) == files_after_first
    assert rows(store, "SELECT count(*) FROM answers")[0][0] == 4

    # The new epoch is sent afresh in the same warehouse, by a sweep killed midway and resumed:
    # one sweep on the model serves both (the e2e tier is the slowest part of `make test`).
    crashed = kill_then_resume(cli, write_config, tmp_path, wh, set(files_after_first))
    assert rows(store, "SELECT epoch, count(*) FROM results GROUP BY epoch ORDER BY epoch") == [
        ("crash", 6),
        ("e1", 4),
    ]
    assert crashed == 6

    by_length = cli(
        "sql",
        "SELECT length, needle_count, answers, parse_failures FROM accuracy_by_length "
        "ORDER BY length, needle_count",
        "--warehouse",
        str(wh),
        "--format",
        "json",
    )
    assert by_length.returncode == 0, by_length.stderr
    table = json.loads(by_length.stdout)
    # Both epochs' answers: one per cell and epoch (needle count 2 only in the second).
    assert [(r["length"], r["needle_count"], r["answers"]) for r in table] == [
        (160, 1, 2),
        (160, 2, 1),
        (160, 3, 2),
        (240, 1, 2),
        (240, 2, 1),
        (240, 3, 2),
    ]


def test_prompts_rebuild_exactly_from_their_cells(cli, write_config, tmp_path: Path) -> None:
    config_path = write_config(TINY)
    wh = tmp_path / "wh"
    done = cli("run", str(config_path), "--warehouse", str(wh), "--only-context")
    assert done.returncode == 0, done.stderr[-3000:]
    store = Warehouse(wh)
    stored = {
        r[0]: r[1:]
        for r in rows(
            store,
            "SELECT cell_id, filler_chars, prompt_length, prompt_sha256, prompt_text FROM cells",
        )
    }
    assert rows(store, "SELECT count(*) FROM answers")[0][0] == 0
    config = load_config(config_path)
    cells = expand_grid(config)
    assert set(stored) == {c.cell_id for c in cells}
    for cell in cells:
        filler_chars, prompt_length, sha, text = stored[cell.cell_id]
        spec = config.filler_spec(cell.filler)
        context = rebuild(
            recall, cell, filler_from_spec(spec), spec.kind, filler_chars, prompt_length
        )
        assert context.prompt_sha256 == sha
        assert context.prompt_text == text


def kill_then_resume(cli, write_config, tmp_path: Path, wh: Path, before: set[Path]) -> int:
    """Epoch `crash` of TINY plus needle count 2, one cell a batch: killed (SIGKILL, its whole
    process group) once two of its answers are written, then run again. Every one of its cells
    ends graded exactly once; returns how many."""
    config = write_config(
        TINY.replace("needle_counts: [1, 3]", "needle_counts: [1, 2, 3]") + "batch_size: 1\n",
        "crash.yaml",
    )
    store = Warehouse(wh)
    from tests.support.prefect_server import BIN

    def new_files() -> int:
        return len(set(answer_files(store)) - before)

    process = subprocess.Popen(
        [
            str(BIN / "needlescope"),
            "run",
            str(config),
            "--warehouse",
            str(wh),
            "--epoch",
            "crash",
            "--no-report",
        ],
        env=cli.env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while new_files() < 2:
        assert process.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    partial_before = new_files()
    assert 2 <= partial_before < 6

    resumed = cli("run", str(config), "--warehouse", str(wh), "--epoch", "crash", "--no-report")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    per_cell = rows(
        store,
        "SELECT cell_id, count(*) FROM answers "
        "WHERE epoch = 'crash' AND error_kind IS NULL GROUP BY cell_id",
    )
    assert len(per_cell) == 6
    assert all(count == 1 for _, count in per_cell)
    assert not list(wh.rglob("*.partial"))
    return len(per_cell)
