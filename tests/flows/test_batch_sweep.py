"""Batch sweeps through the three fake batch APIs: a model in batch mode and the same model
sent one request a cell store the same answers (grades, validity labels) but for the batch id,
the latency and the price; a run that stops waiting hands its batches to the next run, which
collects them without sending anything again."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from needlescope.warehouse.store import Warehouse
from tests.support.anthropic_batch_server import FakeAnthropicBatchServer
from tests.support.gemini_batch_server import FakeGeminiBatchServer
from tests.support.openai_batch_server import DAY, FakeOpenAIBatchServer
from tests.support.openai_server import FakeOpenAIServer

SERVERS: dict[str, Any] = {
    "openai": (FakeOpenAIBatchServer, "gpt-4o-mini"),
    "anthropic": (FakeAnthropicBatchServer, "claude-sonnet-4-5"),
    "gemini": (FakeGeminiBatchServer, "gemini-2.5-flash"),
}


def prompt_text(body: dict[str, Any]) -> str:
    """The last user turn's text, in any of the three wire formats."""
    if "contents" in body:  # Gemini
        return "".join(p.get("text", "") for p in body["contents"][-1]["parts"])
    content = body["messages"][-1]["content"]
    if isinstance(content, list):  # Anthropic's blocks
        return "".join(block.get("text", "") for block in content)
    return str(content)


