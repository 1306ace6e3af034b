"""`needlescope batches` lists the warehouse's provider batches from its book and cancels one
at the provider (a fake OpenAI Batch API), each refusal one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from needlescope.flows.cli._app import app
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.batch import BatchRequest
from needlescope.providers.batch.openai import OpenAIBatches
from needlescope.providers.openai import OpenAIProvider
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.batches import BatchBook, new_intent
from needlescope.warehouse.store.claims import Claims
from tests.support.openai_batch_server import FakeOpenAIBatchServer


async def submit(url: str, tag: str) -> str:
    provider = OpenAIProvider(name="m", base_url=url, model="gpt-4o-mini", api_key="k")
    try:
        items = [
            BatchRequest(f"answer-c{i}", ChatRequest((Message("user", "hi"),))) for i in (1, 2)
        ]
        return (await OpenAIBatches(provider).submit(items, tag)).batch_id
    finally:
        await provider.aclose()


def test_batches_lists_the_book_and_cancels_at_the_provider(write_config, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    Warehouse(wh).ensure()
    runner = CliRunner()
    empty = runner.invoke(app, ["batches", "-w", str(wh)])
    assert empty.exit_code == 0 and "no open batches" in empty.output
    with FakeOpenAIBatchServer() as srv:
        claims = Claims(wh, "r1", 60)
        claims.take("e1", ["c1", "c2"])
        book = BatchBook(claims)
        intent = new_intent()
        book.intend(intent, "e1", "m", "openai", ["c1", "c2"], "sha")
        batch_id = asyncio.run(submit(srv.base_url, intent))
        book.created(intent, batch_id, "validating", {"processing": 2})

        listed = runner.invoke(app, ["batches", "-w", str(wh), "-f", "json"])
        assert listed.exit_code == 0, listed.output
        [record] = json.loads(listed.stdout)
        assert record["batch_id"] == batch_id and record["cells"] == 2
        assert (record["status"], record["epoch"], record["model"]) == ("open", "e1", "m")
        other_epoch = runner.invoke(app, ["batches", "-w", str(wh), "--epoch", "e2", "-f", "json"])
        assert json.loads(other_epoch.stdout) == []

        no_config = runner.invoke(app, ["batches", "-w", str(wh), "--cancel", batch_id])
        assert no_config.exit_code == 2 and "--cancel needs --config" in no_config.output
        unknown = runner.invoke(app, ["batches", "-w", str(wh), "--cancel", "batch_nope"])
        assert unknown.exit_code == 2 and "no open batch 'batch_nope'" in unknown.output

        config = write_config(
            f"name: c\nmodels: [{{name: m, provider: openai, base_url: '{srv.base_url}',"
            " model: gpt-4o-mini, batch: true}]\n"
            "probes: [{probe: goto, line_counts: [10], orders: [ordered]}]\n"
        )
        canceled = runner.invoke(
            app, ["batches", "-w", str(wh), "--cancel", batch_id, "-c", str(config)]
        )
        assert canceled.exit_code == 0, canceled.output
        assert "cancelling" in canceled.output
        assert srv.batches[batch_id].status in ("cancelling", "cancelled")
