"""Sweeps against a local OpenAI-compatible server: failures are rows, reruns ask only for them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse
from tests.support.openai_server import FakeOpenAIServer

KEY = "sk-live-DO-NOT-LEAK-7f3a9c"


def perfect_answer(body: dict[str, Any]) -> str:
    """Answers with every needle of the prompt, in order: a model that never misses."""
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def config_text(base_url: str, *, retries: int = 0, extra_model: str = "") -> str:
    return f"""
name: faults
seed: 5
retry: {{retries: {retries}, backoff_s: [0]}}
models:
  - name: fake
    provider: openai
    base_url: {base_url}
    model: fake-model
    api_key_env: NS_FAKE_KEY
    concurrency: 8
{extra_model}
probes:
  - probe: recall
    lengths: [400, 800, 1600]
    length_unit: chars
    needle_counts: [2, 4]
    fillers: [pattern, noise]
    repeats: 3
"""


def query(store: Warehouse, sql: str) -> list[tuple]:
    con = store.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_failed_cells_are_kept_and_a_rerun_asks_only_for_them(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    env = {"NS_FAKE_KEY": KEY}
    with FakeOpenAIServer(
        perfect_answer, rates={"server_error": 0.3, "garbage": 0.1}, seed=3
    ) as server:
        config = write_config(config_text(server.base_url))
        first = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report", extra_env=env)
        assert first.returncode == 1, first.stderr[-2000:]
        assert "cells failed" in first.stderr
        store = Warehouse(wh)
        failed = dict(query(store, "SELECT cell_id, error_kind FROM failed_cells"))
        assert failed, "the fault rates should have failed some cells"
        assert set(failed.values()) <= {"server_error", "bad_response"}
        assert len(query(store, "SELECT * FROM results")) == 36
        assert server.requests == 36  # retries: 0 — one request per cell

        server.rates = {}
        server.reset_counts()
        second = cli(
            "run", str(config), "-w", str(wh), "--epoch", "e", "--no-report", extra_env=env
        )
        assert second.returncode == 0, second.stderr[-2000:]
        assert server.requests == len(failed)
    graded = query(
        store,
        "SELECT count(*), min(accuracy), count(DISTINCT cell_id) FROM results "
        "WHERE error_kind IS NULL",
    )
    assert graded == [(36, 100.0, 36)]
    per_cell = query(
        store,
        "SELECT max(n) FROM (SELECT count(*) n FROM answers "
        "WHERE error_kind IS NULL GROUP BY cell_id)",
    )
    assert per_cell == [(1,)]
    assert query(store, "SELECT count(*) FROM failed_cells") == [(0,)]
    # A perfect answer matches every needle: 18 cells of 2 needles and 18 of 4.
    assert query(store, "SELECT outcome, count(*) FROM needle_outcomes GROUP BY ALL") == [
        ("correct", 18 * 2 + 18 * 4)
    ]
    # Per model × length × needle count × filler: the 3 repeats.
    assert query(store, "SELECT min(probability), max(total_records) FROM position_accuracy") == [
        (100.0, 3)
    ]
    assert query(store, "SELECT count(*) FROM hallucinations") == [(0,)]


def test_retries_recover_transient_faults(cli, write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(
        perfect_answer, rates={"unavailable": 0.3, "reset": 0.1}, seed=9
    ) as server:
        config = write_config(config_text(server.base_url, retries=6))
        done = cli("run", str(config), "-w", str(wh), "--no-report", extra_env={"NS_FAKE_KEY": KEY})
        assert done.returncode == 0, done.stderr[-2000:]
        assert server.requests > 36
    store = Warehouse(wh)
    assert query(
        store, "SELECT count(*), sum(attempts) > 36 FROM results WHERE error_kind IS NULL"
    ) == [(36, True)]


class OrderedServer(FakeOpenAIServer):
    """Keeps every request's prompt in the order they came, the failed ones too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prompts: list[str] = []

    def _keep(self, request: Any, body: dict[str, Any]) -> None:
        super()._keep(request, body)
        self.prompts.append(body["messages"][-1]["content"])


