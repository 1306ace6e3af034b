"""Orchestration overhead: needlescope's Prefect sweep vs a bare aiohttp + semaphore loop.

Both build the same prompts, send them to the same local OpenAI-wire-format server (in a
process of its own, server_process.py), grade them with the same grader and write the same
Parquet tables; what differs is the orchestration.

1. An instant server, 2,000 recall cells: ms per cell for both, and the difference.
2. 1 s of server latency at concurrency 64: requests per second vs the ideal 64/s.
3. scale (`scale [CELLS...]`, default 20,000 and 100,000): `needlescope run` of that many
   recall cells against the instant server, under /usr/bin/time -v, on a Prefect server of
   its own: wall time, ms a cell, the run's peak RSS, and what Prefect keeps of it: database
   bytes, task runs, task-run states, events and event resources a cell, result files left
   under PREFECT_HOME/storage and replies under the warehouse, Prefect-server CPU a cell.

Design: docs/design/benchmarks.md#bench-orchestration
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CELLS = 2000


def perfect_answer(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    haystack = prompt.split("<text>")[1].split("</text>")[0]
    numbers = re.findall(r"(?<!\d)\d{4}(?!\d)", haystack)
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(numbers)})


def config_text(base_url: str, name: str, concurrency: int, repeats: int) -> str:
    # 5 lengths × 4 needle counts × 2 fillers × repeats cells.
    return f"""
name: {name}
seed: 3
retry: {{retries: 2, backoff_s: [0]}}
models:
  - name: fake
    provider: openai
    base_url: {base_url}
    model: fake-model
    api_key_env: NS_BENCH_KEY
    concurrency: {concurrency}
    max_retry_after_s: 0
probes:
  - probe: recall
    lengths: [500, 1000, 2000, 4000, 8000]
    length_unit: chars
    needle_counts: [1, 2, 5, 10]
    fillers: [pattern, noise]
    repeats: {repeats}
"""


async def bare_loop(config_path: Path, warehouse: Path) -> tuple[float, int]:
    """What one writes without an orchestrator: build, send under a semaphore, grade, write."""
    import aiohttp

    from needlescope.config._file import load_config
    from needlescope.probes.base import answer_tables
    from needlescope.probes.registry import expand_grid, probe_module
    from needlescope.providers.base import Reply
    from needlescope.providers.open import open_provider
    from needlescope.tasks.contexts import ContextBuilder
    from needlescope.warehouse.store import Warehouse
    from needlescope.warehouse.store import rows as row_builders

    config = load_config(config_path)
    model = config.models[0]
    store = Warehouse(warehouse).ensure()
    started = time.perf_counter()
    cells = expand_grid(config)
    async with contextlib.AsyncExitStack() as stack:
        # the same provider client a sweep opens: counts a prompt the way the sweep does
        provider = await open_provider(stack, model, ctx_per_slot=0, offline=True)
        runtime = ContextBuilder(config, {model.name: provider})
        built = await runtime.build_contexts(model.name, cells)
    limit = asyncio.Semaphore(model.concurrency)
    tables: dict[str, list[dict[str, Any]]] = {}
    headers = {"Authorization": f"Bearer {os.environ['NS_BENCH_KEY']}"}
    connector = aiohttp.TCPConnector(limit=model.concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def one(context: Any) -> None:
            body = {
                "model": model.model,
                "messages": [{"role": m.role, "content": m.content} for m in context.messages],
                "max_tokens": context.max_tokens,
                "temperature": 0.0,
            }
            async with limit:
                sent = time.perf_counter()
                async with session.post(f"{model.base_url}/chat/completions", json=body) as r:
                    data = await r.json()
            choice = data["choices"][0]
            reply = Reply(
                text=choice["message"]["content"],
                prompt_tokens=data["usage"]["prompt_tokens"],
                completion_tokens=data["usage"]["completion_tokens"],
                finish_reason=choice["finish_reason"],
                reasoning_tokens=None,
                latency_s=time.perf_counter() - sent,
            )
            cell = context.cell
            grade = probe_module(cell.probe).grade(
                context.expected, context.rendered.facts, reply.text
            )
            tables.setdefault("answers", []).append(
                row_builders.graded_row(context, reply, grade, "bare", "bare", 1)
            )
            tables.setdefault("cells", []).append(
                row_builders.cell_row(
                    context,
                    "bare",
                    haystack_length=None,
                    planned_tokens=None,
                    keep_prompt=False,
                    length_basis="chars",
                )
            )
            key = row_builders.AnswerKey("bare", "bare", cell.cell_id, cell.model, cell.probe)
            extra = row_builders.table_rows(answer_tables([grade]), [key])
            for table, rows in extra.items():
                tables.setdefault(table, []).extend(rows)

        await asyncio.gather(*(one(c) for c in built.contexts))
    for table, rows in tables.items():
        store.append(table, rows, parts=["recall", model.name])
    return time.perf_counter() - started, len(built.contexts)


def prefect_server_cpu_s() -> float | None:
    """CPU seconds the `prefect server` this process started has used so far (Linux /proc;
    None elsewhere): the server records every task run's events, and on 2 cores it competes
    with the sweep."""
    total, found = 0.0, False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"prefect server start" in cmdline:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            found = True
    return total if found else None


def served_rate(server: Any) -> float:
    """Requests per second between the server's first request and its last reply."""
    return float(server.requests / (server.last_reply_at - server.first_request_at))


