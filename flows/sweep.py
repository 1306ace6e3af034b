"""The sweep flow: expand the grid, skip what the epoch has graded, query the rest, grade, store.

``run_sweep`` plans the run (which cells, which epoch), opens the provider clients and the
tasks' runtime (``open_runtime``: tasks/runtime.py's one ContextVar), runs a
:class:`~needlescope.flows.model_sweep.ModelSweep` per model side by side, and writes the run's
``start`` and ``end`` rows with what became of its cells.
"""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import State

from needlescope.config import ProbeConfig, SweepConfig, load_config
from needlescope.errors import ConfigError
from needlescope.fitting import ProvenFit, RememberedFit, local_slot_size
from needlescope.flows.batch_sweep import BatchModelSweep
from needlescope.flows.build_check import check_cells, hosted_only, refuse_unbuildable
from needlescope.flows.limits import active_limits
from needlescope.flows.model_sweep import ModelSweep
from needlescope.flows.progress import (
    ArtifactProgress,
    LogProgress,
    ProgressSink,
    shown_progress,
)
from needlescope.flows.run_cells import Plan, helper_models, plan_run, uses_prefix_order
from needlescope.flows.run_end import finish_run
from needlescope.flows.secrets import secret_api_keys
from needlescope.flows.serving import local_serving
from needlescope.flows.tidy import Tidied, tidy_when_built
from needlescope.grid import Cell, default_epoch
from needlescope.providers.open import check_offline_lengths, open_provider
from needlescope.tasks.contexts import ContextBuilder
from needlescope.tasks.embedders import Embedders
from needlescope.tasks.query import Asker
from needlescope.tasks.runtime import Runtime, running
from needlescope.warehouse.store import Warehouse, default_root, rows
from needlescope.warehouse.store.batches import BatchBook
from needlescope.warehouse.store.claims import Claims


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _flow_run_id() -> str | None:
    return str(flow_run.id) if flow_run.id else None


def resolve_epoch(config: SweepConfig, store: Warehouse, explicit: str | None) -> str:
    """The given epoch; else the one an earlier attempt of this flow run used (a retry from
    the UI finishes that epoch, even after midnight); else the config's for the scheduled date."""
    if explicit:
        return explicit
    if flow_run.id and (earlier := store.epoch_of_flow_run(str(flow_run.id))):
        return earlier
    return default_epoch(config, now=flow_run.scheduled_start_time)


