"""The model query without a task run per request (tasks/query.py): each request retried with
back-off on a retryable error, its reply kept in the warehouse until the answer is stored, so
a run killed in between does not send it again, and removed once it is."""

from __future__ import annotations

from pathlib import Path

from needlescope.config._sweep import SweepConfig
from needlescope.errors import ProviderError
from needlescope.grid import Cell
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.tasks.query import UNSENT, Asker, retry_delay
from needlescope.tasks.runtime import Runtime, running


def config(**more: object) -> SweepConfig:
    return SweepConfig.model_validate(
        {
            "name": "asks",
            "models": [
                {"name": "m", "provider": "openai", "model": "m", "base_url": "http://127.0.0.1:9"}
            ],
            "probes": [
                {"probe": "recall", "lengths": [500], "length_unit": "chars", "needle_counts": [1]}
            ],
            "retry": {"retries": 3, "backoff_s": [0]},
            **more,
        }
    )


class Flaky:
    """A provider failing its first ``failures`` requests with ``error``."""

    def __init__(self, failures: int, error: ProviderError) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def complete(self, request: ChatRequest) -> Reply:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return Reply("ünïcode ✓ 42", "stop", 12, 3, None, 0.01)


CELL = Cell(
    model="m",
    model_identity="{}",
    generation="{}",
    probe="recall",
    probe_params="{}",
    filler="essays",
    filler_spec="{}",
    placement="even",
    region="all",
    prompt_version="1",
    length=500,
    length_unit="chars",
    needle_count=1,
    repeat=0,
    seed=1,
)
REQUEST = ChatRequest((Message("user", "q?"),), 10)


def runtime(provider: Flaky) -> Runtime:
    return Runtime(providers={"m": provider}, contexts=None)  # type: ignore[arg-type, dict-item]


async def test_a_retryable_error_is_tried_again_and_the_reply_kept_until_forgotten(
    tmp_path: Path,
) -> None:
    busy = ProviderError("rate_limit", "429 Too Many Requests", retryable=True, status=429)
    provider = Flaky(2, busy)
    with running(runtime(provider)) as live:
        asker = Asker(config(), tmp_path, "e1")
        reply = await asker.ask("m", CELL, REQUEST, "cell")
        assert isinstance(reply, Reply) and reply.text == "ünïcode ✓ 42"
        assert provider.calls == 3 and live.attempts[CELL.cell_id] == 3
    kept = list((tmp_path / "replies").rglob("*.pickle"))
    assert len(kept) == 1

    # A run killed before the answer was stored: the next run of the epoch reads the reply.
    again = Flaky(0, busy)
    with running(runtime(again)) as live:
        later = Asker(config(), tmp_path, "e1")
        assert await later.ask("m", CELL, REQUEST, "cell") == reply
        assert again.calls == 0 and live.attempts[CELL.cell_id] == 0
        assert later.spend.tokens == 15  # the kept reply's cost is this run's to count
        # Another epoch, or a cell sent again on purpose, asks afresh.
        assert isinstance(await later.ask("m", CELL, REQUEST, "cell", "judge:j"), Reply)
        assert again.calls == 1
        resent = Asker(config(), tmp_path, "e1", resend=("run-2", frozenset({CELL.cell_id})))
        assert isinstance(await resent.ask("m", CELL, REQUEST, "cell"), Reply)
        assert again.calls == 2
        await later.forget([CELL.cell_id])
        await resent.forget([CELL.cell_id])
    assert not list((tmp_path / "replies").rglob("*.pickle"))


async def test_errors_end_as_the_outcome_after_the_last_try_or_at_once(tmp_path: Path) -> None:
    busy = ProviderError("server_error", "500", retryable=True, status=500)
    provider = Flaky(10, busy)
    with running(runtime(provider)) as live:
        outcome = await Asker(config(), tmp_path, "e").ask("m", CELL, REQUEST, "cell")
        assert outcome is busy and provider.calls == 4 and live.attempts[CELL.cell_id] == 4
    refused = ProviderError("bad_request", "400", retryable=False, status=400)
    provider = Flaky(10, refused)
    with running(runtime(provider)):
        outcome = await Asker(config(), tmp_path, "e").ask("m", CELL, REQUEST, "cell")
        assert outcome is refused and provider.calls == 1
    assert not list((tmp_path / "replies").rglob("*.pickle"))  # no reply, nothing kept


async def test_a_spent_budget_sends_nothing(tmp_path: Path) -> None:
    provider = Flaky(0, ProviderError("x", "x"))
    with running(runtime(provider)):
        asker = Asker(config(budget={"tokens": 10}), tmp_path, "e")
        assert isinstance(await asker.ask("m", CELL, REQUEST, "cell"), Reply)  # 15 tokens
        assert await asker.ask("m", CELL, REQUEST, "cell", "judge:j") is UNSENT
        assert provider.calls == 1


def test_back_off_reads_the_list_as_prefect_does() -> None:
    assert [retry_delay([1, 5], attempt) for attempt in range(4)] == [1, 5, 5, 5]
    assert retry_delay([], 3) == 0.0


def test_a_reply_half_written_by_a_killed_run_is_dropped_when_the_warehouse_opens(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    from needlescope.warehouse.store import Warehouse

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    store = Warehouse(tmp_path / "wh").ensure()
    folder = store.root / "replies" / "e"
    folder.mkdir(parents=True)
    dead = folder / f"c1.answer.pickle.{int(gone.stdout)}.partial"
    live = folder / f"c2.answer.pickle.{os.getpid()}.partial"  # a write in progress
    kept = folder / "c3.answer.pickle"
    for path in (dead, live, kept):
        path.write_bytes(b"x")
    store.ensure()  # as each run opens it
    assert sorted(p.name for p in folder.iterdir()) == sorted([live.name, kept.name])
