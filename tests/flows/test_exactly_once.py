"""Exactly once under hostile conditions (issue 16): concurrent sweeps of one epoch, replies no
store can hold as they are, flaky token counting, credentials in a URL, a grid all dropped.

Real Prefect (the session's server), fake model APIs in threads, `needlescope` as a user runs it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from needlescope.warehouse.store import Warehouse
from tests.support.anthropic_server import FakeAnthropicServer
from tests.support.openai_server import FakeOpenAIServer
from tests.support.prefect_server import BIN

KEY = "sk-exactly-once-4b1d"


def perfect_answer(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def recall_config(base_url: str, *, name: str, extra: str = "", model: str = "") -> str:
    return f"""
name: {name}
seed: 21
batch_size: 4
retry: {{retries: 0, backoff_s: [0]}}
{extra}
models:
  - name: fake
    provider: openai
    base_url: {base_url}
    model: fake-model
    concurrency: 2
{model}
probes:
  - probe: recall
    lengths: [400, 600, 800]
    length_unit: chars
    needle_counts: [1, 2]
    fillers: [pattern, noise]
    repeats: 2
"""


CELLS = 24  # 3 lengths × 2 needle counts × 2 fillers × 2 repeats


def query(store: Warehouse, sql: str) -> list[tuple]:
    con = store.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def sweep_process(cli, config: Path, wh: Path, epoch: str, log: Path) -> subprocess.Popen:
    """`needlescope run` in the background: its summary to ``log``.json, the rest to ``log``."""
    with log.open("wb") as err, log.with_suffix(".json").open("wb") as out:
        return subprocess.Popen(
            [
                str(BIN / "needlescope"),
                "run",
                str(config),
                "-w",
                str(wh),
                "--epoch",
                epoch,
                "--no-report",
                "--json",
            ],
            env=cli.env,
            cwd=config.parent,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )


# -- 1. two or three sweeps of one epoch at once ------------------------------------------------

TRIALS = [
    # seed, sweeps, server_error rate, reply delay (s), claim timeout (s)
    (1, 2, 0.0, 0.2, 120),
    (2, 3, 0.15, 0.1, 120),
    # Every request outlasts the claim timeout: only renewal keeps a cell with its sweep.
    (3, 2, 0.0, 2.5, 1.5),
]


@pytest.mark.parametrize(("seed", "sweeps", "fault_rate", "delay_s", "claim_s"), TRIALS)
def test_concurrent_sweeps_of_one_epoch_grade_every_cell_once(
    cli,
    write_config,
    tmp_path: Path,
    seed: int,
    sweeps: int,
    fault_rate: float,
    delay_s: float,
    claim_s: float,
) -> None:
    wh, epoch = tmp_path / "wh", f"concurrent-{seed}"
    started = threading.Event()  # replies wait until every sweep is running: they overlap

    async def answer(body: dict[str, Any]) -> str:
        while not started.is_set():
            await asyncio.sleep(0.05)
        return perfect_answer(body)

    rates = {"server_error": fault_rate} if fault_rate else None
    with FakeOpenAIServer(answer, rates=rates, seed=seed, delay_s=delay_s) as server:
        config = write_config(
            recall_config(server.base_url, name="concurrent", extra=f"claim_timeout_s: {claim_s}")
        )
        logs = [tmp_path / f"sweep{i}.log" for i in range(sweeps)]
        rng, processes = random.Random(seed), []
        for log in logs:
            processes.append(sweep_process(cli, config, wh, epoch, log))
            time.sleep(rng.uniform(0, 0.5))
        deadline = time.monotonic() + 120
        while len(run_rows(wh)) < sweeps:  # every sweep has stored its start
            assert time.monotonic() < deadline, [log.read_text()[-2000:] for log in logs]
            time.sleep(0.1)
        started.set()
        codes = [p.wait(timeout=300) for p in processes]
        requests, faults = server.requests, sum(server.fault_counts.values())
    outputs = [log.read_text(errors="replace") for log in logs]
    assert all(code in (0, 1) for code in codes), outputs
    for code, out in zip(codes, outputs, strict=True):  # Prefect logs a failed request's trace
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert errors == ([] if code == 0 else [errors[-1]]) and "cells failed" in "".join(
            errors or ["cells failed"]
        ), out[-3000:]
    store = Warehouse(wh)
    # One graded answer per cell, and no cell asked twice unless a request failed.
    per_cell = query(
        store,
        "SELECT cell_id, count(*) FROM answers WHERE error_kind IS NULL GROUP BY cell_id",
    )
    assert {n for _, n in per_cell} <= {1}, per_cell
    assert requests <= CELLS + faults, (requests, faults)
    if not fault_rate:
        assert len(per_cell) == CELLS and requests == CELLS
        assert codes == [0] * sweeps
    # Each run is credited with the cells it graded itself, and the credits add up.
    credits = dict(query(store, "SELECT run_id, cells_graded FROM runs"))
    graded_by = dict(
        query(
            store,
            "SELECT run_id, count(*) FILTER (WHERE error_kind IS NULL) FROM answers GROUP BY ALL",
        )
    )
    assert {r: credits[r] for r in graded_by} == graded_by
    assert sum(credits.values()) == len(per_cell)
    summaries = [json.loads(log.with_suffix(".json").read_text()) for log in logs]
    for summary in summaries:
        parts = ("graded", "failed", "skipped", "dropped", "unsent")
        assert sum(summary[f"cells_{p}"] for p in parts) == summary["cells_total"] == CELLS
    print(
        "concurrent sweeps:",
        json.dumps(
            {
                "seed": seed,
                "sweeps": sweeps,
                "exit_codes": codes,
                "requests": requests,
                "failed_requests": faults,
                "graded": len(per_cell),
                "graded_by_run": sorted(graded_by.values()),
                "graded_elsewhere": [s["cells_graded_elsewhere"] for s in summaries],
            }
        ),
    )


def run_rows(wh: Path) -> list[Path]:
    folder = wh / "parquet" / "runs"
    return (
        [p for p in folder.rglob("*.parquet") if p.name != "_empty.parquet"]
        if folder.is_dir()
        else []
    )


# -- 2. replies no store can hold as they are --------------------------------------------------

# The server JSON-encodes each reply (ASCII only), so a lone surrogate travels as "\ud800".
HOSTILE_REPLIES = [
    ("\ud800", True),  # a lone high surrogate
    ('{"1": 1234} \udfff', True),  # a lone low surrogate after an answer
    ("\ude00\ud83d", True),  # a surrogate pair in the wrong order
    ('{"1": "\\ud800"}', True),  # a JSON escape inside the answer: read as a lone surrogate
    ('{"1": 1234}\x00\x00', False),  # NUL characters
    ("\uffff\ufffe\U0010ffff", False),  # noncharacters
    ('\ufeff\u202e{"1": 1234}', False),  # a byte order mark and a right-to-left override
    ('{"1": ' + "9" * 5000 + "}", False),  # a number Python will not convert
    ("[" * 50_000 + "]" * 50_000, False),  # JSON nested past any recursion limit
    ("x" * 1_000_000, False),  # a megabyte of text
    ('{"1": NaN, "2": Infinity}', False),
    ('<script>alert(1)</script>{"1": 1234}', False),
]


def test_any_reply_is_stored_and_what_utf8_cannot_hold_is_flagged(
    cli, write_config, tmp_path: Path
) -> None:
    wh, replies = tmp_path / "wh", list(HOSTILE_REPLIES)
    lock = threading.Lock()

    def hostile(body: dict[str, Any]) -> str:
        with lock:
            return replies.pop()[0]

    with FakeOpenAIServer(hostile) as server:
        config = write_config(
            recall_config(server.base_url, name="hostile").replace("repeats: 2", "repeats: 1")
        )  # 12 cells, one reply each
        done = cli(
            "run", str(config), "-w", str(wh), "--epoch", "h", "--report-dir", str(tmp_path / "rep")
        )
        assert server.requests == len(HOSTILE_REPLIES)
        again = cli("run", str(config), "-w", str(wh), "--epoch", "h", "--no-report", "--json")
        assert server.requests == len(HOSTILE_REPLIES)  # the epoch is complete: nothing sent
    assert again.returncode == 0 and json.loads(again.stdout)["cells_skipped"] == 12
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert (tmp_path / "rep" / "report.html").is_file()
    store = Warehouse(wh)
    rows = query(store, "SELECT response, response_repaired FROM results WHERE error_kind IS NULL")
    assert len(rows) == len(HOSTILE_REPLIES)
    assert sum(flag for _, flag in rows) == sum(flag for _, flag in HOSTILE_REPLIES)
    for response, flag in rows:
        assert ("\ufffd" in response) == flag or response.startswith('{"1": "')
    shown = cli("sql", "SELECT response FROM results", "-w", str(wh), "--format", "json")
    assert shown.returncode == 0, shown.stderr[-2000:]


# -- 3. a token counter that fails one call in five --------------------------------------------


class FlakyCounter(FakeAnthropicServer):
    """count_tokens answers 500 for about one call in five; messages always answer."""

    def _pick(self, raw: bytes) -> Any:
        fault = super()._pick(raw)
        return None if b'"max_tokens"' in raw else fault


def counted_config(base_url: str, retries: int) -> str:
    return f"""