@contextlib.asynccontextmanager
async def open_runtime(
    config: SweepConfig,
    cells_by_model: dict[str, list[Cell]],
    helpers: Collection[str] = (),
    probe_of: dict[str, ProbeConfig] | None = None,
    api_keys: dict[str, str] | None = None,
    offline: bool = False,
    rate_limits: dict[str, list[str]] | None = None,
    remembered: dict[str, RememberedFit] | None = None,
    proven: dict[str, ProvenFit] | None = None,
) -> AsyncIterator[Runtime]:
    """Provider clients (and local servers) for the models under test and their helpers, in
    the tasks' runtime for the block; ``offline``: prompts are only built, nothing is sent;
    ``remembered``: the cells' fits the warehouse stores (checked before any search);
    ``proven``: fits the run's build check counted (taken as they are)."""
    keys = api_keys or {}
    async with contextlib.AsyncExitStack() as stack:
        providers = {
            name: await open_provider(
                stack,
                config.model(name),
                ctx_per_slot=local_slot_size(cells, config.model(name)),
                api_key=keys.get(name),
                offline=offline,
            )
            for name, cells in cells_by_model.items()
        }
        for name in sorted(helpers):
            model = config.model(name)
            providers[name] = await open_provider(
                stack, model, ctx_per_slot=local_slot_size([], model), api_key=keys.get(name)
            )
        builder = ContextBuilder(
            config,
            providers,
            probe_of=dict(probe_of or {}),
            embedders=Embedders(config, stack),
            remembered=dict(remembered or {}),
            proven=dict(proven or {}),
        )
        # Hashing a new GGUF file takes seconds per gigabyte: off the event loop.
        serving = {} if offline else await asyncio.to_thread(local_serving, providers)
        runtime = Runtime(providers, builder, rate_limits=dict(rate_limits or {}), serving=serving)
        with running(runtime):
            yield runtime


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
    checked: bool = False,
    rerun: bool = False,
) -> State:
    """``resend``: cells sent again although the epoch has their answer (rerun --validity);
    the new answer supersedes the old in ``results``, both stay in ``answers``; ``rerun``:
    a rerun's run (a batch model with ``rerun: sync`` sends its cells one by one). ``checked``:
    the command line has built the cells it could (flows/build_check.py); the run builds the
    rest (lengths a hosted API counts) before anything is written or sent."""
    logger = get_run_logger()
    if only_context:
        check_offline_lengths(config)
    store = Warehouse(Path(warehouse) if warehouse else config.warehouse or default_root()).ensure()
    epoch = resolve_epoch(config, store, epoch)
    run_id = new_run_id()
    done = set() if only_context else store.graded_cell_ids(epoch) - set(resend)
    plan = plan_run(config, done, only_cells, shard, shards)
    proven = await check_before_sending(
        config, plan, store, checked=checked, hosted=not only_context
    )
    if plan.window_dropped:
        logger.warning(
            "%d cells dropped: longer than their model's context window", plan.window_dropped
        )
    if shard is not None and shards > 1:
        note = f"shard {shard + 1} of {shards}" + (f"; {note}" if note else "")
    _write_start(config, store, run_id, epoch, plan, note, logger)
    progress = ArtifactProgress(shown_progress() or LogProgress(logger), epoch)
    progress.start(len(plan.todo), len(plan.kept) - len(plan.todo))
    # Prompts only (--only-context) grade nothing: no claim is needed.
    claims = None if only_context else Claims(store.root, run_id, config.claim_timeout_s, resend)
    if claims is not None:
        for model in await asyncio.to_thread(models_with_open_batches, config, claims):
            plan.by_model.setdefault(model, [])  # the run collects them, even with no cell to do
    run = _Run(config, store, run_id, epoch, progress, claims, proven, rerun=rerun)
    try:
        async with progress.updating(logger):
            sweeps = await run.claiming(plan, only_context, resend, logger)
            tidied = await run.tidying if run.tidying is not None else None
    finally:
        progress.finish()
        if run.tidying is not None:
            run.tidying.cancel()  # done by now, unless the run failed
    flow_run_id = _flow_run_id()
    return finish_run(
        config, store, run_id, epoch, plan, sweeps, only_context, logger, flow_run_id, tidied
    )


async def check_before_sending(
    config: SweepConfig, plan: Plan, store: Warehouse, *, checked: bool, hosted: bool
) -> dict[str, ProvenFit]:
    """Every cell to do built as its batch will build it (those the command line left, when
    it ``checked``): ConfigError, before anything is written or sent, if one cannot be. The
    token fits it counted, for the batches to take as they are (so nothing is counted twice)."""
    cells = hosted_only(config, plan.todo) if checked else plan.todo
    if not cells:
        return {}
    keys = await secret_api_keys(config, {c.model for c in cells}) if hosted else {}
    remembered = await asyncio.to_thread(store.remembered_fits, [c.cell_id for c in cells])
    check = await check_cells(
        config, cells, plan.probe_of, hosted=hosted, api_keys=keys, remembered=remembered
    )
    refuse_unbuildable(check)
    return check.fits


def models_with_open_batches(config: SweepConfig, claims: Claims) -> list[str]:
    """The config's batch models with batches no run has collected yet."""
    batched = [m.name for m in config.models if m.batch is not None]
    if not batched:
        return []
    book = BatchBook(claims)
    return [m for m in batched if book.records(m)]


def _write_start(
    config: SweepConfig,
    store: Warehouse,
    run_id: str,
    epoch: str,
    plan: Plan,
    note: str | None,
    logger: Any,
) -> None:
    """The run's ``start`` row: its cells, those skipped (graded) and dropped (too long)."""
    start = rows.run_row(
        run_id,
        epoch,
        config,
        "start",
        flow_run_id=_flow_run_id(),
        cells_total=len(plan.cells),
        cells_skipped=len(plan.kept) - len(plan.todo),
        cells_dropped=plan.window_dropped,
        note=note,
    )
    store.append("runs", [start])
    logger.info(
        "run %s, epoch %s: %d cells, %d to do, warehouse %s",
        run_id,
        epoch,
        len(plan.cells),
        len(plan.todo),
        store.root,
    )


