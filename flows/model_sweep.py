"""One model's share of a sweep, batch by batch: claim its cells, build their prompts, store
the cells, ask the model (and a judge), grade, store the answers, release the claims.

An answer travels as a :class:`~needlescope.tasks.query.Answer` from the query to the grade
task, which turns each batch into the warehouse's rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from prefect import get_run_logger
from prefect.utilities.annotations import quote

from needlescope.config import ProbeConfig, SweepConfig
from needlescope.errors import ProviderError
from needlescope.flows.progress import ProgressSink
from needlescope.grid import Cell
from needlescope.probes.base import Context
from needlescope.providers.base import Reply
from needlescope.providers.caching import cache_marks
from needlescope.tasks.contexts import Built
from needlescope.tasks.grade import grade_answers
from needlescope.tasks.judging import judge_answer
from needlescope.tasks.persist import persist
from needlescope.tasks.prepare import build_prompts
from needlescope.tasks.query import UNSENT, Answer, Asker, Unsent, ask_batch
from needlescope.tasks.runtime import current
from needlescope.warehouse.store import Warehouse, rows
from needlescope.warehouse.store.claims import Claims


def claim_poll_s(config: SweepConfig) -> float:
    """How often a run looks again at cells another run holds."""
    return min(2.0, config.claim_timeout_s / 4)


class ModelSweep:
    """One model's cells of a sweep (see the module docstring); counts what became of them."""

    def __init__(
        self,
        config: SweepConfig,
        warehouse: Warehouse,
        model: str,
        run_id: str,
        epoch: str,
        progress: ProgressSink,
        known_cells: set[str],
        asker: Asker,
        probe_of: dict[str, ProbeConfig],
        claims: Claims | None = None,
    ) -> None:
        self.config = config
        self.warehouse = warehouse
        self.model = model
        self.run_id = run_id
        self.epoch = epoch
        self.progress = progress
        self.known_cells = known_cells
        self.asker = asker
        self.probe_of = probe_of
        self.claims = claims  # None: prompts only (--only-context), nothing is graded
        self.graded = self.failed = self.dropped = self.unsent = 0
        self.elsewhere = 0  # cells another run of the epoch graded while this one ran
        self.in_batches = 0  # cells left in provider batches still open (flows/batch_sweep.py)
        self.waiting_batches = 0  # this model's batches still open when the run ended
        self.drop_reasons: list[str] = []
        self.waiting: list[Cell] = []  # cells another live run holds: looked at again later
        self.logger = get_run_logger()
        self.sort_by_prompt = False
        # Set once every batch of the run's first pass is built: only requests are left.
        self.all_built = asyncio.Event()
        retry = config.retry
        self.build = build_prompts.with_options(
            retries=retry.retries, retry_delay_seconds=list(retry.backoff_s) or 0
        )

    def sorting_batches(self, on: bool) -> ModelSweep:
        """Send each batch in the order of its prompts' text: neighbours then share the
        longest prefix, which a prefix-caching server computes once."""
        self.sort_by_prompt = on
        return self

    async def run(self, cells: list[Cell], only_context: bool) -> None:
        """Batches overlap: while one batch waits on the model, the next is built, so the
        model always has up to its ``concurrency`` requests in flight. Each batch is built
        once the batch before it has its prompts: the first requests leave before the batches
        behind them are built."""
        size = self.config.batch_size
        concurrency = self.config.model(self.model).concurrency
        # Enough batches that the model's slots stay full while whole batches finish.
        batches_in_flight = asyncio.Semaphore(-(-concurrency // size) + 2)

        async def one(batch: list[Cell], after: asyncio.Event | None, built: asyncio.Event) -> None:
            try:
                async with batches_in_flight:
                    if after is not None:
                        await after.wait()
                    if not only_context and self.asker.spend.exhausted():
                        self.unsent += len(batch)
                        return
                    await self._batch(batch, only_context, built)
            finally:
                built.set()

        async def all_of(batches: list[list[Cell]]) -> None:
            built = [asyncio.Event() for _ in batches[:-1]] + [self.all_built]
            await asyncio.gather(
                *(
                    one(batch, built[i - 1] if i else None, built[i])
                    for i, batch in enumerate(batches)
                )
            )

        await all_of([cells[i : i + size] for i in range(0, len(cells), size)])
        self.all_built.set()  # no cells, or the run failed before the last was built
        while self.waiting:  # cells other runs held: theirs to finish, unless they give up
            await asyncio.sleep(claim_poll_s(self.config))
            waiting, self.waiting = self.waiting, []
            await all_of([waiting[i : i + size] for i in range(0, len(waiting), size)])

    async def _claim(self, batch: list[Cell]) -> list[Cell]:
        """The cells of ``batch`` this run claims; others are graded or held elsewhere."""
        assert self.claims is not None
        ids = [c.cell_id for c in batch]
        taken = await asyncio.to_thread(self.claims.take, self.epoch, ids)
        graded = set(taken.graded)
        # A crashed run may have stored the answer before it could say so (a cell resent on
        # purpose has an answer already: it is sent again).
        lapsed = [c for c in taken.lapsed if c not in self.claims.resend]
        if lapsed:
            stored = await asyncio.to_thread(self.warehouse.graded_cell_ids, self.epoch, lapsed)
            await asyncio.to_thread(self.claims.finish, self.epoch, sorted(stored))
            graded |= stored
        busy = set(taken.busy)
        self.waiting.extend(c for c in batch if c.cell_id in busy)
        if taken.batched:  # a provider's batch answers them; the run collecting it grades them
            self.in_batches += len(taken.batched)
        if graded:
            self.elsewhere += len(graded)
            self.progress.advance(len(graded), 0)
        mine = set(taken.mine) - graded
        return [c for c in batch if c.cell_id in mine]

    async def _free(self, cells: list[Cell]) -> None:
        if self.claims is not None and cells:
            ids = [c.cell_id for c in cells]
            await asyncio.to_thread(self.claims.finish, self.epoch, (), ids)

    async def _batch(
        self, batch: list[Cell], only_context: bool, built_event: asyncio.Event
    ) -> None:
        """``built_event`` is set once the batch's prompts are built: the next batch's turn."""
        built = await self._claimed_and_built(batch)
        if built is None:
            return
        contexts = built.contexts
        if self.sort_by_prompt:
            contexts = sorted(contexts, key=lambda c: [m.content for m in c.messages])
        self.mark_cache(contexts, batched=False)
        # The cells' rows are written while their requests are in flight; their answers only
        # after them (a cell's row comes before its answer).
        stored = asyncio.ensure_future(
            self._store_cells(contexts, built, keep_prompt=only_context or self.config.save_prompts)
        )
        built_event.set()
        try:
            if not only_context:
                await self._query_and_grade(contexts, stored)
        finally:
            await stored

    async def _claimed_and_built(self, batch: list[Cell]) -> Built | None:
        """The prompts of the cells of ``batch`` this run claims (None: it claims none); cells
        that cannot be built are dropped, or kept as failed rows when their build failed."""
        if self.claims is not None:
            batch = await self._claim(batch)
            if not batch:
                return None
        built = await self.build(self.model, batch)
        current().contexts.forget(self.model, batch)
        for cell, reason in built.unbuildable:
            self.logger.warning("cell %s dropped: %s", cell.label, reason)
            if not self.drop_reasons:  # one example for the summary
                self.drop_reasons.append(reason)
        self.dropped += len(built.unbuildable)
        await self._free([cell for cell, _ in built.unbuildable])
        if built.failed:
            await self._record_build_failures(built.failed)
        return built

    def mark_cache(self, contexts: list[Context], *, batched: bool) -> None:
        """``cache: auto``: the prefix each request marks for the provider's prompt cache."""
        model = self.config.model(self.model)
        if model.cache != "auto" or not contexts:
            return
        marks = cache_marks([c.messages for c in contexts], model, batched=batched)
        for context, mark in zip(contexts, marks, strict=True):
            if mark is not None:
                self.asker.cache_marks[context.cell.cell_id] = mark

    async def _store_cells(self, contexts: list[Context], built: Built, keep_prompt: bool) -> None:
        cell_rows = []
        builder = current().contexts
        for context in contexts:
            # A cell the warehouse knows is written again only when its fit changed (another
            # tokenizer): its latest row is what the next run checks its fit against.
            cell_id = context.cell.cell_id
            if cell_id in self.known_cells and not keep_prompt and cell_id not in builder.refitted:
                continue
            cell_rows.append(
                builder.cell_row(self.model, context, built, self.run_id, keep_prompt=keep_prompt)
            )
        if cell_rows:
            await self._persist("cells", cell_rows)
            self.known_cells.update(row["cell_id"] for row in cell_rows)

    async def _record_build_failures(self, failed: list[tuple[Cell, ProviderError]]) -> None:
        """Cells whose prompt could not be built are failed cells: kept, and retried next run."""
        for cell, error in failed:
            self.logger.warning("cell %s failed while building its prompt: %s", cell.label, error)
        await self._persist("cells", [rows.cell_row(c, self.run_id) for c, _ in failed])
        errors = [rows.error_row(c, e, self.run_id, self.epoch, 0) for c, e in failed]
        await self._persist("answers", errors)
        await self._free([c for c, _ in failed])
        self.failed += len(failed)
        self.progress.advance(0, len(failed))

    async def _persist(self, table: str, table_rows: list[dict[str, Any]]) -> None:
        """One file per probe: the folders are parquet/<table>/<probe>/<model>/."""
        by_probe: dict[str, list[dict[str, Any]]] = {}
        for row in table_rows:
            by_probe.setdefault(row["probe"], []).append(row)
        for probe, probe_rows in by_probe.items():
            await persist(str(self.warehouse.root), table, probe_rows, [probe, self.model])

    async def _held(self, answers: list[Answer]) -> list[Answer]:
        """The answers whose cells this run still holds: a claim that lapsed while this run
        stalled may have gone to another run, which answers that cell (exactly once)."""
        if self.claims is None or not answers:
            return answers
        ids = [a.context.cell.cell_id for a in answers]
        held = await asyncio.to_thread(self.claims.held, self.epoch, ids)
        for answer in answers:
            if answer.context.cell.cell_id not in held:
                self.logger.warning(
                    "cell %s: its claim went to another run", answer.context.cell.label
                )
                self.elsewhere += 1
        return [a for a in answers if a.context.cell.cell_id in held]

    async def _judged(self, answer: Answer) -> Answer:
        probe = self.probe_of.get(answer.context.cell.cell_id)
        if probe is not None:
            answer.verdict = await judge_answer(self.asker, answer, probe)
        return answer

    async def _query_and_grade(
        self, contexts: list[Context], cells_stored: asyncio.Future[None]
    ) -> None:
        asked = await ask_batch(self.asker, quote(contexts))
        answers = [a for a in asked if not isinstance(a, Unsent)]
        self.unsent += len(contexts) - len(answers)
        await self._free([c.cell for c, a in zip(contexts, asked, strict=True) if a is UNSENT])
        answers = await self._held(answers)
        if not answers:
            return
        answers = list(await asyncio.gather(*(self._judged(a) for a in answers)))
        graded, failed = await self._stored_answers(answers, self.epoch, cells_stored)
        if self.claims is not None:
            await asyncio.to_thread(self.claims.finish, self.epoch, graded, failed)

    async def _stored_answers(
        self, answers: list[Answer], epoch: str, cells_stored: Awaitable[None] | None = None
    ) -> tuple[list[str], list[str]]:
        """The answers graded and stored, once their cells' rows are (``cells_stored``); the
        cell ids graded and failed."""
        tables = await grade_answers(answers, self.run_id, epoch)
        if cells_stored is not None:
            await cells_stored
        # Analysis rows first: an answer is what marks a cell done, so it is written last.
        for table, table_rows in tables.items():
            if table != "answers":
                await self._persist(table, table_rows)
        answer_rows = tables["answers"]
        await self._persist("answers", answer_rows)
        graded = [row["cell_id"] for row in answer_rows if not row.get("error_kind")]
        failed = [row["cell_id"] for row in answer_rows if row.get("error_kind")]
        await self.asker.forget(graded + failed)
        self.failed += len(failed)
        self.graded += len(graded)
        tokens = sum(
            (a.outcome.prompt_tokens or 0) + (a.outcome.completion_tokens or 0)
            for a in answers
            if isinstance(a.outcome, Reply)
        )
        self.progress.advance(len(graded), len(failed), tokens)
        return graded, failed
