"""Rerun the cells of one run that have no graded answer, or whose answer is invalid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Completed, State

from needlescope.config import SweepConfig
from needlescope.errors import ConfigError
from needlescope.fitting import fits_context
from needlescope.grading import parse_values
from needlescope.grid import Cell
from needlescope.probes.registry import expand_with_probes
from needlescope.providers.base import RETRYABLE_KINDS
from needlescope.providers.batch import BATCH_CANCELED, BATCH_EXPIRED, BATCH_FAILED
from needlescope.warehouse.store import Warehouse, default_root

# A failure a rerun retries by default: one that may not happen again, and the requests a
# provider batch never ran (expired, canceled) or ran as part of a batch that failed whole.
RERUN_KINDS = RETRYABLE_KINDS | {BATCH_EXPIRED, BATCH_CANCELED, BATCH_FAILED}


def run_config(store: Warehouse, run_id: str) -> tuple[SweepConfig, str]:
    """The config a run swept (as it was then, not as the file reads now) and its epoch."""
    start = store.run_start(run_id) if store.exists() else None
    if start is None:
        raise ConfigError(f"run {run_id!r} not found in the warehouse at {store.root}")
    return SweepConfig.model_validate_json(start["config_json"]), str(start["epoch"])


def cells_to_rerun(
    config: SweepConfig,
    graded: set[str],
    latest_errors: dict[str, str],
    *,
    models: list[str] | None = None,
    probes: list[str] | None = None,
    error_kinds: list[str] | None = None,
    validities: list[str] | None = None,
    answer_validity: dict[str, str] | None = None,
) -> list[Cell]:
    """The run's grid cells to send again, narrowed by the filters.

    Without ``validities``: the cells with no graded answer in the epoch. A cell whose latest
    failure can never succeed as sent (``request_too_large``, ``context_too_long``,
    ``bad_request``, ``auth``: any kind not in ``RERUN_KINDS``) is left out unless
    ``error_kinds`` names its kind; a cell never answered (left unsent by a budget, or cut
    short by a crash) has no error kind, so an ``error_kinds`` filter leaves it out.

    ``validities`` (e.g. ["empty", "truncated"]): the cells whose graded answer
    (``answer_validity``) has one of them, besides the failed cells ``error_kinds`` names.
    """
    for name in models or []:
        if name not in {m.name for m in config.models}:
            raise ConfigError(f"--model {name!r} is not a model of that run")
    answer_validity = answer_validity or {}
    cells = [c for c in expand_with_probes(config) if fits_context(c, config.model(c.model))]
    if models:
        cells = [c for c in cells if c.model in models]
    if probes:
        cells = [c for c in cells if c.probe in probes]

    def failed_to_resend(cell: Cell) -> bool:
        if cell.cell_id in graded:
            return False
        kind = latest_errors.get(cell.cell_id)
        if error_kinds:
            return kind in error_kinds
        return validities is None and (kind is None or kind in RERUN_KINDS)

    def invalid_to_resend(cell: Cell) -> bool:
        return bool(validities) and answer_validity.get(cell.cell_id) in (validities or ())

    return [c for c in cells if failed_to_resend(c) or invalid_to_resend(c)]


async def rerun_cells(
    run_id: str,
    warehouse: str | None = None,
    models: list[str] | None = None,
    probes: list[str] | None = None,
    error_kinds: list[str] | None = None,
    validities: list[str] | None = None,
) -> State:
    from needlescope.flows.sweep import run_sweep

    if validities:
        try:
            validities = parse_values(",".join(validities))
        except ValueError as exc:
            raise ConfigError(f"--validity: {exc}") from None
    store = Warehouse(Path(warehouse) if warehouse else default_root())
    config, epoch = run_config(store, run_id)
    answer_validity = store.answer_validities(epoch) if validities else {}
    cells = cells_to_rerun(
        config,
        store.graded_cell_ids(epoch),
        store.latest_errors(epoch),
        models=models,
        probes=probes,
        error_kinds=error_kinds,
        validities=validities,
        answer_validity=answer_validity,
    )
    resend = {c.cell_id for c in cells if c.cell_id in answer_validity}
    logger = get_run_logger()
    logger.info(
        "run %s, epoch %s: %d cells to rerun (%d of them answered, invalid: %s)",
        run_id,
        epoch,
        len(cells),
        len(resend),
        ", ".join(validities or []) or "-",
    )
    if not cells:
        summary: dict[str, Any] = {"rerun_of": run_id, "epoch": epoch, "cells_total": 0}
        return Completed(message=f"run {run_id}: nothing to rerun", data=summary)
    state = await run_sweep(
        config,
        epoch=epoch,
        warehouse=str(store.root),
        only_cells={c.cell_id for c in cells},
        note=f"rerun of {run_id}",
        resend=resend,
        rerun=True,
    )
    if isinstance(state.data, dict):
        state.data["rerun_of"] = run_id
    return state


@flow(name="rerun-failed", log_prints=True)
async def rerun_failed(
    run_id: str,
    warehouse: str | None = None,
    models: list[str] | None = None,
    probes: list[str] | None = None,
    error_kinds: list[str] | None = None,
    validities: list[str] | None = None,
) -> State:
    """Rerun the cells of run ``run_id`` that have no graded answer in its epoch (those whose
    failure can succeed when re-sent, unless ``error_kinds`` names the kinds to rerun).

    ``models``, ``probes`` and ``error_kinds`` (e.g. ["rate_limited"]) narrow the choice;
    ``validities`` (e.g. ["empty", "truncated"]) resends the cells whose answer has one of
    them instead, in the same epoch: the new answer supersedes the old in ``results``.
    """
    return await rerun_cells(run_id, warehouse, models, probes, error_kinds, validities)
