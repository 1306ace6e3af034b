"""The sweep flow: expand the grid, skip what the epoch has graded, query the rest, grade, store.

``run_sweep`` plans the run (which cells, which epoch), opens the provider clients and the
tasks' runtime (``open_runtime``: tasks/runtime.py's one ContextVar), runs a
:class:`~needlescope.flows.model_sweep.ModelSweep` per model side by side, and writes the run's
``start`` and ``end`` rows with what became of its cells.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.states import Completed, Failed, State

from needlescope.cells import Cell, default_epoch, order_cells, shard_of
from needlescope.config import CasesProbe, ProbeConfig, SweepConfig
from needlescope.config_file import load_config
from needlescope.errors import ConfigError
from needlescope.flows.limits import active_limits
from needlescope.flows.model_sweep import ModelSweep
from needlescope.flows.progress import LogProgress, ProgressSink, shown_progress
from needlescope.flows.secrets import secret_api_keys
from needlescope.probes.registry import expand_with_probes
from needlescope.providers.open import check_offline_lengths, open_provider
from needlescope.providers.registry import CACHES_PREFIXES
from needlescope.tasks.contexts import ContextBuilder, Embedders
from needlescope.tasks.query import Asker
from needlescope.tasks.runtime import Runtime, running
from needlescope.warehouse.store import Warehouse, default_root, rows
from needlescope.warehouse.store.claims import Claims
from needlescope.windows import fits_context, local_slot_size


def helper_models(
    config: SweepConfig, cells: list[Cell], probe_of: dict[str, ProbeConfig]
) -> set[str]:
    """Models the cells to do need besides the ones under test: judges (embedders start apart)."""
    return {
        probe.judge
        for cell in cells
        if isinstance(probe := probe_of[cell.cell_id], CasesProbe) and probe.judge
    }


def new_run_id() -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _flow_run_id() -> str | None:
    return str(flow_run.id) if flow_run.id else None


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


@contextlib.asynccontextmanager
async def open_runtime(
    config: SweepConfig,
    cells_by_model: dict[str, list[Cell]],
    helpers: Collection[str] = (),
    probe_of: dict[str, ProbeConfig] | None = None,
    api_keys: dict[str, str] | None = None,
    offline: bool = False,
    rate_limits: dict[str, list[str]] | None = None,
) -> AsyncIterator[Runtime]:
    """Provider clients (and local servers) for the models under test and their helpers, in
    the tasks' runtime for the block; ``offline``: prompts are only built, nothing is sent."""
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
            config, providers, probe_of=dict(probe_of or {}), embedders=Embedders(config, stack)
        )
        with running(Runtime(providers, builder, rate_limits=dict(rate_limits or {}))) as runtime:
            yield runtime


@dataclass
class Plan:
    """The cells of a run: all of its grid part, those that fit their window, those to do."""

    cells: list[Cell]
    kept: list[Cell]
    todo: list[Cell]
    probe_of: dict[str, ProbeConfig]
    by_model: dict[str, list[Cell]] = field(default_factory=dict)

    @property
    def window_dropped(self) -> int:
        return len(self.cells) - len(self.kept)