def test_a_retry_waits_out_its_back_off_without_the_models_slot(
    cli, write_config, tmp_path: Path
) -> None:
    """One slot, two cells: the first request fails (500) and waits 2 s to retry; the other
    cell is asked meanwhile, and the model never has two requests at once."""
    one_slot = config_text("{url}", retries=1).replace("concurrency: 8", "concurrency: 1")
    one_slot = one_slot.replace("backoff_s: [0]", "backoff_s: [2]")
    one_slot = one_slot.replace("lengths: [400, 800, 1600]", "lengths: [400]")
    one_slot = one_slot.replace("needle_counts: [2, 4]", "needle_counts: [2]")
    one_slot = one_slot.replace("repeats: 3", "repeats: 1")
    wh = tmp_path / "wh"
    with OrderedServer(perfect_answer, script=["server_error"]) as server:
        config = write_config(one_slot.replace("{url}", server.base_url))
        done = cli("run", str(config), "-w", str(wh), "--no-report", extra_env={"NS_FAKE_KEY": KEY})
        assert done.returncode == 0, done.stderr[-2000:]
        first, other, retried = server.prompts
        assert server.max_in_flight == 1
    assert first == retried != other
    attempts = query(Warehouse(wh), "SELECT attempts FROM results ORDER BY attempts")
    assert attempts == [(1,), (2,)]


def test_reply_without_json_is_a_parse_failure_not_an_error(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(lambda body: "I could not find any numbers, sorry.") as server:
        config = write_config(config_text(server.base_url))
        done = cli("run", str(config), "-w", str(wh), "--no-report", extra_env={"NS_FAKE_KEY": KEY})
    assert done.returncode == 0, done.stderr[-2000:]
    store = Warehouse(wh)
    assert query(
        store,
        "SELECT sum(answers), sum(parse_failures), max(mean_accuracy) FROM accuracy_by_length",
    ) == [(36, 36, None)]
    assert query(store, "SELECT DISTINCT parse_error FROM results") == [
        ("no JSON object with a digit key",)
    ]


def test_unreachable_endpoint_is_one_clear_line(cli, write_config, tmp_path: Path) -> None:
    config = write_config(config_text("http://127.0.0.1:9/v1"))
    done = cli(
        "run",
        str(config),
        "-w",
        str(tmp_path / "wh"),
        "--no-report",
        extra_env={"NS_FAKE_KEY": KEY},
    )
    assert done.returncode == 2
    # Prefect may log a shutdown warning after it; the error itself is one line of its own.
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith("error: model fake: cannot reach http://127.0.0.1:9/v1")
    assert "Traceback" not in done.stderr


def test_missing_key_fails_before_anything_runs(cli, write_config, tmp_path: Path) -> None:
    config = write_config(config_text("http://127.0.0.1:9/v1"))
    done = cli("run", str(config), "-w", str(tmp_path / "wh"), extra_env={"NS_FAKE_KEY": ""})
    assert done.returncode == 2
    assert done.stderr.strip() == "error: models.fake: environment variable NS_FAKE_KEY is not set"
    assert not (tmp_path / "wh").exists() or not list((tmp_path / "wh").rglob("*.parquet"))


def test_the_key_never_reaches_warehouse_logs_or_report(cli, write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect_answer, script=["unauthorized"], api_key=KEY) as server:
        config = write_config(config_text(server.base_url, retries=2))
        done = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--report-dir",
            str(tmp_path / "rep"),
            extra_env={"NS_FAKE_KEY": KEY},
        )
        assert server.fault_counts["unauthorized"] == 1
    assert done.returncode == 1  # the 401 is not retried: that cell fails, the rest are graded
    assert KEY not in done.stdout + done.stderr
    home = Path(cli.env["PREFECT_HOME"])
    for root in (wh, tmp_path / "rep", home):
        for path in root.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path


