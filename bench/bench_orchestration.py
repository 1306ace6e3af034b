"""Orchestration overhead: needlescope's Prefect sweep vs a bare aiohttp + semaphore loop.

Both build the same prompts, send them to the same local OpenAI-wire-format server (in a
process of its own, server_process.py), grade them with the same grader and write the same
Parquet tables; what differs is the orchestration.

1. An instant server, 2,000 recall cells: ms per cell for both, and the difference.
2. 1 s of server latency at concurrency 64: requests per second vs the ideal 64/s.

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


def main() -> None:
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