def needlescope_sweep(
    config_path: Path, warehouse: Path, epoch: str
) -> tuple[float, dict[str, Any]]:
    from needlescope.flows.sweep import sweep

    cpu_before = prefect_server_cpu_s()
    started = time.monotonic()
    state = asyncio.run(
        sweep(str(config_path), epoch=epoch, warehouse=str(warehouse), return_state=True)
    )
    ended = time.monotonic()
    cpu_after = prefect_server_cpu_s()
    from needlescope.flows.cli._app import _state_summary

    summary = _state_summary(state)
    assert summary is not None, state
    # time.monotonic() is one clock for this process and the server's
    server_cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return ended - started, {
        **summary,
        "started_at": started,
        "ended_at": ended,
        "prefect_server_cpu_s": server_cpu,
    }


def server_cpu(summary: dict[str, Any]) -> str:
    cpu = summary["prefect_server_cpu_s"]
    return "Prefect server CPU unknown" if cpu is None else f"Prefect server CPU {cpu:.1f} s"


def prefect_tables(db: Path) -> dict[str, int]:
    """Row counts of the Prefect tables that grow with a sweep (read-only)."""
    import sqlite3

    tables = ("flow_run", "task_run", "task_run_state", "events", "event_resources", "log")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60) as con:
        return {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}


def files_under(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def database_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("prefect.db*") if p.is_file())


