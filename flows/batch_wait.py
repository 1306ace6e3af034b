"""Waiting on a batch model's open provider batches and collecting each once it has ended:
its results read per custom id, its answers judged, graded and stored like synchronous ones
(each with its ``batch_id``), its record closed after them (flows/batch_sweep.py submits)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from prefect.artifacts import acreate_table_artifact

from needlescope.config import BatchSettings
from needlescope.errors import ProviderError
from needlescope.flows.model_sweep import ModelSweep
from needlescope.grid import Cell
from needlescope.probes.base import Context
from needlescope.providers.base import Reply
from needlescope.providers.batch import (
    BATCH_FAILED,
    BatchClient,
    BatchRequest,
    BatchState,
    counts_text,
)
from needlescope.tasks.query import Answer, request_for
from needlescope.tasks.runtime import current
from needlescope.warehouse.store.batches import BatchBook, BatchRecord

ANSWER = "answer-"  # a request's custom id: its purpose, then its cell id


def custom_id(cell_id: str) -> str:
    return f"{ANSWER}{cell_id}"


class BatchWaiting(ModelSweep):
    """The waiting half of a batch model's sweep (see the module docstring)."""

    grid: dict[str, Cell]
    settings: BatchSettings
    client: BatchClient
    book: BatchBook
    reserved: dict[str, tuple[int, float]]  # intent -> its worst case, while it is open
    seen: dict[str, dict[str, Any]]  # intent -> its last poll's status and counts

    def _item(self, context: Context) -> BatchRequest:
        cell_id = context.cell.cell_id
        mark = self.asker.cache_marks.get(cell_id)
        return BatchRequest(custom_id(cell_id), request_for(context, self.config, mark))

    async def _wait(self, records: list[BatchRecord]) -> None:
        """Poll the open batches every ``poll_s`` (no request slot, no thread is held), each
        collected once it has ended; past ``wait_s`` the rest are left to the next run."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.wait_s
        pending = list(records)
        while pending:
            still: list[BatchRecord] = []
            for record in pending:
                if not await self._polled(record):
                    still.append(record)
            pending = still
            self.progress.batches(self.model, self._open_note(pending))
            if not pending or loop.time() >= deadline:
                break
            self.logger.info("waiting on %d batches of %s", len(pending), self.model)
            await asyncio.sleep(self.settings.poll_s)
        self.waiting_batches = len(pending)
        for record in pending:
            self.in_batches += len(record.cells)
            self._release_reserve(record)
        if records:
            await self._artifact(records, pending)

    def _open_note(self, pending: list[BatchRecord]) -> str:
        """ "2 batches open: 40 processing, 24 succeeded" (the counts of their last polls)."""
        if not pending:
            return ""
        counts: dict[str, int] = {}
        for record in pending:
            for key, value in self.seen.get(record.intent, {}).items():
                if key != "status" and isinstance(value, int):
                    counts[key] = counts.get(key, 0) + value
        shown = counts_text(counts)
        return f"{len(pending)} batches open" + (f": {shown}" if shown else "")

    async def _artifact(self, records: list[BatchRecord], pending: list[BatchRecord]) -> None:
        """The run's batches of this model, as the flow run's artifact in the UI."""
        table = [
            {
                "batch": r.batch_id,
                "epoch": r.epoch,
                "cells": len(r.cells),
                **self.seen.get(r.intent, {}),
            }
            for r in records
        ]
        key = "batches-" + re.sub(r"[^a-z0-9-]+", "-", self.model.lower())
        await acreate_table_artifact(
            table,
            key=key[:100],
            description=f"waiting on {len(pending)} batches of {self.model}"
            if pending
            else f"every batch of {self.model} collected",
        )

    async def _polled(self, record: BatchRecord) -> bool:
        """Look at one batch; collect it if it has ended. Whether it is done with (a failure
        the provider may not repeat, a 429 or a 5xx, is tried again at the next poll)."""
        assert record.batch_id is not None
        try:
            return await self._poll(record)
        except ProviderError as error:
            if not error.retryable:
                raise
            self.logger.warning(
                "batch %s: %s; tried again at the next poll", record.batch_id, error
            )
            return False

    async def _poll(self, record: BatchRecord) -> bool:
        assert record.batch_id is not None
        state = await self.client.state(record.batch_id)
        await asyncio.to_thread(self.book.polled, record.intent, state.status, state.counts)
        self.seen[record.intent] = {"status": state.status, **state.counts}
        counts = counts_text(state.counts)
        self.logger.info(
            "batch %s (%s): %s", record.batch_id, state.status, counts or "no request done yet"
        )
        if not state.ended:
            return False
        await self._collect(record, state)
        return True

    async def _collect(self, record: BatchRecord, state: BatchState) -> None:
        assert record.batch_id is not None
        batch_id = record.batch_id
        cells = [self.grid[c] for c in record.cells if c in self.grid]
        missing = [c for c in record.cells if c not in self.grid]
        if missing:
            self.logger.warning(
                "batch %s: %d cells are no longer in the config; left unanswered",
                batch_id,
                len(missing),
            )
        stored = await asyncio.to_thread(
            self.warehouse.graded_cell_ids, record.epoch, list(record.cells)
        )
        todo = [c for c in cells if c.cell_id not in stored]
        contexts = (await self.build(self.model, todo)).contexts if todo else []
        current().contexts.forget(self.model, todo)
        items = [self._item(c) for c in contexts]
        remember = getattr(self.client, "remember", None)
        if remember is not None and items:
            remember(batch_id, items)  # the bodies' settings, for the replies' fingerprints
        results = {r.custom_id: r for r in await self.client.results(batch_id)}
        wanted = {custom_id(c) for c in record.cells}
        if results and not set(results) <= wanted:
            # Matched by time and size (Anthropic), but the answers are another batch's.
            self.logger.warning(
                "batch %s is not intent %s's: matched again", batch_id, record.intent
            )
            await asyncio.to_thread(self.book.exclude, record.intent, batch_id)
            return
        self._release_reserve(record)
        answers = [self._answer(c, results.get(custom_id(c.cell.cell_id)), state) for c in contexts]
        answers = list(await asyncio.gather(*(self._judged(a) for a in answers)))
        graded, failed = await self._stored_answers(answers, record.epoch) if answers else ([], [])
        failed += missing
        await asyncio.to_thread(self.book.collected, record.intent, [*graded, *stored], failed)
        self.elsewhere += len(stored)

    def _answer(self, context: Context, result: Any, state: BatchState) -> Answer:
        assert state.batch_id
        outcome: Reply | BaseException
        cost = None
        if result is not None and result.reply is not None:
            outcome = result.reply
            self.asker.spend.add(self.model, outcome, batched=True)
            cost = self.asker.spend.cost(self.model, outcome, batched=True)
        elif result is not None and result.error is not None:
            outcome = result.error
        else:
            why = state.error or f"batch {state.batch_id} ({state.status}) has no result for it"
            outcome = ProviderError(BATCH_FAILED, why)
        return Answer(context, outcome, 1, cost, batch_id=state.batch_id)

    def _release_reserve(self, record: BatchRecord) -> None:
        if (worst := self.reserved.pop(record.intent, None)) is not None:
            self.asker.spend.release(*worst)
