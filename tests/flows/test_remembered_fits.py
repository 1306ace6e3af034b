"""Fits remembered across sweeps (issue 21, counting calls): a rerun of a failed cell and the
next night's sweep check each cell's stored fit with one count and send the same prompts.

Real Prefect (the session's server), the Anthropic fake in a thread, `needlescope` as a user
runs it: the sweep reads the fits from the warehouse's cells rows (flows/sweep.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse
from tests.support.anthropic_server import FakeAnthropicServer, prompt_sha
from tests.support.fake_server import WireReply

CONFIG = """
name: remembered
seed: 8
batch_size: 8
retry: {{retries: 0, backoff_s: [0]}}
models:
  - name: claude
    provider: anthropic
    base_url: {url}
    model: claude-fake-1
    api_key_env: NS_FAKE_ANTHROPIC_KEY
    max_retry_after_s: 0
    concurrency: 1
probes:
  - probe: recall
    lengths: [700]
    length_unit: tokens
    needle_counts: [1, 3]
    fillers: [prose-en]
    repeats: 2
"""


class FailFirst:
    """Answers every request but the first, which gets Anthropic's 529 (retryable)."""

    def __init__(self) -> None:
        self.failed: str | None = None

    def __call__(self, body: dict[str, Any]) -> Any:
        if self.failed is None:
            self.failed = prompt_sha(body)
            error = {"type": "overloaded_error", "message": "Overloaded"}
            return WireReply(529, {"type": "error", "error": error})
        return "ok"


def test_a_rerun_and_the_next_sweep_count_each_cell_once_and_send_the_same_prompts(
    cli, write_config, tmp_path: Path
) -> None:
    wh, env = tmp_path / "wh", {"NS_FAKE_ANTHROPIC_KEY": "k"}
    responder = FailFirst()
    with FakeAnthropicServer(responder) as srv:
        config = write_config(CONFIG.format(url=srv.base_url))
        first = cli(
            "run", str(config), "-w", str(wh), "--epoch", "e1", "--no-report", extra_env=env
        )
        assert first.returncode == 1, first.stderr[-3000:]  # the cell that got the 529
        first_counts, first_sent = srv.count_requests, list(srv.sent)
        assert len(first_sent) == 4 and responder.failed in first_sent
        assert first_counts > 4

        store = Warehouse(wh)
        con = store.connect()
        try:
            run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
        finally:
            con.close()
        srv.reset_counts()
        rerun = cli("rerun", run_id, "-w", str(wh), "--no-report", extra_env=env)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        # one count proves the stored fit; the prompt is the first attempt's
        assert (srv.count_requests, srv.sent) == (1, [responder.failed])

        srv.reset_counts()
        night = cli(
            "run",
            str(config),
            "-w",
            str(wh),
            "--epoch",
            "e2",
            "--no-report",
            "--json",
            extra_env=env,
        )
        assert night.returncode == 0, night.stderr[-3000:]
        assert json.loads(night.stdout)["cells_graded"] == 4
        assert srv.count_requests == 4
        assert sorted(srv.sent) == sorted(first_sent)
        assert sorted(srv.counted) == sorted(first_sent)  # each cell's own prompt, counted once

        # Another tokenizer: the stored fits no longer hold, the cells are fitted afresh and
        # their new fits stored, which the night after checks with one count each again.
        srv.words = lambda text: len(text.split()) + text.count(",") if text else 0
        for epoch, counts in (("e3", None), ("e4", 4)):
            srv.reset_counts()
            done = cli(
                "run", str(config), "-w", str(wh), "--epoch", epoch, "--no-report", extra_env=env
            )
            assert done.returncode == 0, done.stderr[-3000:]
            if counts is None:
                assert srv.count_requests > 4 and not set(srv.sent) & set(first_sent)
                refitted = sorted(srv.sent)
            else:
                assert (srv.count_requests, sorted(srv.sent)) == (counts, refitted)
