"""A batch sweep killed (SIGKILL, by the fake provider, at the moment it acts) at every step —
the request file written, the batch created, polled, its results read, its answers stored —
and run again until it ends: every cell graded exactly once, no request submitted twice.

The kills are five per provider, their places seeded: the create answered but its answer never
read; the create (OpenAI: the upload) never made; the n-th poll; the results read, the reply
lost; a moment after the results came, while the run grades and stores them."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from needlescope.warehouse.store import Warehouse
from tests.flows.test_batch_sweep import SERVERS, half_the_prompt
from tests.support.prefect_server import BIN

SEED = 38


@dataclass
class Kill:
    step: str  # create, upload, poll, results
    when: str  # before (the request dropped), after (its reply lost), later (s after reply)
    nth: int = 1
    later_s: float = 0.0


def kills(provider: str) -> list[Kill]:
    rng = random.Random(f"{SEED}:{provider}")
    never_made = "upload" if provider == "openai" else "create"
    return [
        Kill("create", "after"),
        Kill(never_made, "before"),
        Kill("poll", "after", nth=rng.randint(1, 3)),
        Kill("results", "after"),
        Kill("results", "later", later_s=rng.uniform(0.05, 0.4)),
    ]


def step_of(provider: str, request: web.Request, response: Any) -> str | None:
    """Which step of a batch sweep a request to the fake is."""
    method, path = request.method, request.path
    if provider == "openai":
        if method == "POST":
            return {"/v1/files": "upload", "/v1/batches": "create"}.get(path)
        if path.endswith("/content"):
            return "results"
        return "poll" if path.startswith("/v1/batches/") else None
    if provider == "anthropic":
        if method == "POST" and path == "/v1/messages/batches":
            return "create"
        if path.endswith("/results"):
            return "results"
        return "poll" if path.startswith("/v1/messages/batches/") else None
    if method == "POST" and path.endswith(":batchGenerateContent"):
        return "create"
    if method == "GET" and "/batches/" in path:
        # Gemini's results come with the batch itself: the reads of an ended one.
        body = getattr(response, "text", None) or ""
        return "results" if "BATCH_STATE_SUCCEEDED" in body else "poll"
    return None


def killer(provider: str, kill: Kill, pid: int, fired: list[str]) -> Callable[..., Any]:
    seen = 0

    def die() -> None:
        fired.append(f"{kill.step}:{kill.when}")
        os.killpg(pid, signal.SIGKILL)

    async def watch(request: web.Request, response: Any) -> bool:
        nonlocal seen
        if fired:
            return True  # the client is dead: nothing it sent after is handled
        if (kill.when == "before") != (response is None):
            return False
        if step_of(provider, request, response) != kill.step:
            return False
        seen += 1
        if seen != kill.nth:
            return False
        if kill.when == "later":
            asyncio.get_running_loop().call_later(kill.later_s, die)
            return False
        die()
        return kill.when == "before"

    return watch


def config_text(provider: str, url: str, model: str) -> str:
    return f"""
name: kills
seed: 7
compact: false
claim_timeout_s: 30
retry: {{retries: 0, backoff_s: [0]}}
models:
  - name: bat
    provider: {provider}
    base_url: '{url}'
    model: {model}
    batch: {{poll_s: 0.05, max_requests: 2}}
probes:
  - probe: recall
    lengths: [600, 700, 900]
    length_unit: chars
    needle_counts: [2]
    fillers: [pattern, noise]
"""


def run(cli: Any, args: list[str], cwd: Path, watch_with: Callable[[int], None]) -> int:
    process = subprocess.Popen(
        [str(BIN / "needlescope"), *args],
        env=cli.env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a kill takes the whole process group
    )
    watch_with(process.pid)
    _, err = process.communicate(timeout=600)
    assert process.returncode in (0, -signal.SIGKILL), err[-3000:]
    return process.returncode


@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_kills_at_every_step_grade_each_cell_once_and_send_it_once(
    cli, write_config, tmp_path: Path, provider: str
) -> None:
    server, model = SERVERS[provider]
    wh = tmp_path / "wh"
    with server(half_the_prompt, group=1) as srv:
        srv.clock = int(time.time())
        config = write_config(config_text(provider, srv.base_url, model))
        args = ["run", str(config), "-w", str(wh), "--epoch", "e", "--no-report"]
        for kill in kills(provider):
            fired: list[str] = []

            def arm(pid: int, kill: Kill = kill, fired: list[str] = fired) -> None:
                srv.watcher = killer(provider, kill, pid, fired)

            assert run(cli, args, tmp_path, arm) == -signal.SIGKILL and fired, kill
        srv.watcher = None
        assert run(cli, args, tmp_path, lambda pid: None) == 0

    con = Warehouse(wh).connect()
    try:
        answers = con.execute(
            "SELECT cell_id, count(*), count(error_kind) FROM answers GROUP BY 1"
        ).fetchall()
    finally:
        con.close()
    assert len(answers) == 6
    assert all(n == 1 and errors == 0 for _, n, errors in answers), answers
    assert len(srv.submitted) == 6 and set(srv.submitted.values()) == {1}, srv.submitted
    with sqlite3.connect(wh / "claims.sqlite") as claims:
        states = dict(claims.execute("SELECT state, count(*) FROM claims GROUP BY 1").fetchall())
        book = claims.execute("SELECT status, count(*) FROM batches GROUP BY 1").fetchall()
    assert states == {"graded": 6}
    assert dict(book) == {"collected": 3, "unsent": 1}