def half_the_prompt(body: dict[str, Any]) -> str:
    """An answer that names the numbers in the prompt's first half: grades differ by cell."""
    text = prompt_text(body)
    found = re.findall(r"\b\d{4}\b", text[: len(text) // 2])
    return json.dumps({str(i + 1): int(n) for i, n in enumerate(found)} or {"1": 0})


def config_text(provider: str, url: str, model: str, batch: str, *, sync: bool = True) -> str:
    """Model ``bat`` in batch mode; ``sync`` (the same model, one request a cell) swept too."""
    price = "{input_per_mtok: 2, output_per_mtok: 8}"
    tested = "" if sync else "under_test: false, "
    return f"""
name: batches
seed: 5
compact: false
retry: {{retries: 0, backoff_s: [0]}}
models:
  - {{{tested}name: sync, provider: {provider}, base_url: '{url}', model: {model}, price: {price}}}
  - name: bat
    provider: {provider}
    base_url: '{url}'
    model: {model}
    price: {price}
    batch: {batch}
probes:
  - probe: recall
    lengths: [600, 900]
    length_unit: chars
    needle_counts: [2]
    fillers: [pattern, noise]
"""


def results(store: Warehouse) -> list[dict[str, Any]]:
    con = store.connect()
    try:
        return con.sql("SELECT * FROM results ORDER BY model, context_id").pl().to_dicts()
    finally:
        con.close()


def claim_states(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / "claims.sqlite") as con:
        return dict(con.execute("SELECT state, count(*) FROM claims GROUP BY 1").fetchall())


def book(root: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(root / "claims.sqlite") as con:
        return con.execute("SELECT status, batch_id FROM batches ORDER BY intended").fetchall()


@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_a_batch_sweep_stores_what_a_synchronous_sweep_stores(
    cli, write_config, tmp_path: Path, provider: str
) -> None:
    server, model = SERVERS[provider]
    wh = tmp_path / "wh"
    with server(half_the_prompt, group=2) as srv:
        srv.clock = int(time.time())  # the provider stamps batches with the real time
        batch = "{poll_s: 0.05, max_requests: 3}"
        config = write_config(config_text(provider, srv.base_url, model, batch))
        run = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert run.returncode == 0, run.stderr[-3000:]
        store = Warehouse(wh)
        rows = results(store)
        by_model = {m: [r for r in rows if r["model"] == m] for m in ("sync", "bat")}
        assert len(by_model["sync"]) == len(by_model["bat"]) == 4
        assert len({r["accuracy"] for r in rows}) > 1  # the answers differ by cell
        for sync, bat in zip(by_model["sync"], by_model["bat"], strict=True):
            assert sync["context_id"] == bat["context_id"]
            for column in ("response", "accuracy", "parse_ok", "validity", "prompt_tokens"):
                assert sync[column] == bat[column], column
            assert sync["batch_id"] is None and sync["latency_s"] is not None
            assert bat["batch_id"] and bat["latency_s"] is None
            assert bat["cost_usd"] == pytest.approx(sync["cost_usd"] / 2)
        assert len({r["batch_id"] for r in by_model["bat"]}) == 2  # 3 requests, then 1
        assert set(srv.submitted.values()) == {1} and len(srv.submitted) == 4
        assert [status for status, _ in book(wh)] == ["collected", "collected"]
        assert claim_states(wh) == {"graded": 8}

        again = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(results(store)) == 8 and sum(srv.submitted.values()) == 4


def test_a_run_past_its_wait_hands_its_batches_to_the_next(
    cli, write_config, tmp_path: Path
) -> None:
    """wait_s: 0 polls once, then the run ends "waiting on N batches"; `rerun` collects what
    the batch answered before it expired, and a second `rerun` (rerun: sync) sends the expired
    requests one by one."""
    wh = tmp_path / "wh"
    with FakeOpenAIBatchServer(half_the_prompt, group=1) as srv:
        srv.clock = int(time.time())
        batch = "{poll_s: 0.05, wait_s: 0, rerun: sync}"
        config = write_config(config_text("openai", srv.base_url, "gpt-4o-mini", batch))
        first = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert first.returncode == 0, first.stderr[-3000:]
        assert "waiting on 1 batches (4 cells)" in first.stdout + first.stderr
        assert [status for status, _ in book(wh)] == ["open"]
        artifacts = httpx.post(  # the flow run's artifact says so in the UI
            f"{cli.env['PREFECT_API_URL']}/artifacts/filter",
            json={"artifacts": {"key": {"any_": ["batches-bat"]}}},
        ).json()
        assert any(a["description"] == "waiting on 1 batches of bat" for a in artifacts)
        assert claim_states(wh) == {"graded": 4, "batched": 4}
        store = Warehouse(wh)
        assert {r["model"] for r in results(store)} == {"sync"}

        # A day passes: two requests ran, then the batch's 24 hours ended.
        [batch_id] = srv.batches
        asyncio.run_coroutine_threadsafe(srv.advance(batch_id, 2), srv._loop).result(10)
        srv.tick(DAY + 1)
        run_id = store.query_table("runs", "SELECT run_id FROM t LIMIT 1", [])[0][0]
        rerun = cli("rerun", run_id, "-w", str(wh), "--no-report")
        assert rerun.returncode == 1, rerun.stderr[-3000:] + rerun.stdout  # cells failed
        assert [status for status, _ in book(wh)] == ["collected"]
        bat = [r for r in results(store) if r["model"] == "bat"]
        expired = [r for r in bat if r["error_kind"] == "batch_expired"]
        assert len(bat) == 4 and 0 < len(expired) < 4
        assert all(r["batch_id"] == batch_id for r in bat)

        chat_before = srv.requests - srv.batch_requests
        # The rerun that collected them answered them: its failed cells are retried.
        collected_by = expired[0]["run_id"]
        assert f"needlescope rerun {collected_by}" in rerun.stderr + rerun.stdout
        again = cli("rerun", collected_by, "-w", str(wh), "--no-report")
        assert again.returncode == 0, again.stderr[-3000:] + again.stdout
        assert sum(srv.submitted.values()) == 4  # no request went in a batch twice
        assert srv.requests - srv.batch_requests - chat_before == len(expired)  # one by one
        bat = [r for r in results(store) if r["model"] == "bat"]
        assert len(bat) == 4 and not any(r["error_kind"] for r in bat)
        resent = {r["cell_id"] for r in bat if r["batch_id"] is None}
        assert resent == {r["cell_id"] for r in expired}


def test_cache_auto_in_an_anthropic_batch_reads_the_shared_haystack(
    cli, write_config, tmp_path: Path
) -> None:
    """Three cells share the haystack before their needle: the batch marks it for the 1-hour
    cache, the first request to run writes it, the others read it at a tenth of the price."""
    wh = tmp_path / "wh"
    price = "{input_per_mtok: 3, output_per_mtok: 15}"
    with FakeAnthropicBatchServer(half_the_prompt, group=1) as srv:
        srv.clock = int(time.time())
        models = "\n".join(
            f"  - {{name: {name}, provider: anthropic, base_url: '{srv.base_url}',"
            f" model: claude-sonnet-4-5, price: {price}, batch: {{poll_s: 0.05}}{more}}}"
            for name, more in (("plain", ""), ("cached", ", cache: auto"))
        )
        config = write_config(
            f"name: cache\nseed: 5\ncompact: false\nmodels:\n{models}\n"
            "probes:\n  - {probe: recall, lengths: [12000], length_unit: chars,"
            " needle_counts: [1], regions: ['0.8-1'], fillers: [prose-en], repeats: 3}\n"
        )
        run = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert run.returncode == 0, run.stderr[-3000:]
    rows = results(Warehouse(wh))
    by_model = {m: [r for r in rows if r["model"] == m] for m in ("plain", "cached")}
    cached, plain = by_model["cached"], by_model["plain"]
    assert len(cached) == len(plain) == 3
    assert sum(r["cache_write_1h_tokens"] or 0 for r in cached) > 0
    assert sum(1 for r in cached if r["cached_tokens"]) == 2  # the two readers
    assert not any(r["cached_tokens"] or r["cache_write_tokens"] for r in plain)
    for a, b in zip(plain, cached, strict=True):
        assert (a["accuracy"], a["prompt_tokens"]) == (b["accuracy"], b["prompt_tokens"])
    assert sum(r["cost_usd"] for r in cached) < 0.8 * sum(r["cost_usd"] for r in plain)


def test_a_server_without_the_batch_api_is_one_line_and_holds_no_cell(
    cli, write_config, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    with FakeOpenAIServer(half_the_prompt) as srv:  # chat completions only, as vLLM serves
        config = write_config(config_text("openai", srv.base_url, "gpt-4o-mini", "true"))
        run = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
    assert run.returncode == 2, run.stderr[-1500:]  # bad input: the endpoint
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "has no batch API" in errors[0], run.stderr[-2000:]
    assert "/v1/files" in errors[0]
    assert [status for status, _ in book(wh)] == ["unsent"]  # refused: nothing was created
    assert "batched" not in claim_states(wh)


def test_no_batch_is_submitted_past_the_budget(cli, write_config, tmp_path: Path) -> None:
    """The budget holds each batch's worst case before it is submitted: a budget smaller than
    any batch's sends nothing, and the run says the budget was spent (exit 3)."""
    wh = tmp_path / "wh"
    with FakeOpenAIBatchServer(half_the_prompt) as srv:
        srv.clock = int(time.time())
        text = config_text("openai", srv.base_url, "gpt-4o-mini", "{poll_s: 0.05}", sync=False)
        config = write_config(text + "budget: {usd: 0.0001}\n")
        run = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert run.returncode == 3, run.stderr[-2000:]
        assert not srv.submitted and srv.batch_requests == 0
    assert "batched" not in claim_states(wh) and book(wh) == []


def test_a_poll_or_a_results_read_that_fails_for_now_is_tried_again(
    cli, write_config, tmp_path: Path
) -> None:
    """A 503 on a poll and on the results read: the run looks again at its next poll."""
    wh = tmp_path / "wh"
    dropped: list[str] = []

    async def unavailable_once(request: web.Request, response: object) -> bool:
        if response is not None or request.method != "GET":
            return False
        if request.path.endswith("/content"):
            step = "results"  # a file read by `results`
        elif request.path.startswith("/v1/batches/"):
            step = "poll"
        else:
            return False
        if step in dropped:
            return False
        dropped.append(step)
        return True  # answered 503, unhandled

    with FakeOpenAIBatchServer(half_the_prompt) as srv:
        srv.clock = int(time.time())
        srv.watcher = unavailable_once
        text = config_text("openai", srv.base_url, "gpt-4o-mini", "{poll_s: 0.05}", sync=False)
        config = write_config(text)
        run = cli("run", str(config), "-w", str(wh), "--epoch", "e", "--no-report")
        assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(dropped) == ["poll", "results"]
    assert "tried again at the next poll" in run.stderr
    assert len(results(Warehouse(wh))) == 4 and set(srv.submitted.values()) == {1}
