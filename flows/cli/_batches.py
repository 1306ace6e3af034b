"""``needlescope batches``: the provider batches a warehouse's sweeps submitted (its book, in
``claims.sqlite``), and ``--cancel`` for one of them (a fast path: Prefect is never imported).
A canceled batch is collected by the next run: its unrun requests become failed cells."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli._common import WarehouseOption, console, fail


def batches(
    warehouse: WarehouseOption = None,
    epoch: Annotated[str | None, typer.Option(help="Only this epoch's batches.")] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Collected and unsent batches too, not only open ones.")
    ] = False,
    cancel: Annotated[
        str | None,
        typer.Option(help="Cancel the batch with this id (the provider's); needs --config."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The sweep config whose model sent the batch."),
    ] = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """List the provider batches of the warehouse's sweeps; cancel one with --cancel."""
    from needlescope.warehouse.store import Warehouse

    store = Warehouse(warehouse)
    if not store.exists():
        raise fail(f"no warehouse at {store.root}")
    records = _records(store.root, epoch, every)
    if cancel is not None:
        record = next((r for r in records if r["batch_id"] == cancel), None)
        if record is None:
            raise fail(f"no open batch {cancel!r} in {store.root} (needlescope batches lists them)")
        if config is None:
            raise fail("--cancel needs --config: the config of the model that sent the batch")
        try:
            status = asyncio.run(_cancel(config, record["model"], cancel))
        except NeedlescopeError as exc:
            raise fail(str(exc)) from None
        console.print(f"batch {cancel}: {status}; the next run of the config collects it")
        return
    if output_format == "json":
        sys.stdout.write(json.dumps(records, indent=2) + "\n")
        return
    if output_format != "table":
        raise fail(f"--format {output_format!r}: use table or json")
    _print(records)


def _records(root: Path, epoch: str | None, every: bool) -> list[dict[str, Any]]:
    from needlescope.warehouse.store.batches import BatchBook
    from needlescope.warehouse.store.claims import CLAIMS_FILE, Claims

    if not (root / CLAIMS_FILE).exists():
        return []
    book = BatchBook(Claims(root, "batches-command", 60))
    return [
        {
            "batch_id": r.batch_id,
            "intent": r.intent,
            "model": r.model,
            "provider": r.provider,
            "epoch": r.epoch,
            "cells": len(r.cells),
            "status": r.status,
            "provider_status": r.provider_status,
            "counts": r.counts,
            "submitted": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(r.intended)),
            "run_id": r.run_id,
        }
        for r in book.records(open_only=not every)
        if epoch is None or r.epoch == epoch
    ]


async def _cancel(config_path: Path, model_name: str, batch_id: str) -> str:
    from needlescope.config import load_config
    from needlescope.providers.batch import batch_client
    from needlescope.providers.open import open_provider

    model = load_config(config_path).model(model_name)
    async with contextlib.AsyncExitStack() as stack:
        provider = await open_provider(stack, model, ctx_per_slot=0)
        state = await batch_client(provider).cancel(batch_id)
    return state.status


def _print(records: list[dict[str, Any]]) -> None:
    from needlescope.providers.batch import counts_text

    if not records:
        console.print("no open batches (--all lists the collected ones too)")
        return
    table = Table("batch", "model", "epoch", "cells", "status", "requests", "submitted")
    for r in records:
        counts = counts_text(r["counts"]) or "-"
        status = r["status"] + (f" ({r['provider_status']})" if r["provider_status"] else "")
        table.add_row(
            r["batch_id"] or f"{r['intent']} (not created yet)",
            r["model"],
            r["epoch"],
            str(r["cells"]),
            status,
            counts,
            r["submitted"],
        )
    console.print(table)
