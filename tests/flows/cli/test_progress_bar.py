"""The run's progress bar: cells done, failed and tokens, and each batch model's open batches
by status until none is open."""

from __future__ import annotations

import io

from rich.console import Console

from needlescope.flows.cli._progress import RichProgress


def test_the_bar_shows_each_batch_models_open_batches_until_collected() -> None:
    out = io.StringIO()
    bar = RichProgress(Console(file=out, width=200, force_terminal=False))
    bar.start(10, 0)
    bar.advance(3, 1, 500)
    bar.batches("claude", "2 batches open: 4 processing, 2 succeeded")
    bar.batches("gpt", "1 batches open: 1 processing")
    task = bar.progress.tasks[0]
    assert (task.completed, task.fields["failed"], task.fields["tokens"]) == (4, 1, 500)
    assert task.fields["batches"] == (
        "claude: 2 batches open: 4 processing, 2 succeeded; gpt: 1 batches open: 1 processing"
    )
    bar.batches("claude", "")  # collected
    assert task.fields["batches"] == "gpt: 1 batches open: 1 processing"
    bar.finish()
    assert "gpt: 1 batches open" in out.getvalue()
