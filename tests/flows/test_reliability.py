"""Reliability under a real Prefect server and a fake OpenAI endpoint.

Killed sweeps resume without asking twice, faults end as explicit rows, readers never see a
half-written warehouse.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from needlescope.tasks.query import live_task_runs
from needlescope.warehouse.store import Warehouse
from tests.support.openai_server import FakeOpenAIServer
from tests.support.prefect_server import BIN

KEY = "sk-reliability-0b9d2e"
ENV = {"NS_FAKE_KEY": KEY}
KNOWN_ERROR_KINDS = {
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "bad_response",
    "empty_response",
}


def perfect_answer(body: dict[str, Any]) -> str:
    """Answers with every needle of the prompt, in order: a model that never misses."""
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def config_text(
    base_url: str,
    *,
    name: str,
    lengths: list[int],
    needle_counts: list[int],
    repeats: int,
    retries: int = 0,
    concurrency: int = 4,
    batch_size: int = 32,
    model_extra: str = "",
) -> str:
    return f"""
name: {name}
seed: 13
batch_size: {batch_size}
retry: {{retries: {retries}, backoff_s: [0]}}
models:
  - name: fake
    provider: openai
    base_url: {base_url}
    model: fake-model
    api_key_env: NS_FAKE_KEY
    concurrency: {concurrency}
{model_extra}
probes:
  - probe: recall
    lengths: {lengths}
    length_unit: chars
    needle_counts: {needle_counts}
    fillers: [pattern, noise]
    repeats: {repeats}
"""


def query(store: Warehouse, sql: str) -> list[tuple]:
    con = store.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def data_files(store: Warehouse, table: str) -> list[Path]:
    """The table's Parquet files, without its empty schema file."""
    folder = store.parquet / table
    if not folder.exists():
        return []
    return [p for p in folder.rglob("*.parquet") if p.name != "_empty.parquet"]


def answer_files(store: Warehouse) -> list[Path]:
    return data_files(store, "answers")