@dataclass
class _Run:
    """What every model's sweep of one run shares."""

    config: SweepConfig
    store: Warehouse
    run_id: str
    epoch: str
    progress: ProgressSink
    claims: Claims | None
    proven: dict[str, ProvenFit]  # the token fits the run's build check counted
    rerun: bool = False
    # Compaction and the views file, started once every batch is built (flows/tidy.py).
    tidying: asyncio.Future[Tidied] | None = None

    async def claiming(
        self, plan: Plan, only_context: bool, resend: Collection[str], logger: Any
    ) -> list[ModelSweep]:
        """:meth:`models`, the run's claims renewed meanwhile and released after; a run that
        fails says so in an ``end`` row."""
        claims = self.claims
        heartbeat = asyncio.create_task(renew_claims(claims, logger)) if claims else None
        try:
            return await self.models(plan, only_context, resend) if plan.by_model else []
        except Exception as exc:
            aborted = f"aborted: {exc}"[:500]
            end = rows.run_row(
                self.run_id,
                self.epoch,
                self.config,
                "end",
                flow_run_id=_flow_run_id(),
                note=aborted,
            )
            self.store.append("runs", [end])
            raise
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            if claims is not None:
                await asyncio.to_thread(claims.release_all)

    async def models(
        self, plan: Plan, only_context: bool, resend: Collection[str]
    ) -> list[ModelSweep]:
        """Every model's cells swept side by side, in the tasks' runtime."""
        config, by_model = self.config, plan.by_model
        # Building prompts only: no judge, no key, no endpoint is needed.
        helpers = set() if only_context else helper_models(config, plan.todo, plan.probe_of)
        helpers -= set(by_model)
        models = set(by_model) | helpers
        keys = {} if only_context else await secret_api_keys(config, models)
        limits = await active_limits(config, models)
        rates = {m: lim.rate_limits for m, lim in limits.items() if lim.rate_limits}
        # Fits stored by earlier runs: a cell whose prompt and count are unchanged costs one count.
        remembered = await asyncio.to_thread(
            self.store.remembered_fits, [c.cell_id for c in plan.todo]
        )
        async with open_runtime(
            config,
            by_model,
            helpers,
            plan.probe_of,
            keys,
            offline=only_context,
            rate_limits=rates,
            remembered=remembered,
            proven=self.proven,
        ):
            known = self.store.known_cell_ids()
            asker = Asker(
                config,
                self.store.root,
                self.epoch,
                {m: lim.tags for m, lim in limits.items()},
                resend=(self.run_id, frozenset(resend)) if resend else None,
            )
            sweeps = [
                self.sweep_class(model, only_context)(
                    config,
                    self.store,
                    model,
                    self.run_id,
                    self.epoch,
                    self.progress,
                    known,
                    asker,
                    plan.probe_of,
                    self.claims,
                ).sorting_batches(uses_prefix_order(config, model))
                for model in by_model
            ]
            for model_sweep in sweeps:
                if isinstance(model_sweep, BatchModelSweep):
                    model_sweep.batching(plan.grid, self.rerun)
            built = [s.all_built for s in sweeps]
            self.tidying = tidy_when_built(config, self.store, built)
            await asyncio.gather(*(s.run(by_model[s.model], only_context) for s in sweeps))
        return sweeps

    def sweep_class(self, model: str, only_context: bool) -> type[ModelSweep]:
        batch = self.config.model(model).batch
        return ModelSweep if only_context or batch is None else BatchModelSweep


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
    config: SweepConfig | None = None,
    checked: bool = False,
) -> State:
    """Run a sweep config: every cell of the grid not yet graded in the epoch is queried once.

    ``config``: the config already loaded from ``config_path`` (the command line loads and
    checks it before Prefect starts; a deployment's run reads the file); ``checked``: the
    command line has built its cells too (what it could: flows/build_check.py). With ``shards`` > 1
    (and no ``shard``) the run splits the grid into that many flow runs of its own deployment,
    which the work pool's workers share; ``shard`` runs one part of it.
    """
    config = config or load_config(config_path)
    if shards < 1 or (shard is not None and not 0 <= shard < shards):
        raise ConfigError(f"shard {shard} of {shards}: need shards >= 1 and 0 <= shard < shards")
    if shards > 1 and shard is None:
        from needlescope.flows.fanout import fan_out

        store = Warehouse(Path(warehouse) if warehouse else config.warehouse or default_root())
        # Fixed here, so shards that start after midnight still sweep the same epoch.
        epoch = resolve_epoch(config, store.ensure(), epoch)
        return await fan_out(config_path, epoch, store, only_context, shards, config)
    return await run_sweep(
        config,
        epoch=epoch,
        warehouse=warehouse,
        only_context=only_context,
        shard=shard,
        shards=shards,
        checked=checked,
    )
