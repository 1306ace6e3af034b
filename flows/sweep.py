"""The sweep flow: expand the grid, skip what the epoch has graded, query the rest, grade, store."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import Completed, Failed, State
from prefect.utilities.annotations import quote

from needlescope.cells import Cell, default_epoch, expand_with_probes, order_cells, shard_of
from needlescope.config import ProbeConfig, SweepConfig, load_config
from needlescope.errors import ConfigError, ProviderError
from needlescope.flows.asker import UNSENT, Asker, Unsent
from needlescope.flows.limits import active_limits
from needlescope.flows.progress import SINK, LogProgress, ProgressSink
from needlescope.flows.runtime import Built, SweepRuntime, fits_context, open_runtime
from needlescope.flows.secrets import secret_api_keys
from needlescope.probes.base import Context
from needlescope.providers.base import ChatRequest, Reply
from needlescope.providers.open import check_offline_lengths
from needlescope.providers.registry import CACHES_PREFIXES
from needlescope.tasks.grade import grade_answers, persist
from needlescope.tasks.prepare import build_prompts
from needlescope.tasks.query import ATTEMPTS, RATE_LIMITS
from needlescope.warehouse import rows as row_builders
from needlescope.warehouse.claims import Claims
from needlescope.warehouse.store import Warehouse, default_root


def helper_models(
    config: SweepConfig, cells: list[Cell], probe_of: dict[str, ProbeConfig]
) -> set[str]:
    """Models the cells to do need besides the ones under test: judges (embedders start apart)."""
    names: set[str] = set()
    for cell in cells:
        probe = probe_of[cell.cell_id]
        judge = getattr(probe, "judge", None)
        if judge:
            names.add(judge)
    return names


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def request_for(context: Context, config: SweepConfig) -> ChatRequest:
    generation = config.model(context.cell.model).generation
    return generation.request(context.messages, context.max_tokens)


class ModelSweep:
    """One model's share of a sweep, batch by batch: build, store cells, query, grade, store."""

    def __init__(
        self,
        runtime: SweepRuntime,
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
        self.runtime = runtime
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
        self.drop_reasons: list[str] = []
        self.waiting: list[Cell] = []  # cells another live run holds: looked at again later
        self.logger = get_run_logger()
        self.sort_by_prompt = False
        retry = runtime.config.retry
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
        model always has up to its ``concurrency`` requests in flight."""
        size = self.runtime.config.batch_size
        concurrency = self.runtime.config.model(self.model).concurrency
        # Enough batches that the model's slots stay full while whole batches finish.
        batches_in_flight = asyncio.Semaphore(-(-concurrency // size) + 2)

        async def one(batch: list[Cell]) -> None:
            async with batches_in_flight:
                if not only_context and self.asker.spend.exhausted():
                    self.unsent += len(batch)
                    return
                await self._batch(batch, only_context)

        await asyncio.gather(*(one(cells[i : i + size]) for i in range(0, len(cells), size)))
        while self.waiting:  # cells other runs held: theirs to finish, unless they give up
            await asyncio.sleep(claim_poll_s(self.runtime.config))
            waiting, self.waiting = self.waiting, []
            for start in range(0, len(waiting), size):
                await one(waiting[start : start + size])

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
        if graded:
            self.elsewhere += len(graded)
            self.progress.advance(len(graded), 0)
        mine = set(taken.mine) - graded
        return [c for c in batch if c.cell_id in mine]

    async def _free(self, cells: list[Cell]) -> None:
        if self.claims is not None and cells:
            ids = [c.cell_id for c in cells]
            await asyncio.to_thread(self.claims.finish, self.epoch, (), ids)

    async def _batch(self, batch: list[Cell], only_context: bool) -> None:
        if self.claims is not None:
            batch = await self._claim(batch)
            if not batch:
                return
        built = await self.build(self.model, batch)
        self.runtime.forget(self.model, batch)
        for cell, reason in built.unbuildable:
            self.logger.warning("cell %s dropped: %s", cell.label, reason)
            if not self.drop_reasons:  # one example for the summary
                self.drop_reasons.append(reason)
        self.dropped += len(built.unbuildable)
        await self._free([cell for cell, _ in built.unbuildable])
        if built.failed:
            await self._record_build_failures(built.failed)
        contexts = built.contexts
        if self.sort_by_prompt:
            contexts = sorted(contexts, key=lambda c: [m.content for m in c.messages])
        await self._store_cells(
            contexts, built, keep_prompt=only_context or self.runtime.config.save_prompts
        )
        if not only_context:
            await self._query_and_grade(contexts)

    async def _store_cells(self, contexts: list[Context], built: Built, keep_prompt: bool) -> None:
        rows = []
        for context in contexts:
            if context.cell.cell_id in self.known_cells and not keep_prompt:
                continue
            measured = built.measured[context.cell.cell_id]
            rows.append(
                row_builders.cell_row(
                    context,
                    self.run_id,
                    haystack_length=measured.haystack_length,
                    planned_tokens=measured.planned_tokens,
                    keep_prompt=keep_prompt,
                    length_basis=self.runtime.length_basis(self.model, context),
                    length=measured.length,
                )
            )
        if rows:
            await self._persist("cells", rows)
            self.known_cells.update(row["cell_id"] for row in rows)

    async def _record_build_failures(self, failed: list[tuple[Cell, ProviderError]]) -> None:
        """Cells whose prompt could not be built are failed cells: kept, and retried next run."""
        for cell, error in failed:
            self.logger.warning("cell %s failed while building its prompt: %s", cell.label, error)
        await self._persist(
            "cells", [row_builders.bare_cell_row(c, self.run_id) for c, _ in failed]
        )
        errors = [row_builders.error_row(c, e, self.run_id, self.epoch, 0) for c, e in failed]
        await self._persist("answers", errors)
        await self._free([c for c, _ in failed])
        self.failed += len(failed)
        self.progress.advance(0, len(failed))

    async def _persist(self, table: str, rows: list[dict[str, Any]]) -> None:
        """One file per probe: the folders are parquet/<table>/<probe>/<model>/."""
        by_probe: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_probe.setdefault(row["probe"], []).append(row)
        for probe, probe_rows in by_probe.items():
            # quote(): Prefect need not walk thousands of row dicts looking for futures.
            await persist(str(self.warehouse.root), table, quote(probe_rows), [probe, self.model])

    async def _ask(self, context: Context) -> Reply | BaseException | Unsent:
        request = request_for(context, self.runtime.config)
        return await self.asker.ask(self.model, context.cell, request, context.cell.label)

    async def _judge(
        self, context: Context, outcome: Reply | BaseException | Unsent
    ) -> dict[str, Any] | None:
        """A judge model's verdict on an answer, for probes configured with a judge."""
        probe = self.probe_of.get(context.cell.cell_id)
        judge_name = getattr(probe, "judge", None)
        if judge_name is None or not isinstance(outcome, Reply):
            return None
        from needlescope.judge import judge

        prompt = getattr(probe, "judge_prompt", "judge-v1")

        async def ask(request: ChatRequest, attempt: int) -> Reply | str:
            # Each try is a task run of its own (its own cache key): a rerun keeps the verdict.
            purpose = f"judge:{judge_name}" + (f":try{attempt}" if attempt > 1 else "")
            label = f"judge {judge_name} · {context.cell.label}"
            reply = await self.asker.ask(judge_name, context.cell, request, label, purpose)
            if isinstance(reply, Unsent):
                return "the budget was spent"
            return reply if isinstance(reply, Reply) else str(reply)

        return await judge(
            ask,
            prompt,
            context.expected,
            outcome.text,
            model=judge_name,
            rubric=self.runtime.rubric(probe),
            max_tokens=self.runtime.config.model(judge_name).generation.answer_tokens,
        )

    async def _query_and_grade(self, contexts: list[Context]) -> None:
        asked = await asyncio.gather(*(self._ask(c) for c in contexts))
        sent = [(c, o) for c, o in zip(contexts, asked, strict=True) if not isinstance(o, Unsent)]
        self.unsent += len(contexts) - len(sent)
        await self._free([c.cell for c, o in zip(contexts, asked, strict=True) if o is UNSENT])
        if self.claims is not None and sent:
            # A claim that lapsed while this run stalled may have gone to another run, which
            # answers that cell: this run's answer is not stored (exactly once).
            held = await asyncio.to_thread(
                self.claims.held, self.epoch, [c.cell.cell_id for c, _ in sent]
            )
            for context, _ in sent:
                if context.cell.cell_id not in held:
                    self.logger.warning(
                        "cell %s: its claim went to another run", context.cell.label
                    )
                    self.elsewhere += 1
            sent = [(c, o) for c, o in sent if c.cell.cell_id in held]
        if not sent:
            return
        contexts = [c for c, _ in sent]
        outcomes = [o for _, o in sent]
        pairs = zip(contexts, outcomes, strict=True)
        verdicts = await asyncio.gather(*(self._judge(c, o) for c, o in pairs))
        attempts = [ATTEMPTS.get(c.cell.cell_id, 0) for c in contexts]
        batch = await grade_answers(
            quote(contexts), quote(outcomes), attempts, verdicts, self.run_id, self.epoch
        )
        # Analysis rows first: an answer is what marks a cell done, so it is written last.
        for table, table_rows in batch.tables.items():
            if table != "answers":
                await self._persist(table, table_rows)
        for row, outcome in zip(batch.tables["answers"], outcomes, strict=True):
            if isinstance(outcome, Reply):
                row["cost_usd"] = self.asker.spend.cost(self.model, outcome)
        await self._persist("answers", batch.tables["answers"])
        rows = batch.tables["answers"]
        if self.claims is not None:
            await asyncio.to_thread(
                self.claims.finish,
                self.epoch,
                [row["cell_id"] for row in rows if not row.get("error_kind")],
                [row["cell_id"] for row in rows if row.get("error_kind")],
            )
        failed = sum(1 for row in rows if row.get("error_kind"))
        self.failed += failed
        self.graded += len(rows) - failed
        tokens = sum(
            (o.prompt_tokens or 0) + (o.completion_tokens or 0)
            for o in outcomes
            if isinstance(o, Reply)
        )
        self.progress.advance(len(rows) - failed, failed, tokens)


def _run_row(
    run_id: str, epoch: str, config: SweepConfig, event: str, **counts: Any
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "epoch": epoch,
        "event": event,
        "at": datetime.now(UTC),
        "config_name": config.name,
        # Keys live in the environment, never in the config, so the config is safe to store.
        "config_json": config.model_dump_json(),
        "needlescope_version": version("needlescope"),
        "flow_run_id": str(flow_run.id) if flow_run.id else None,
        **counts,
    }


def compact_warehouse(store: Warehouse, logger: Any) -> None:
    """Merge the warehouse's small files (this run's and others'). Never fails the sweep."""
    from needlescope.warehouse.compaction import compact

    try:
        done = compact(store.root)
    except Exception as exc:  # the answers are stored; the files only stay small
        logger.warning("warehouse compaction skipped: %s", exc)
        return
    if done.files_merged or done.files_deleted:
        logger.info(
            "warehouse compacted: %d files merged, %d merged earlier deleted (%.1f s)",
            done.files_merged,
            done.files_deleted,
            done.seconds,
        )


def epoch_drift(
    store: Warehouse, epoch: str, seed: int, logger: Any
) -> list[dict[str, Any]] | None:
    """Each model's recall accuracy against its previous epoch on the same cells; a change
    whose paired bootstrap 95% interval excludes zero is flagged. Never fails the sweep."""
    from needlescope.warehouse.significance import drift_summary

    try:
        con = store.connect()
        try:
            drift = drift_summary(con, epoch, seed)
        finally:
            con.close()
    except Exception as exc:  # the answers are stored; a failed comparison only loses a note
        logger.warning("drift against the previous epoch not computed: %s", exc)
        return None
    for entry in drift:
        if entry["drift"]:
            logger.warning(
                "drift: %s mean accuracy %.1f -> %.1f (%+.1f, 95%% interval %+.1f to %+.1f) "
                "against epoch %s on %d paired answers",
                entry["model"],
                entry["mean_previous"],
                entry["mean_now"],
                entry["diff"],
                entry["lo"],
                entry["hi"],
                entry["previous"],
                entry["n_pairs"],
            )
    return drift


def uses_prefix_order(config: SweepConfig, model: str) -> bool:
    order = config.cell_order
    if order == "auto":
        return config.model(model).provider in CACHES_PREFIXES
    return order == "prefix"


def resolve_epoch(config: SweepConfig, store: Warehouse, explicit: str | None) -> str:
    """The given epoch; else the one an earlier attempt of this flow run used (a retry from
    the UI finishes that epoch, even after midnight); else the config's for the scheduled date."""
    if explicit:
        return explicit
    if flow_run.id and (earlier := store.epoch_of_flow_run(str(flow_run.id))):
        return earlier
    return default_epoch(config, now=flow_run.scheduled_start_time)


def select_cells(
    cells: list[Cell], only_cells: Collection[str] | None, shard: int | None, shards: int
) -> list[Cell]:
    """The cells this flow run is for: a rerun's chosen cells, one shard of a split sweep."""
    if only_cells is not None:
        wanted = set(only_cells)
        cells = [c for c in cells if c.cell_id in wanted]
    if shard is not None and shards > 1:
        cells = [c for c in cells if shard_of(c.cell_id, shards) == shard]
    return cells


async def run_sweep(
    config: SweepConfig,
    *,
    epoch: str | None = None,
    warehouse: str | None = None,
    only_context: bool = False,
    only_cells: Collection[str] | None = None,
    shard: int | None = None,
    shards: int = 1,
    note: str | None = None,
    resend: Collection[str] = (),
) -> State:
    """``resend``: cells sent again although the epoch has their answer (rerun --validity);
    the new answer supersedes the old in ``results``, both stay in ``answers``."""
    logger = get_run_logger()
    if only_context:
        check_offline_lengths(config)
    store = Warehouse(Path(warehouse) if warehouse else config.warehouse or default_root()).ensure()
    epoch = resolve_epoch(config, store, epoch)
    run_id = new_run_id()
    probe_of_cell = expand_with_probes(config)
    cells = select_cells(list(probe_of_cell), only_cells, shard, shards)
    probe_of = {cell.cell_id: probe for cell, probe in probe_of_cell.items()}
    kept = [c for c in cells if fits_context(c, config.model(c.model))]
    dropped = len(cells) - len(kept)
    if dropped:
        logger.warning("%d cells dropped: longer than their model's context window", dropped)
    done = set() if only_context else store.graded_cell_ids(epoch) - set(resend)
    todo = [c for c in kept if c.cell_id not in done]
    skipped = len(kept) - len(todo)
    if shard is not None and shards > 1:
        note = f"shard {shard + 1} of {shards}" + (f"; {note}" if note else "")
    store.append(
        "runs",
        [
            _run_row(
                run_id,
                epoch,
                config,
                "start",
                cells_total=len(cells),
                cells_skipped=skipped,
                cells_dropped=dropped,
                note=note,
            )
        ],
    )
    logger.info(
        "run %s, epoch %s: %d cells, %d to do, warehouse %s",
        run_id,
        epoch,
        len(cells),
        len(todo),
        store.root,
    )
    progress = SINK[-1] if SINK else LogProgress(logger)
    progress.start(len(todo), skipped)

    by_model: dict[str, list[Cell]] = {}
    for cell in todo:
        by_model.setdefault(cell.model, []).append(cell)
    prefix_ordered = {m: uses_prefix_order(config, m) for m in by_model}
    for model, model_cells in by_model.items():
        order = "prefix" if prefix_ordered[model] else config.cell_order.replace("auto", "grid")
        by_model[model] = order_cells(model_cells, order, config.seed)
    sweeps: list[ModelSweep] = []
    # Prompts only (--only-context) grade nothing: no claim is needed.
    claims = None if only_context else Claims(store.root, run_id, config.claim_timeout_s, resend)
    heartbeat = asyncio.create_task(renew_claims(claims, logger)) if claims else None
    try:
        if by_model:
            # Building prompts only: no judge, no key, no endpoint is needed.
            helpers = set() if only_context else helper_models(config, todo, probe_of)
            helpers -= set(by_model)
            models = set(by_model) | helpers
            keys = {} if only_context else await secret_api_keys(config, models)
            limits = await active_limits(config, models)
            RATE_LIMITS.update({m: lim.rate_limits for m, lim in limits.items() if lim.rate_limits})
            async with open_runtime(
                config, by_model, helpers, probe_of, keys, offline=only_context
            ) as runtime:
                known = store.known_cell_ids()
                asker = Asker(
                    config,
                    store.id,
                    epoch,
                    {m: lim.tags for m, lim in limits.items()},
                    resend=(run_id, frozenset(resend)) if resend else None,
                )
                sweeps = [
                    ModelSweep(
                        runtime,
                        store,
                        model,
                        run_id,
                        epoch,
                        progress,
                        known,
                        asker,
                        probe_of,
                        claims,
                    ).sorting_batches(prefix_ordered[model])
                    for model in by_model
                ]
                await asyncio.gather(*(s.run(by_model[s.model], only_context) for s in sweeps))
    except Exception as exc:
        store.append("runs", [_run_row(run_id, epoch, config, "end", note=f"aborted: {exc}"[:500])])
        raise
    finally:
        progress.finish()
        RATE_LIMITS.clear()
        if heartbeat is not None:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        if claims is not None:
            await asyncio.to_thread(claims.release_all)

    dropped += sum(s.dropped for s in sweeps)
    graded = sum(s.graded for s in sweeps)
    failed = sum(s.failed for s in sweeps)
    unsent = sum(s.unsent for s in sweeps)
    elsewhere = sum(s.elsewhere for s in sweeps)
    skipped += elsewhere
    if window_dropped := len(cells) - len(kept):
        reasons = [f"{window_dropped} longer than their model's context window"]
    else:
        reasons = []
    reasons += [r for s in sweeps for r in s.drop_reasons][:1]
    spend = sweeps[0].asker.spend if sweeps else None
    spent = {
        "spent_tokens": spend.tokens if spend else 0,
        "spent_usd": round(spend.usd, 6) if spend else 0.0,
    }
    summary = {
        "run_id": run_id,
        "epoch": epoch,
        "warehouse": str(store.root),
        "cells_total": len(cells),
        "cells_dropped": dropped,
        "cells_skipped": skipped,
        "cells_graded": graded,
        "cells_failed": failed,
        "cells_unsent": unsent,
        "cells_graded_elsewhere": elsewhere,
        **spent,
        "only_context": only_context,
    }
    notes = [f"budget spent: {unsent} cells left unsent"] if unsent else []
    if elsewhere:
        notes.append(f"{elsewhere} cells graded by another run of the epoch meanwhile (skipped)")
    nothing_measured = bool(cells) and dropped == len(cells)
    if nothing_measured:
        summary["nothing_measured"] = (
            f"all {len(cells)} cells were dropped ({'; e.g. '.join(reasons)})"
        )
        notes.append(f"nothing measured: {summary['nothing_measured']}")
    store.append(
        "runs",
        [
            _run_row(
                run_id,
                epoch,
                config,
                "end",
                cells_total=len(cells),
                cells_skipped=skipped,
                cells_dropped=dropped,
                cells_graded=graded,
                cells_failed=failed,
                cells_unsent=unsent,
                note="; ".join(notes) or None,
                **spent,
            )
        ],
    )
    if unsent:
        logger.warning("budget spent: %d cells left unsent for a later run", unsent)
    summary["drift"] = epoch_drift(store, epoch, config.seed, logger)
    if config.compact:
        compact_warehouse(store, logger)
    if not store.refresh_views_file():
        logger.warning("%s is open elsewhere; its views were not refreshed", store.db_path)
    message = json.dumps(summary)
    if failed:
        return Failed(message=f"{failed} cells failed: {message}", data=summary)
    if nothing_measured:
        return Failed(message=f"nothing measured: {message}", data=summary)
    return Completed(message=message, data=summary)


def claim_poll_s(config: SweepConfig) -> float:
    """How often a run looks again at cells another run holds."""
    return min(2.0, config.claim_timeout_s / 4)


async def renew_claims(claims: Claims, logger: Any) -> None:
    """The lease on every cell this run holds, renewed while the run lives: a request that
    takes minutes keeps its cell; a crashed run's cells lapse after the claim timeout."""
    while True:
        await asyncio.sleep(claims.timeout_s / 4)
        try:
            await asyncio.to_thread(claims.renew)
        except Exception as exc:  # a busy claims file: the next beat tries again
            logger.warning("claims not renewed: %s", exc)


@flow(name="sweep", log_prints=True)
async def sweep(
    config_path: str,
    epoch: str | None = None,
    warehouse: str | None = None,
    only_context: bool = False,
    shards: int = 1,
    shard: int | None = None,
) -> State:
    """Run a sweep config: every cell of the grid not yet graded in the epoch is queried once.

    With ``shards`` > 1 (and no ``shard``) the run splits the grid into that many flow runs of
    its own deployment, which the work pool's workers share; ``shard`` runs one part of it.
    """
    config = load_config(config_path)
    if shards < 1 or (shard is not None and not 0 <= shard < shards):
        raise ConfigError(f"shard {shard} of {shards}: need shards >= 1 and 0 <= shard < shards")
    if shards > 1 and shard is None:
        from needlescope.flows.fanout import fan_out

        return await fan_out(config, config_path, epoch, warehouse, only_context, shards)
    return await run_sweep(
        config,
        epoch=epoch,
        warehouse=warehouse,
        only_context=only_context,
        shard=shard,
        shards=shards,
    )