def start_sweep(cli, config: Path, wh: Path, epoch: str, log: Path) -> subprocess.Popen:
    """`needlescope run` in a session of its own, so the whole group can be killed."""
    handle = log.open("ab")
    try:
        return subprocess.Popen(
            [
                str(BIN / "needlescope"),
                "run",
                str(config),
                "--warehouse",
                str(wh),
                "--epoch",
                epoch,
                "--no-report",
            ],
            env={**cli.env, **ENV},
            cwd=config.parent,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        handle.close()


def kill_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


# -- 1. kill -9, five times --------------------------------------------------------------------

CRASH_CELLS = 60  # 3 lengths × 2 needle counts × 2 fillers × 5 repeats
CRASH_CONCURRENCY = 4
KILLS = 5


def test_five_kills_then_every_cell_is_graded_exactly_once(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    store = Warehouse(wh)
    log = tmp_path / "sweeps.log"
    rng = random.Random(20261122)
    kill_points: list[dict[str, Any]] = []
    began = time.monotonic()
    # Slow enough replies that five kills (batches overlap) still leave cells to do.
    with FakeOpenAIServer(perfect_answer, delay_s=0.3) as server:
        config = write_config(
            config_text(
                server.base_url,
                name="crash",
                lengths=[400, 800, 1600],
                needle_counts=[2, 4],
                repeats=5,
                concurrency=CRASH_CONCURRENCY,
                batch_size=4,
            )
        )
        for kill in range(KILLS):
            if kill == 0:
                # The first kill lands once the run has stored its start, before any answer.
                table, extra_files, delay = "runs", 1, rng.uniform(0.0, 0.3)
            else:
                # The others once 1–2 more batches are stored, plus a random part of the next.
                table, extra_files, delay = "answers", rng.randint(1, 2), rng.uniform(0.0, 0.4)
            target = len(data_files(store, table)) + extra_files
            process = start_sweep(cli, config, wh, "crash", log)
            deadline = time.monotonic() + 120
            while len(data_files(store, table)) < target:
                assert process.poll() is None, (
                    f"kill {kill + 1}: the sweep ended before it could be killed\n"
                    + log.read_text(errors="replace")[-3000:]
                )
                assert time.monotonic() < deadline, f"kill {kill + 1}: no progress"
                time.sleep(0.02)
            time.sleep(delay)
            assert process.poll() is None, (
                f"kill {kill + 1}: the sweep ended before it could be killed"
            )
            in_flight = server.in_flight
            kill_group(process)
            kill_points.append(
                {
                    "kill": kill + 1,
                    "after_new_files": f"{extra_files} {table}",
                    "delay_s": round(delay, 3),
                    "answer_files": len(answer_files(store)),
                    "requests_so_far": server.requests,
                    "server_in_flight": in_flight,
                }
            )
        graded_before_last = len(store.graded_cell_ids("crash"))
        assert graded_before_last < CRASH_CELLS, "the kills should have left cells to do"

        final = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "crash",
            "--no-report",
            "--json",
            extra_env=ENV,
        )
        assert final.returncode == 0, final.stderr[-3000:]
        requests = server.requests
    elapsed = time.monotonic() - began
    summary = json.loads(final.stdout)
    assert summary["cells_total"] == CRASH_CELLS
    assert summary["cells_skipped"] == graded_before_last
    assert summary["cells_graded"] == CRASH_CELLS - graded_before_last

    per_cell = query(
        store,
        "SELECT cell_id, count(*) FROM answers "
        "WHERE epoch = 'crash' AND error_kind IS NULL GROUP BY cell_id",
    )
    assert len(per_cell) == CRASH_CELLS
    assert {count for _, count in per_cell} == {1}
    assert query(store, "SELECT count(*), min(accuracy) FROM results WHERE error_kind IS NULL") == [
        (CRASH_CELLS, 100.0)
    ]
    # Six runs: the five killed ones never wrote their end row.
    assert query(store, "SELECT count(*), count(*) FILTER (WHERE ended_at IS NULL) FROM runs") == [
        (KILLS + 1, KILLS)
    ]

    assert not list(wh.rglob("*.partial"))
    parquet_files = list(wh.rglob("*.parquet"))
    assert parquet_files
    for path in parquet_files:
        pq.read_table(path)  # raises on a truncated or half-written file

    # A reply its task run stored before the kill is cached by Prefect, so only the requests
    # in flight at each kill and the replies not yet stored can be sent twice: at most the
    # query task runs alive at once, twice the model's `concurrency` (tasks/query.py).
    alive = live_task_runs(CRASH_CONCURRENCY, None, budgeted=False)
    assert alive == 2 * CRASH_CONCURRENCY
    assert CRASH_CELLS <= requests <= CRASH_CELLS + KILLS * alive, kill_points
    assert requests < 2 * CRASH_CELLS
    print(
        "crash figures:",
        json.dumps(
            {
                "cells": CRASH_CELLS,
                "kills": kill_points,
                "graded_before_final_run": graded_before_last,
                "requests": requests,
                "parquet_files": len(parquet_files),
                "seconds": round(elapsed, 1),
            }
        ),
    )


# -- 2. every fault the fake server knows, 300 cells ---------------------------------------

FAULT_CELLS = 300  # 3 lengths × 5 needle counts × 2 fillers × 10 repeats
FAULT_RETRIES = 2
FAULT_RATES = {
    "rate_limit": 0.06,  # 429 with Retry-After: 1, waited out once inside the call
    "server_error": 0.05,
    "unavailable": 0.05,
    "reset": 0.04,
    "truncated": 0.04,
    "garbage": 0.04,
    "empty_choices": 0.04,
    "slow": 0.04,  # 1 s, longer than the model's timeout_s
}


def test_faults_end_as_explicit_rows_and_a_rerun_asks_only_for_them(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    store = Warehouse(wh)
    began = time.monotonic()
    with FakeOpenAIServer(perfect_answer, rates=FAULT_RATES, seed=41) as server:
        config = write_config(
            config_text(
                server.base_url,
                name="faults",
                lengths=[600, 900, 1200],
                needle_counts=[1, 2, 3, 4, 5],
                repeats=10,
                retries=FAULT_RETRIES,
                concurrency=8,
                batch_size=50,
                model_extra="    timeout_s: 0.5\n",
            )
        )
        first = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "f",
            "--no-report",
            "--json",
            extra_env=ENV,
        )
        first_s = time.monotonic() - began
        assert first.returncode in (0, 1), first.stderr[-3000:]
        first_requests = server.requests
        fault_counts = dict(server.fault_counts)
        summary = json.loads(first.stdout)
        assert (summary["cells_total"], summary["cells_dropped"]) == (FAULT_CELLS, 0)

        # Every cell is in results: graded, or failed with an explicit, known error kind.
        rows = query(store, "SELECT cell_id, error_kind, accuracy, attempts FROM results")
        assert len(rows) == FAULT_CELLS
        assert len({cell for cell, *_ in rows}) == FAULT_CELLS
        kinds = {kind for _, kind, _, _ in rows if kind is not None}
        assert kinds <= KNOWN_ERROR_KINDS, kinds
        assert {acc for _, kind, acc, _ in rows if kind is None} == {100.0}
        failed = {cell for cell, kind, _, _ in rows if kind is not None}
        assert (first.returncode == 1) == bool(failed)
        assert summary["cells_failed"] == len(failed)
        assert summary["cells_graded"] == FAULT_CELLS - len(failed)

        # Retries are bounded: each of the retries + 1 attempts sends at most two requests
        # (a 429 is waited out and sent again once inside the call).
        assert first_requests <= FAULT_CELLS * (FAULT_RETRIES + 1) * 2
        assert first_requests > FAULT_CELLS  # the faults were retried
        assert max(attempts for *_, attempts in rows) <= FAULT_RETRIES + 1
        assert sum(fault_counts.values()) > 0
        assert set(fault_counts) <= set(FAULT_RATES)

        # The error kinds are queryable, through the CLI as through DuckDB.
        by_kind = dict(query(store, "SELECT error_kind, count(*) FROM failed_cells GROUP BY ALL"))
        assert sum(by_kind.values()) == len(failed)
        shown = cli(
            "sql",
            "SELECT error_kind, count(*) AS n FROM failed_cells GROUP BY ALL ORDER BY ALL",
            "-w",
            str(wh),
            "--format",
            "json",
        )
        assert shown.returncode == 0, shown.stderr[-2000:]
        assert {r["error_kind"]: r["n"] for r in json.loads(shown.stdout)} == by_kind
        attempts_per_kind = dict(
            query(store, "SELECT error_kind, count(*) FROM answers GROUP BY ALL")
        )

        # Faults off: the rerun asks for the failed cells only, and finishes the epoch.
        server.rates = {}
        server.reset_counts()
        rerun_began = time.monotonic()
        second = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "f",
            "--no-report",
            "--json",
            extra_env=ENV,
        )
        rerun_s = time.monotonic() - rerun_began
        assert second.returncode == 0, second.stderr[-3000:]
        assert server.requests == len(failed)
    assert json.loads(second.stdout)["cells_skipped"] == FAULT_CELLS - len(failed)
    assert query(
        store,
        "SELECT count(*), count(DISTINCT cell_id), min(accuracy) FROM results "
        "WHERE error_kind IS NULL",
    ) == [(FAULT_CELLS, FAULT_CELLS, 100.0)]
    assert query(store, "SELECT count(*) FROM failed_cells") == [(0,)]
    assert query(
        store,
        "SELECT max(n) FROM (SELECT count(*) n FROM answers "
        "WHERE error_kind IS NULL GROUP BY epoch, cell_id)",
    ) == [(1,)]
    print(
        "fault figures:",
        json.dumps(
            {
                "cells": FAULT_CELLS,
                "retries": FAULT_RETRIES,
                "first_run_exit": first.returncode,
                "first_run_requests": first_requests,
                "faults_injected": fault_counts,
                "failed_cells_by_kind": by_kind,
                "answer_rows_by_kind": {str(k): v for k, v in attempts_per_kind.items()},
                "rerun_requests": len(failed),
                "first_run_s": round(first_s, 1),
                "rerun_s": round(rerun_s, 1),
            }
        ),
    )


