"""A sweep merges the warehouse's small files as its last requests finish and when it ends;
nothing is counted twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.compaction import snapshot
from tests.flows.test_drift import ENV, perfect
from tests.support.openai_server import FakeOpenAIServer

CONFIG = """
name: compacting
seed: 5
batch_size: 2
compact: {compact}
models:
  - {{name: fake, provider: openai, base_url: "{url}", model: m, api_key_env: NS_FAKE_KEY,
      concurrency: 4}}
probes:
  - probe: recall
    lengths: [500, 900]
    length_unit: chars
    needle_counts: [2, 3]
    fillers: [pattern, noise]
    repeats: 3
"""


def counts(wh: Path) -> tuple[int, int, int]:
    con = Warehouse(wh).connect()
    try:
        (row,) = con.execute(
            "SELECT (SELECT count(*) FROM results WHERE accuracy = 100), "
            "(SELECT count(*) FROM answers), (SELECT count(*) FROM raw_needle_outcomes)"
        ).fetchall()
        return row
    finally:
        con.close()


def files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.parquet") if p.name != "_empty.parquet"]


def unmerged(wh: Path, table: str) -> list[Path]:
    """The table's append files no compacted file holds: what the next compaction merges."""
    appended = wh.resolve() / "parquet"
    return [
        p
        for p in snapshot(wh, (table,)).files[table]
        if p.is_relative_to(appended) and p.name != "_empty.parquet"
    ]


def run(cli: Any, config: Path, wh: Path, epoch: str) -> None:
    done = cli(
        "run", str(config), "-w", str(wh), "--epoch", epoch, "--no-report", "--json", extra_env=ENV
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["cells_graded"] == 24


def test_sweeps_compact_when_they_end(cli, write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect) as server:
        config = write_config(CONFIG.format(url=server.base_url, compact="true"))
        run(cli, config, wh, "c-1")
        # 12 batches of 2 cells: 12 answer files, merged as the last requests finished and
        # when the run ended; a folder keeps fewer than 8 (too few to merge) for the next run.
        assert len(files(wh / "compacted" / "answers" / "recall" / "fake")) >= 1
        assert len(unmerged(wh, "answers")) < 8
        assert len(files(wh / "parquet" / "answers")) == 12  # kept for earlier readers
        assert counts(wh) == (24, 24, 24 * 5 // 2)
        run(cli, config, wh, "c-2")
        assert counts(wh) == (48, 48, 48 * 5 // 2)
        assert len(unmerged(wh, "answers")) < 8
        # The duckdb CLI's views file was refreshed after the run's merges: the merged-away
        # files can go.
        before = files(wh / "parquet")
        left = {t: unmerged(wh, t) for t in ("answers", "cells", "needle_outcomes", "runs")}
        done = cli("compact", "-w", str(wh), "--grace", "0")
        assert done.returncode == 0, done.stderr
        after = files(wh / "parquet")
        assert f"deleted {len(before) - len(after)} merged earlier" in done.stderr
        # What is left: the files no compaction merged (the runs table's 4 start and end
        # rows among them), every one of them still read.
        assert {p.resolve() for p in after} == {p for paths in left.values() for p in paths}
        assert len(left["runs"]) == 4
        assert counts(wh) == (48, 48, 48 * 5 // 2)


def test_a_sweep_can_leave_the_files_as_written(cli, write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect) as server:
        config = write_config(CONFIG.format(url=server.base_url, compact="false"))
        run(cli, config, wh, "c-1")
    assert not (wh / "compacted").exists() or files(wh / "compacted") == []
    assert len(files(wh / "parquet" / "answers")) == 12
    assert counts(wh) == (24, 24, 24 * 5 // 2)