def test_a_spent_budget_stops_cleanly_and_a_later_run_finishes(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    priced = config_text("{url}").replace(
        "    concurrency: 8\n",
        "    concurrency: 1\n    price: {input_per_mtok: 1000, output_per_mtok: 1000}\n",
    )
    with FakeOpenAIServer(perfect_answer) as server:
        config = write_config(
            priced.replace("{url}", server.base_url) + "batch_size: 4\nbudget: {usd: 0.5}\n"
        )
        first = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "b",
            "--no-report",
            "--json",
            extra_env={"NS_FAKE_KEY": KEY},
        )
        assert first.returncode == 3, first.stderr[-2000:]
        assert "budget spent" in first.stderr
        sent_first = server.requests
        summary = json.loads(first.stdout)
        assert 0 < sent_first < 36
        assert summary["cells_unsent"] == 36 - sent_first
        assert summary["spent_usd"] >= 0.5
        store = Warehouse(wh)
        assert query(store, "SELECT count(*) FROM results") == [(sent_first,)]
        assert query(store, "SELECT min(cost_usd) > 0 FROM results") == [(True,)]

        roomy = config.read_text().replace("budget: {usd: 0.5}", "budget: {usd: 1000}")
        config.write_text(roomy)
        second = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "b",
            "--no-report",
            extra_env={"NS_FAKE_KEY": KEY},
        )
        assert second.returncode == 0, second.stderr[-2000:]
        assert server.requests == 36  # every cell asked exactly once across both runs
    assert query(store, "SELECT count(*) FROM results WHERE error_kind IS NULL") == [(36,)]


def test_token_lengths_without_a_tokenizer_are_estimated_and_say_so(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect_answer) as server:
        config = write_config(
            config_text(server.base_url).replace("length_unit: chars", "length_unit: tokens")
        )
        done = cli("run", str(config), "-w", str(wh), "--no-report", extra_env={"NS_FAKE_KEY": KEY})
        assert done.returncode == 0, done.stderr[-2000:]
    store = Warehouse(wh)
    rows = query(
        store,
        "SELECT DISTINCT c.length_basis FROM cells c",
    )
    assert rows == [("estimated: 4 characters a token (no tokenizer)",)]
    # Estimated at 4 characters a token, the prompt of a 400-token cell is about 1,600 chars.
    lengths = query(
        store, "SELECT length, min(prompt_length), max(prompt_length) FROM cells GROUP BY length"
    )
    for length, low, high in lengths:
        assert length - 3 <= low <= high <= length
    assert query(store, "SELECT count(*) FROM results WHERE error_kind IS NULL") == [(36,)]


def test_a_failed_token_count_is_a_failed_cell_retried_next_run(
    cli, write_config, tmp_path: Path
) -> None:
    from tests.support.anthropic_server import FakeAnthropicServer

    wh = tmp_path / "wh"
    # Three failures: the run's build check meets two (each cell's first count) and leaves
    # both cells to the build, whose first count meets the third.
    with FakeAnthropicServer(perfect_answer, script=["server_error"] * 3) as server:
        config = write_config(
            f"""
name: counted
retry: {{retries: 0}}   # the count's failure is not retried in this run: the next run's
models:
  - {{name: claude, provider: anthropic, base_url: "{server.url}", model: claude-fake-1,
      api_key_env: NS_FAKE_KEY}}
probes:
  - {{probe: recall, lengths: [120, 160], length_unit: tokens, needle_counts: [2],
      fillers: [prose-en]}}
"""
        )
        first = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "t",
            "--no-report",
            extra_env={"NS_FAKE_KEY": KEY},
        )
        assert first.returncode == 1, first.stderr[-2000:]
        store = Warehouse(wh)
        assert query(store, "SELECT error_kind FROM failed_cells") == [("server_error",)]
        second = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "t",
            "--no-report",
            extra_env={"NS_FAKE_KEY": KEY},
        )
        assert second.returncode == 0, second.stderr[-2000:]
    assert query(store, "SELECT count(*), min(accuracy) FROM results WHERE error_kind IS NULL") == [
        (2, 100.0)
    ]
    assert query(store, "SELECT count(*) FROM cells WHERE prompt_sha256 IS NOT NULL") == [(2,)]