name: counted
retry: {{retries: {retries}, backoff_s: [0]}}
models:
  - {{name: claude, provider: anthropic, base_url: "{base_url}", model: claude-fake-1,
      api_key_env: NS_FAKE_KEY}}
probes:
  - {{probe: recall, lengths: [120, 160, 200], length_unit: tokens, needle_counts: [1, 2],
      fillers: [prose-en], repeats: 2}}
"""


# Seeds where, before issue 16, a failed count crashed the sweep (retries 0) and where the
# retries have failures to recover from (retries 3).
@pytest.mark.parametrize(("retries", "seed"), [(0, 2), (3, 5)])
def test_a_failed_token_count_fails_its_cell_and_the_sweep_goes_on(
    cli, write_config, tmp_path: Path, retries: int, seed: int
) -> None:
    wh, env = tmp_path / "wh", {"NS_FAKE_KEY": KEY}
    with FlakyCounter(perfect_answer, rates={"server_error": 0.2}, seed=seed) as server:
        config = write_config(counted_config(server.url, retries))
        first = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "t",
            "--no-report",
            "--json",
            extra_env=env,
        )
        counts, faults = server.count_requests, sum(server.fault_counts.values())
        assert faults > 0 and "Traceback" not in first.stderr
        store = Warehouse(wh)
        rows = query(store, "SELECT error_kind, count(*) FROM results GROUP BY ALL")
        by_kind = dict(rows)
        assert sum(by_kind.values()) == 12  # every cell graded or failed, none lost
        assert set(by_kind) <= {None, "server_error"}
        failed = by_kind.get("server_error", 0)
        assert first.returncode == (1 if failed else 0), first.stderr[-3000:]
        summary = json.loads(first.stdout)
        assert (summary["cells_failed"], summary["cells_graded"]) == (failed, 12 - failed)
        if retries == 0:
            assert failed >= 4  # one failed count fails a cell: many here
        else:
            assert failed <= 2  # each count retried: almost every cell is built
        server.rates = {}
        second = cli(
            "run", str(config), "-w", str(wh), "--epoch", "t", "--no-report", extra_env=env
        )
        assert second.returncode == 0, second.stderr[-3000:]
    assert query(store, "SELECT count(*) FROM results WHERE error_kind IS NULL") == [(12,)]
    print(
        "flaky counting:",
        json.dumps(
            {
                "retries": retries,
                "count_requests": counts,
                "count_faults": faults,
                "failed_cells": failed,
            }
        ),
    )


# -- 4. credentials in a base_url ---------------------------------------------------------------

SECRET = "pa55-word-in-the-url"


def test_url_credentials_go_as_basic_auth_and_are_never_stored(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(perfect_answer) as server:
        url = server.base_url.replace("http://", f"http://evaluator:{SECRET}@")
        config = write_config(recall_config(url, name="creds").replace("repeats: 2", "repeats: 1"))
        done = cli("run", str(config), "-w", str(wh), "--report-dir", str(tmp_path / "rep"))
        sent = (server.last_headers or {}).get("Authorization")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sent == "Basic " + base64.b64encode(f"evaluator:{SECRET}".encode()).decode()
    assert SECRET not in done.stdout + done.stderr
    home = Path(cli.env["PREFECT_HOME"])
    for root in (wh, tmp_path / "rep", home):
        for path in root.rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
    stored = query(Warehouse(wh), "SELECT config_json FROM runs")[0][0]
    assert server.base_url in stored  # the URL is kept, without its user info


# -- 5. a grid whose every cell is dropped -------------------------------------------------------


def test_a_sweep_whose_every_cell_is_dropped_exits_2_with_the_reason(
    cli, write_config, tmp_path: Path
) -> None:
    with FakeOpenAIServer(perfect_answer) as server:
        config = write_config(
            recall_config(server.base_url, name="dropped", model="    context_window: 100").replace(
                "length_unit: chars", "length_unit: tokens"
            )
        )
        done = cli("run", str(config), "-w", str(tmp_path / "wh"), "--no-report")
        assert server.requests == 0
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: nothing measured: all 24 cells were dropped (24 longer than their model's"
        " context window)"
    ], done.stderr[-2000:]