# -- 3. readers while a sweep writes -----------------------------------------------------------

READER_CELLS = 48  # 3 lengths × 2 needle counts × 2 fillers × 4 repeats


def test_readers_never_fail_while_a_sweep_writes(cli, write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    store = Warehouse(wh)
    log = tmp_path / "sweep.log"
    counts: list[tuple[float, int]] = []
    reports: list[float] = []
    failures: list[str] = []
    stop = threading.Event()

    def reader(args: list[str], on_success) -> None:
        while not stop.is_set():
            done = subprocess.run(
                [str(BIN / "needlescope"), *args],
                env=cli.env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            if done.returncode != 0:
                failures.append(f"{args[0]} exited {done.returncode}: {done.stderr[-2000:]}")
                return
            try:
                on_success(done)
            except Exception as exc:  # a failed check in a thread is reported
                failures.append(f"{args[0]}: {exc!r}")
                return

    def on_count(done: subprocess.CompletedProcess[str]) -> None:
        counts.append((time.monotonic(), json.loads(done.stdout)[0]["n"]))

    def on_report(done: subprocess.CompletedProcess[str]) -> None:
        if not (tmp_path / "rep" / "report.html").is_file():
            raise AssertionError("report.html was not written")
        reports.append(time.monotonic())

    sql_args = ["sql", "SELECT count(*) AS n FROM results", "-w", str(wh), "--format", "json"]
    report_args = ["report", "-w", str(wh), "--out", str(tmp_path / "rep")]
    answered = 0

    async def answer_once_read(body: dict[str, Any]) -> str:
        """The second half of the cells waits until the readers have read some of the first
        (two counts, one of them of written rows, and a report): each reader is a process
        whose start-up alone can outlast the sweep on a busy machine."""
        nonlocal answered
        answered += 1
        deadline = time.monotonic() + 100
        while answered > READER_CELLS // 2 and time.monotonic() < deadline:
            if len(counts) >= 2 and any(n > 0 for _, n in counts) and reports:
                break
            await asyncio.sleep(0.1)
        return perfect_answer(body)

    with FakeOpenAIServer(answer_once_read, delay_s=0.25) as server:
        config = write_config(
            config_text(
                server.base_url,
                name="readers",
                lengths=[400, 800, 1600],
                needle_counts=[2, 4],
                repeats=4,
                concurrency=2,
                batch_size=4,
            )
        )
        began = time.monotonic()
        process = start_sweep(cli, config, wh, "r", log)
        deadline = time.monotonic() + 120
        while not store.exists():  # warehouse.json is written after every table's empty file
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        threads = [
            threading.Thread(target=reader, args=(sql_args, on_count)),
            threading.Thread(target=reader, args=(report_args, on_report)),
        ]
        for thread in threads:
            thread.start()
        try:
            code = process.wait(timeout=180)
        finally:
            sweep_ended = time.monotonic()
            stop.set()
            for thread in threads:
                thread.join(timeout=300)
            if process.poll() is None:
                kill_group(process)
    assert code == 0, log.read_text(errors="replace")[-3000:]
    assert not failures, failures
    values = [n for _, n in counts]
    assert values == sorted(values), f"a count went down: {values}"
    during = [n for at, n in counts if at < sweep_ended]
    assert len(during) >= 2, f"too few reads while the sweep ran: {counts}"
    assert any(0 < n < READER_CELLS for n in during) or len(set(during)) > 1, during
    assert any(at < sweep_ended for at in reports), "no report ran while the sweep was writing"
    assert query(store, "SELECT count(*) FROM results WHERE error_kind IS NULL") == [
        (READER_CELLS,)
    ]
    final = cli("sql", "SELECT count(*) AS n FROM results", "-w", str(wh), "--format", "json")
    assert json.loads(final.stdout) == [{"n": READER_CELLS}]
    print(
        "reader figures:",
        json.dumps(
            {
                "cells": READER_CELLS,
                "sweep_s": round(sweep_ended - began, 1),
                "sql_reads": len(counts),
                "counts_seen": values,
                "reports": len(reports),
                "reports_during_sweep": sum(1 for at in reports if at < sweep_ended),
            }
        ),
    )
