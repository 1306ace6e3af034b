"""What `needlescope run` and `rerun` print: a table on stdout (one row per model × probe), the
failed cells with the command that reruns them, the report's path; with --json exactly one JSON
object. Progress and logs stay on stderr, and the final state's log line is one short line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse
from tests.support.openai_server import FakeOpenAIServer

KEY = "sk-summary-5a0e"
ENV = {"NS_FAKE_KEY": KEY}


def perfect_answer(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def config_text(base_url: str) -> str:
    return f"""
name: summary
seed: 5
retry: {{retries: 0, backoff_s: [0]}}
models:
  - name: fake
    provider: openai
    base_url: {base_url}
    model: fake-model
    api_key_env: NS_FAKE_KEY
    concurrency: 4
probes:
  - probe: recall
    lengths: [500, 900]
    length_unit: chars
    needle_counts: [1, 3]
    fillers: [pattern]
    repeats: 2
"""


def test_run_prints_a_table_and_json_prints_one_object(cli, write_config, tmp_path: Path) -> None:
    wh, reports = tmp_path / "wh", tmp_path / "reports"
    # Every 4th request fails (a 500): some cells fail, the run exits 1 with the rerun hint.
    # The 4th and 8th requests fail (a 500): two cells fail, the run exits 1 with the hint.
    with FakeOpenAIServer(perfect_answer, script=[None, None, None, "server_error"] * 2) as server:
        config = write_config(config_text(server.base_url))
        first = cli("run", str(config), "-w", str(wh), "--report-dir", str(reports), extra_env=ENV)
        assert first.returncode == 1, first.stderr[-2000:]
        assert server.requests == 8
        out = first.stdout
        lines = out.splitlines()
        assert lines[0].startswith("epoch summary-") and "6 cells graded" in lines[0]
        assert "2 failed" in lines[0]
        header = next(line for line in lines if line.lstrip().startswith("model"))
        for column in ("probe", "cells", "valid", "parse fail", "accuracy % (95% interval)"):
            assert column in header
        row = next(line for line in lines if line.startswith("fake "))
        # 8 cells, 6 valid answers, no parse failure, all right: 100.0 (100.0–100.0), 2 failed
        assert re.search(
            r"fake\s+recall\s+8\s+6\s+0\s+0\s+100\.0 \(100\.0–100\.0\)\s+900 chars\s+2$", row
        ), row
        con = Warehouse(wh).connect()
        run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
        con.close()
        hint = f"fake · recall: 2 failed cells; rerun them with `needlescope rerun {run_id}"
        assert hint in out
        assert lines[-1] == f"report: {reports / 'report.html'}"
        assert (reports / "report.html").is_file()
        assert "{" not in out  # no JSON on stdout without --json
        # stderr: the error line; Prefect's final state is one short line, not the summary
        assert "error: 2 cells failed" in first.stderr
        assert '"cells_total"' not in first.stderr

        server.reset_counts()
        again = cli("rerun", run_id, "-w", str(wh), "--no-report", "--json", extra_env=ENV)
        assert again.returncode == 0, again.stderr[-2000:]
        assert server.requests == 2
    result = json.loads(again.stdout)  # exactly one object: json.loads refuses anything after it
    assert isinstance(result, dict)
    assert result["rerun_of"] == run_id and result["cells_graded"] == 2
    assert result["report"] is None
    [row_json] = result["results"]
    assert (row_json["model"], row_json["probe"], row_json["cells"]) == ("fake", "recall", 8)
    assert (row_json["answers"], row_json["failed"], row_json["mean_accuracy"]) == (8, 0, 100.0)
