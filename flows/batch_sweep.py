"""One model's share of a sweep through its provider's batch API (``batch:`` in its config):
claim the cells, build their prompts, submit them as batches, poll, collect, grade, store.

Each step is made safe against a kill (warehouse/store/batches.py keeps the records):
- the cells' rows are stored, then the intent is written, the cells passing from the run's
  lease to the intent, then the batch is created; its id is written when the create returns;
- a run first adopts the open records of its models (one collector at a time): an intent
  without a batch id is matched to the provider's batches (by tag; Anthropic's, which keep
  none, by creation time and request count, confirmed by the results' custom ids), and only
  an intent matched to none gives its cells back to be sent;
- results are read once the batch has ended; answers the warehouse already holds (a kill
  after they were stored) are not stored again; the record is closed after its answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from needlescope.errors import ProviderError
from needlescope.flows.batch_wait import ANSWER, BatchWaiting
from needlescope.grid import Cell
from needlescope.probes.base import Context
from needlescope.providers.batch import batch_client, content_sha256, created_batch
from needlescope.providers.caching import prompt_order
from needlescope.tasks.runtime import current
from needlescope.warehouse.store.batches import BatchBook, BatchRecord, new_intent

MATCH_SLACK_S = 300  # clock skew allowed between this machine and the provider's stamps
BODY_OVERHEAD = 64 * 1024  # bytes of a batch's input besides its requests
UNTAGGED = "anthropic"  # the provider whose batches keep no tag (no metadata, no name)


def refused(error: ProviderError) -> bool:
    """A create the provider answered with a refusal (a 4xx but a timeout, conflict or rate
    limit): it made no batch."""
    status = error.status
    return status is not None and 400 <= status < 500 and status not in (408, 409, 429)


class BatchModelSweep(BatchWaiting):
    """A model sweep whose requests go in provider batches (see the module docstring)."""

    rerun = False

    def batching(self, grid: dict[str, Cell], rerun: bool) -> BatchModelSweep:
        """``grid``: every cell of the config by id (a batch adopted from another run or
        epoch names only ids); ``rerun``: a rerun's run (``rerun: sync`` sends one by one)."""
        self.grid, self.rerun = grid, rerun
        return self

    async def run(self, cells: list[Cell], only_context: bool) -> None:
        if only_context or self.claims is None:
            await super().run(cells, only_context)
            return
        model = self.config.model(self.model)
        assert model.batch is not None
        self.settings = model.batch
        self.reserved = dict[str, tuple[int, float]]()
        self.seen = dict[str, dict[str, Any]]()
        self.client = batch_client(current().providers[self.model])
        self.book = BatchBook(self.claims)
        heartbeat = asyncio.create_task(self._renew())
        try:
            pending, busy = await self._adopt()
            todo = [c for c in cells if c.cell_id not in busy]
            if self.rerun and self.settings.rerun == "sync":
                await super().run(todo, only_context)
            else:
                pending += await self._submit_all(todo)
            self.all_built.set()
            await self._wait(pending)
        finally:
            self.all_built.set()
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await asyncio.to_thread(self.book.hand_over)

    # --- adopting what earlier runs left ---------------------------------------------------

    async def _adopt(self) -> tuple[list[BatchRecord], set[str]]:
        """The open records this run collects, and the cells of every open record (none of
        them is sent again)."""
        records = await asyncio.to_thread(self.book.records, self.model)
        adopted: list[BatchRecord] = []
        busy: set[str] = set()
        for record in records:
            if not await asyncio.to_thread(self.book.adopt, record.intent):
                self.in_batches += len(record.cells)
                busy.update(record.cells)
                self.logger.info(
                    "batch %s (%d cells) is collected by another run",
                    record.batch_id or record.intent,
                    len(record.cells),
                )
                continue
            if record.batch_id is None and not await self._match(record):
                # Never created: its cells are this run's again, to send.
                back = await asyncio.to_thread(self.book.unsent, record.intent)
                self.logger.info(
                    "batch intent %s was never created: %d cells to send", record.intent, len(back)
                )
                continue
            busy.update(record.cells)
            adopted.append(record)
            self.logger.info(
                "batch %s (%d cells, epoch %s) taken over from run %s",
                record.batch_id,
                len(record.cells),
                record.epoch,
                record.run_id,
            )
        return adopted, busy

    async def _match(self, record: BatchRecord) -> bool:
        """Find the provider's batch of an intent written before a create whose answer was
        never read (a kill, a lost connection); write its id when found."""
        listed = await self.client.listed(since=record.intended - MATCH_SLACK_S)
        known = await asyncio.to_thread(self.book.batch_ids)
        candidates = [s for s in listed if s.batch_id not in known | set(record.excluded)]
        found = created_batch(
            candidates,
            tag=None if record.provider == UNTAGGED else record.intent,
            request_count=len(record.cells),
            since=record.intended - MATCH_SLACK_S,
        )
        if found is None:
            return False
        await asyncio.to_thread(
            self.book.created, record.intent, found.batch_id, found.status, found.counts
        )
        record.batch_id = found.batch_id
        return True

    # --- submitting ------------------------------------------------------------------------

    async def _submit_all(self, cells: list[Cell]) -> list[BatchRecord]:
        """Claim, build and submit ``cells`` a sweep batch at a time; the records submitted."""
        records: list[BatchRecord] = []
        size = self.config.batch_size
        contexts: list[Context] = []
        for start in range(0, len(cells), size):
            contexts += await self._built(cells[start : start + size])
        if self.config.model(self.model).cache == "auto":
            contexts = [contexts[i] for i in prompt_order([c.messages for c in contexts])]
            self.mark_cache(contexts, batched=True)
        for group in self._split(contexts):
            if (record := await self._submit(group)) is not None:
                records.append(record)
        return records

    async def _built(self, batch: list[Cell]) -> list[Context]:
        """The claimed cells' contexts, their rows stored."""
        built = await self._claimed_and_built(batch)
        if built is None:
            return []
        await self._store_cells(built.contexts, built, keep_prompt=self.config.save_prompts)
        return built.contexts

    def _split(self, contexts: list[Context]) -> list[list[Context]]:
        """Groups within the provider's limits and the config's ``max_requests``."""
        limits = self.client.limits
        most = min(self.settings.max_requests or limits.max_requests, limits.max_requests)
        groups: list[list[Context]] = []
        group: list[Context] = []
        size = BODY_OVERHEAD
        for context in contexts:
            item = self._item(context)
            grows = self.client.request_bytes(item)
            if group and (len(group) >= most or size + grows > limits.max_bytes):
                groups.append(group)
                group, size = [], BODY_OVERHEAD
            group.append(context)
            size += grows
        return [*groups, group] if group else groups

    async def _worst_case(self, contexts: list[Context]) -> tuple[int, float]:
        """Tokens and dollars the group may cost at most: its prompts and every max token."""
        builder = current().contexts
        price = self.config.model(self.model).price
        tokens = usd = 0.0
        for context in contexts:
            prompt = await builder.planned_tokens(self.model, context)
            prompt = prompt if prompt is not None else len(context.prompt_text)
            tokens += prompt + context.max_tokens
            if price is not None:
                usd += price.cost(prompt, context.max_tokens, discounted=True) or 0.0
        return int(tokens), usd

    async def _submit(self, group: list[Context]) -> BatchRecord | None:
        spend = self.asker.spend
        tokens, usd = await self._worst_case(group)
        if not spend.fits(tokens, usd):
            self.logger.warning(
                "batch of %d cells not submitted: its worst case (%d tokens, $%.4f) would pass"
                " the budget",
                len(group),
                tokens,
                usd,
            )
            self.unsent += len(group)
            await self._free([c.cell for c in group])
            return None
        items = [self._item(c) for c in group]
        intent = new_intent()
        ids = [c.cell.cell_id for c in group]
        sha = content_sha256(items)
        provider = self.config.model(self.model).provider
        kept = await asyncio.to_thread(
            self.book.intend, intent, self.epoch, self.model, provider, ids, sha
        )
        if len(kept) < len(ids):  # leases lapsed to another run meanwhile: theirs now
            lost = len(ids) - len(kept)
            self.elsewhere += lost
            self.logger.warning("%d cells' claims went to another run before submission", lost)
            items = [i for i in items if i.custom_id[len(ANSWER) :] in set(kept)]
            if not items:
                return None
        spend.reserve(tokens, usd)
        self.reserved[intent] = (tokens, usd)
        try:
            state = await self.client.submit(items, intent)
        except ProviderError as error:
            if refused(error):  # the provider said no: nothing was created
                await asyncio.to_thread(self.book.unsent, intent)
            # Otherwise the create may still have happened: the next run matches the intent.
            raise
        await asyncio.to_thread(
            self.book.created, intent, state.batch_id, state.status, state.counts
        )
        self.logger.info(
            "batch %s submitted: %d requests to %s", state.batch_id, len(items), self.model
        )
        cell_ids = [i.custom_id[len(ANSWER) :] for i in items]
        return BatchRecord(
            intent,
            self.epoch,
            self.model,
            provider,
            cell_ids,
            sha,
            0.0,
            state.batch_id,
            "open",
            self.run_id,
        )

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.config.claim_timeout_s / 4)
            with contextlib.suppress(Exception):  # a busy claims file: the next beat tries again
                await asyncio.to_thread(self.book.renew)