def ui_page_seconds(api: str) -> str:
    """How long the Prefect UI's page of the server's latest flow run takes to show that run
    (its name and its final state) in headless Chromium, from navigation start; or why not."""
    import urllib.request

    from tests.support.browser import find_chromium, open_page

    if find_chromium() is None:
        return "UI page not measured: no Chromium (make browser)"
    request = urllib.request.Request(
        f"{api}/flow_runs/filter",
        data=json.dumps({"sort": "START_TIME_DESC", "limit": 1}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        run = json.load(response)[0]
    url = f"{api.removesuffix('/api')}/runs/flow-run/{run['id']}"
    name, state = json.dumps(run["name"]), json.dumps(run["state"]["name"])
    ready = f"document.body && document.body.innerText.includes({name})"
    ready += f" && document.body.innerText.includes({state})"

    async def measure() -> float:
        async with open_page(url, selector="body", ready=ready, timeout_s=120) as page:
            if not page.report().ready:
                text = await page.evaluate("document.body ? document.body.innerText : ''")
                raise AssertionError(f"{url} did not show {name}, {state} in 120 s: {text[:800]}")
            return float(await page.evaluate("performance.now()")) / 1000

    return f"UI flow-run page shown in {asyncio.run(measure()):.1f} s (goal <= 3 s)"


def scale(work: Path, cells: int) -> None:
    """Part 3 (module docstring): one `needlescope run` of ``cells`` cells on a fresh server."""
    import subprocess

    from server_process import ServerProcess

    from needlescope.flows.local_server import running_prefect_server
    from tests.support.prefect_server import free_port

    home = work / f"prefect-{cells}"
    home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.pop("PREFECT_API_URL", None)
    with (
        running_prefect_server(
            free_port(), ui=True, env=env, log_path=home / "server.log", log=lambda _: None
        ) as api,
        ServerProcess(perfect_answer, seed=4) as server,
    ):
        env["PREFECT_API_URL"] = api
        config = work / f"scale-{cells}.yaml"
        config.write_text(config_text(server.base_url, f"scale{cells}", 16, max(1, cells // 40)))
        warehouse = work / f"wh-scale-{cells}"
        before_rows, before_bytes = prefect_tables(home / "prefect.db"), database_bytes(home)
        cpu_before = prefect_server_cpu_s()
        started = time.monotonic()
        done = subprocess.run(
            [
                "/usr/bin/time",
                "-v",
                str(Path(sys.executable).parent / "needlescope"),
                "run",
                str(config),
                "-w",
                str(warehouse),
                "--epoch",
                "e",
                "--no-report",
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=4 * 3600,
        )
        wall = time.monotonic() - started
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout)
        time.sleep(15)  # the server's event and task-run recorders flush (every second)
        cpu_after = prefect_server_cpu_s()
        rows, size = prefect_tables(home / "prefect.db"), database_bytes(home)
        page = ui_page_seconds(api)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    graded = summary["cells_graded"]
    added = {t: rows[t] - before_rows[t] for t in rows}
    per_cell = ", ".join(f"{t} {added[t] / graded:.3f}" for t in added)
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    print(
        f"scale, {graded:,} cells graded of {summary['cells_total']:,}: run {wall:.0f} s"
        f" ({1000 * wall / graded:.2f} ms a cell, start-up included), peak RSS"
        f" {int(peak.group(1)) / 1024 if peak else float('nan'):.0f} MiB; Prefect database"
        f" +{(size - before_bytes) / 1e6:.1f} MB ({(size - before_bytes) / graded:.0f} bytes a"
        f" cell); rows a cell: {per_cell}; result files under PREFECT_HOME/storage:"
        f" {files_under(home / 'storage')}; replies left in the warehouse:"
        f" {files_under(warehouse / 'replies')}; Prefect server CPU"
        f" {'unknown' if cpu is None else f'{cpu:.1f} s, {1000 * cpu / graded:.2f} ms a cell'};"
        f" {page}"
    )
    print(
        f"TARGET Prefect database a cell at {graded:,} cells:"
        f" {(size - before_bytes) / graded / 1024:.2f} KB | goal <= 2 KB | 24 KB"
        " (2026-11-28, a task run per cell)"
    )


def main() -> None:
    if sys.argv[1:2] == ["scale"]:
        work = Path(tempfile.mkdtemp(prefix="ns-bench-scale-"))
        os.environ.update(
            PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", NS_BENCH_KEY="sk-bench"
        )
        for cells in [int(n) for n in sys.argv[2:]] or [20_000, 100_000]:
            scale(work, cells)
        return
    work = Path(tempfile.mkdtemp(prefix="ns-bench-orchestration-"))
    os.environ.update(
        PREFECT_HOME=str(work / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="WARNING",
        NS_BENCH_KEY="sk-bench",
    )
    (work / "prefect").mkdir()
    from server_process import ServerProcess

    from needlescope.flows.local_server import running_prefect_server
    from tests.support.prefect_server import free_port

    with running_prefect_server(
        free_port(), ui=False, log_path=work / "server.log", log=lambda _: None
    ) as api:
        os.environ["PREFECT_API_URL"] = api
        logging.getLogger("prefect").setLevel(logging.WARNING)
        print(f"needlescope vs a bare aiohttp loop, {CELLS} recall cells, real Prefect server")

        parts = sys.argv[1:] or ["instant", "latency"]
        with ServerProcess(perfect_answer, seed=1) as server:
            warm = work / "warm.yaml"
            warm.write_text(config_text(server.base_url, "warm", 16, 1))
            needlescope_sweep(warm, work / "wh-warm", "warm")  # imports, client, first flow run
        if "instant" in parts:
            with ServerProcess(perfect_answer, seed=1) as server:
                fast = work / "fast.yaml"
                fast.write_text(config_text(server.base_url, "fast", 16, CELLS // 40))
                bare_s, bare_n = asyncio.run(bare_loop(fast, work / "wh-bare"))
                ns_s, summary = needlescope_sweep(fast, work / "wh-ns", "fast")
                assert summary["cells_graded"] == CELLS == bare_n, summary
                bare_ms, ns_ms = 1000 * bare_s / bare_n, 1000 * ns_s / CELLS
                print(
                    f"instant server, concurrency 16: bare loop {bare_ms:.2f} ms/cell "
                    f"({bare_s:.1f} s), needlescope {ns_ms:.2f} ms/cell ({ns_s:.1f} s); "
                    f"overhead {ns_ms - bare_ms:+.2f} ms/cell (target ≤ 15), "
                    f"ratio {ns_s / bare_s:.1f}×; {server_cpu(summary)}"
                )
                print(
                    f"TARGET added cost per cell (instant server): {ns_ms - bare_ms:.1f} ms"
                    " | goal <= 10 ms | baseline 12.0 ms (2026-11-22)"
                )

        if "latency" in parts:
            with ServerProcess(perfect_answer, seed=2, delay_s=1.0) as slow_server:
                slow = work / "slow.yaml"
                slow.write_text(config_text(slow_server.base_url, "slow", 64, CELLS // 40))
                slow_server.reset_counts()
                bare_s, bare_n = asyncio.run(bare_loop(slow, work / "wh-bare-slow"))
                bare_served = served_rate(slow_server)
                slow_server.reset_counts()
                ns_s, summary = needlescope_sweep(slow, work / "wh-ns-slow", "slow")
                ns_served = served_rate(slow_server)
                assert summary["cells_graded"] == CELLS, summary
                bare_rate, ns_rate = bare_n / bare_s, CELLS / ns_s
                print(
                    f"1 s latency, concurrency 64 (ideal 64 req/s): bare loop {bare_rate:.1f} "
                    f"req/s ({100 * bare_rate / 64:.0f}%), needlescope {ns_rate:.1f} req/s "
                    f"({100 * ns_rate / 64:.0f}%; target ≥ 90%) from start to end of the run; "
                    f"as the server saw them (first request to last reply): bare loop "
                    f"{bare_served:.1f} req/s ({100 * bare_served / 64:.0f}%), needlescope "
                    f"{ns_served:.1f} req/s ({100 * ns_served / 64:.0f}%); "
                    f"max in flight {slow_server.max_in_flight}; before the first request "
                    f"{slow_server.first_request_at - summary['started_at']:.1f} s, after the "
                    f"last reply {summary['ended_at'] - slow_server.last_reply_at:.1f} s; "
                    f"{server_cpu(summary)}"
                )
                print(
                    f"TARGET rate at 1 s x 64, whole run: {100 * ns_rate / 64:.0f}% of ideal"
                    " | goal >= 90% | baseline 86-88% (2026-11-22, load 1.4)"
                )


if __name__ == "__main__":
    main()
