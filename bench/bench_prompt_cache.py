"""Prompt-cache-aware order on the local model (llama.cpp reuses its prompt cache).

A cases sweep: one haystack per length, the case's needles at several depths, so prompts
share the haystack's text up to their first needle. Wall time of the same sweep with cells
sent in prefix order (needlescope's default for prefix-caching providers) vs shuffled, and
the prompt tokens llama.cpp computed vs took from its cache (its `timings` in each reply).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LENGTHS = [512, 1024]
DEPTHS = 5
TIMINGS: list[dict[str, float]] = []


def record_llama_timings() -> None:
    """Keep llama.cpp's per-request `timings` (prompt tokens computed and from cache)."""
    from needlescope.providers.http import HttpProvider

    post = HttpProvider._post

    async def recording(
        self: HttpProvider,
        url: str,
        body: dict[str, object],
        headers: dict[str, str] | None = None,
    ) -> tuple[int, object]:
        status, data = await post(self, url, body, headers)
        if url.endswith("/chat/completions") and isinstance(data, dict):
            TIMINGS.append(data.get("timings") or {})
        return status, data

    HttpProvider._post = recording  # type: ignore[method-assign]


def config_text(order: str) -> str:
    return f"""
name: cache-{order}
seed: 11
cell_order: {order}
models:
  - name: smollm2-135m
    provider: local
    concurrency: 1
    generation: {{temperature: 0.0, max_tokens: 8}}
probes:
  - probe: cases
    cases_file: {REPO / "configs" / "cases" / "en.yaml"}
    cases: [plum_cake_secrets]
    lengths: {LENGTHS}
    length_unit: tokens
    depth_count: {DEPTHS}
    fillers: [prose-en]
    answer_buffer: 16
"""


def sweep_seconds(order: str, work: Path) -> tuple[float, int, int, int, int]:
    from needlescope.flows.cli._app import _state_summary
    from needlescope.flows.sweep import sweep
    from needlescope.warehouse.store import Warehouse

    path = work / f"{order}.yaml"
    path.write_text(config_text(order))
    warehouse = work / f"wh-{order}"
    TIMINGS.clear()
    started = time.perf_counter()
    state = asyncio.run(sweep(str(path), epoch=order, warehouse=str(warehouse), return_state=True))
    elapsed = time.perf_counter() - started
    summary = _state_summary(state)
    assert summary is not None and summary["cells_failed"] == 0, state
    con = Warehouse(warehouse).connect()
    prompt_tokens = con.execute("SELECT sum(prompt_tokens) FROM answers").fetchone()
    con.close()
    computed = int(sum(t.get("prompt_n", 0) for t in TIMINGS))
    cached = int(sum(t.get("cache_n", 0) for t in TIMINGS))
    tokens = int(prompt_tokens[0] if prompt_tokens else 0)
    return elapsed, int(summary["cells_graded"]), tokens, computed, cached


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="ns-bench-cache-"))
    os.environ.update(
        PREFECT_HOME=str(work / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    (work / "prefect").mkdir()
    from needlescope.flows.local_server import running_prefect_server
    from tests.support.prefect_server import free_port

    with running_prefect_server(
        free_port(), ui=False, log_path=work / "server.log", log=lambda _: None
    ) as api:
        os.environ["PREFECT_API_URL"] = api
        logging.getLogger("prefect").setLevel(logging.WARNING)
        record_llama_timings()
        prefix_s, prefix_cells, _, prefix_computed, prefix_cached = sweep_seconds("prefix", work)
        shuffled_s, cells, tokens, computed, cached = sweep_seconds("shuffled", work)
    assert cells == prefix_cells
    print(
        f"cases sweep on SmolLM2-135M (llama.cpp, 1 slot): {cells} cells, lengths {LENGTHS} "
        f"tokens × {DEPTHS} depths, {tokens:,} prompt tokens"
    )
    print(
        f"prefix order: {prefix_s:.1f} s, {prefix_computed:,} prompt tokens computed, "
        f"{prefix_cached:,} from llama.cpp's cache"
    )
    print(
        f"shuffled:     {shuffled_s:.1f} s, {computed:,} prompt tokens computed, "
        f"{cached:,} from llama.cpp's cache"
    )
    print(f"prefix order {shuffled_s / prefix_s:.2f}× the speed of shuffled (target ≥ 1.5×)")


if __name__ == "__main__":
    main()