def plan_run(
    config: SweepConfig,
    done: set[str],
    only_cells: Collection[str] | None,
    shard: int | None,
    shards: int,
) -> Plan:
    """The run's cells in each model's sending order, ``done`` ones (graded) left out."""
    probe_of_cell = expand_with_probes(config)
    cells = select_cells(list(probe_of_cell), only_cells, shard, shards)
    kept = [c for c in cells if fits_context(c, config.model(c.model))]
    todo = [c for c in kept if c.cell_id not in done]
    plan = Plan(cells, kept, todo, {c.cell_id: p for c, p in probe_of_cell.items()})
    for cell in todo:
        plan.by_model.setdefault(cell.model, []).append(cell)
    for model, model_cells in plan.by_model.items():
        order = "prefix" if uses_prefix_order(config, model) else config.cell_order
        plan.by_model[model] = order_cells(model_cells, order.replace("auto", "grid"), config.seed)
    return plan


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
    done = set() if only_context else store.graded_cell_ids(epoch) - set(resend)
    plan = plan_run(config, done, only_cells, shard, shards)
    if plan.window_dropped:
        logger.warning(
            "%d cells dropped: longer than their model's context window", plan.window_dropped
        )
    if shard is not None and shards > 1:
        note = f"shard {shard + 1} of {shards}" + (f"; {note}" if note else "")
    skipped = len(plan.kept) - len(plan.todo)
    start = rows.run_row(
        run_id,
        epoch,
        config,
        "start",
        flow_run_id=_flow_run_id(),
        cells_total=len(plan.cells),
        cells_skipped=skipped,
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
    progress = shown_progress() or LogProgress(logger)
    progress.start(len(plan.todo), skipped)
    sweeps: list[ModelSweep] = []
    # Prompts only (--only-context) grade nothing: no claim is needed.
    claims = None if only_context else Claims(store.root, run_id, config.claim_timeout_s)
    heartbeat = asyncio.create_task(renew_claims(claims, logger)) if claims else None
    try:
        if plan.by_model:
            run = _Run(config, store, run_id, epoch, progress, claims)
            sweeps = await run.models(plan, only_context, resend)
    except Exception as exc:
        aborted = f"aborted: {exc}"[:500]
        store.append(
            "runs",
            [rows.run_row(run_id, epoch, config, "end", flow_run_id=_flow_run_id(), note=aborted)],
        )
        raise
    finally:
        progress.finish()
        if heartbeat is not None:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        if claims is not None:
            await asyncio.to_thread(claims.release_all)
    return _finish(config, store, run_id, epoch, plan, sweeps, only_context, logger)


@dataclass
class _Run:
    """What every model's sweep of one run shares."""

    config: SweepConfig
    store: Warehouse
    run_id: str
    epoch: str
    progress: ProgressSink
    claims: Claims | None

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
        async with open_runtime(
            config, by_model, helpers, plan.probe_of, keys, offline=only_context, rate_limits=rates
        ):
            known = self.store.known_cell_ids()
            asker = Asker(
                config,
                self.store.id,
                self.epoch,
                {m: lim.tags for m, lim in limits.items()},
                resend=(self.run_id, frozenset(resend)) if resend else None,
            )
            sweeps = [
                ModelSweep(
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
            await asyncio.gather(*(s.run(by_model[s.model], only_context) for s in sweeps))
        return sweeps


def _finish(
    config: SweepConfig,
    store: Warehouse,
    run_id: str,
    epoch: str,
    plan: Plan,
    sweeps: list[ModelSweep],
    only_context: bool,
    logger: Any,
) -> State:
    """The run's ``end`` row and summary; drift, compaction and the views file after it."""
    summary = _summary(run_id, epoch, store, plan, sweeps, only_context)
    notes = []
    if unsent := summary["cells_unsent"]:
        notes.append(f"budget spent: {unsent} cells left unsent")
    if elsewhere := summary["cells_graded_elsewhere"]:
        notes.append(f"{elsewhere} cells graded by another run of the epoch meanwhile (skipped)")
    if "nothing_measured" in summary:
        notes.append(f"nothing measured: {summary['nothing_measured']}")
    counts = {
        k: summary[k]
        for k in (
            "cells_total",
            "cells_skipped",
            "cells_dropped",
            "cells_graded",
            "cells_failed",
            "cells_unsent",
            "spent_tokens",
            "spent_usd",
        )
    }
    end = rows.run_row(
        run_id,
        epoch,
        config,
        "end",
        flow_run_id=_flow_run_id(),
        note="; ".join(notes) or None,
        **counts,
    )
    store.append("runs", [end])
    if unsent:
        logger.warning("budget spent: %d cells left unsent for a later run", unsent)
    summary["drift"] = epoch_drift(store, epoch, config.seed, logger)
    if config.compact:
        compact_warehouse(store, logger)
    if not store.refresh_views_file():
        logger.warning("%s is open elsewhere; its views were not refreshed", store.db_path)
    message = json.dumps(summary)
    if summary["cells_failed"]:
        return Failed(message=f"{summary['cells_failed']} cells failed: {message}", data=summary)
    if "nothing_measured" in summary:
        return Failed(message=f"nothing measured: {message}", data=summary)
    return Completed(message=message, data=summary)


def _summary(
    run_id: str,
    epoch: str,
    store: Warehouse,
    plan: Plan,
    sweeps: list[ModelSweep],
    only_context: bool,
) -> dict[str, Any]:
    dropped = plan.window_dropped + sum(s.dropped for s in sweeps)
    elsewhere = sum(s.elsewhere for s in sweeps)
    spend = sweeps[0].asker.spend if sweeps else None
    summary: dict[str, Any] = {
        "run_id": run_id,
        "epoch": epoch,
        "warehouse": str(store.root),
        "cells_total": len(plan.cells),
        "cells_dropped": dropped,
        "cells_skipped": len(plan.kept) - len(plan.todo) + elsewhere,
        "cells_graded": sum(s.graded for s in sweeps),
        "cells_failed": sum(s.failed for s in sweeps),
        "cells_unsent": sum(s.unsent for s in sweeps),
        "cells_graded_elsewhere": elsewhere,
        "spent_tokens": spend.tokens if spend else 0,
        "spent_usd": round(spend.usd, 6) if spend else 0.0,
        "only_context": only_context,
    }
    if plan.cells and dropped == len(plan.cells):
        reasons = []
        if plan.window_dropped:
            reasons.append(f"{plan.window_dropped} longer than their model's context window")
        reasons += [r for s in sweeps for r in s.drop_reasons][:1]
        summary["nothing_measured"] = (
            f"all {len(plan.cells)} cells were dropped ({'; e.g. '.join(reasons)})"
        )
    return summary


def compact_warehouse(store: Warehouse, logger: Any) -> None:
    """Merge the warehouse's small files (this run's and others'). Never fails the sweep."""
    from needlescope.warehouse.store.compaction import compact

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
    from needlescope.warehouse.stats.significance import drift_summary

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
) -> State:
    """Run a sweep config: every cell of the grid not yet graded in the epoch is queried once.

    ``config``: the config already loaded from ``config_path`` (the command line loads and
    checks it before Prefect starts; a deployment's run reads the file). With ``shards`` > 1
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
        return await fan_out(config_path, epoch, store, only_context, shards)
    return await run_sweep(
        config,
        epoch=epoch,
        warehouse=warehouse,
        only_context=only_context,
        shard=shard,
        shards=shards,
    )
