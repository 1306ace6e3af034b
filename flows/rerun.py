"""Rerun the cells of one run that have no graded answer, optionally narrowed by filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Completed, State

from needlescope.cells import Cell, expand_with_probes
from needlescope.config import SweepConfig
from needlescope.errors import ConfigError
from needlescope.flows.runtime import fits_context
from needlescope.warehouse.store import Warehouse, default_root


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
) -> list[Cell]:
    """The run's grid cells with no graded answer in its epoch, narrowed by the filters.

    A cell never answered (left unsent by a budget, or cut short by a crash) has no error
    kind, so an ``error_kinds`` filter leaves it out.
    """
    for name in models or []:
        if name not in {m.name for m in config.models}:
            raise ConfigError(f"--model {name!r} is not a model of that run")
    cells = [
        cell
        for cell in expand_with_probes(config)
        if fits_context(cell, config.model(cell.model)) and cell.cell_id not in graded
    ]
    if models:
        cells = [c for c in cells if c.model in models]
    if probes:
        cells = [c for c in cells if c.probe in probes]
    if error_kinds:
        cells = [c for c in cells if latest_errors.get(c.cell_id) in error_kinds]
    return cells


async def rerun_cells(
    run_id: str,
    warehouse: str | None = None,
    models: list[str] | None = None,
    probes: list[str] | None = None,
    error_kinds: list[str] | None = None,
) -> State:
    from needlescope.flows.sweep import run_sweep

    store = Warehouse(Path(warehouse) if warehouse else default_root())
    config, epoch = run_config(store, run_id)
    cells = cells_to_rerun(
        config,
        store.graded_cell_ids(epoch),
        store.latest_errors(epoch),
        models=models,
        probes=probes,
        error_kinds=error_kinds,
    )
    logger = get_run_logger()
    logger.info(
        "run %s, epoch %s: %d cells without a graded answer to rerun", run_id, epoch, len(cells)
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
) -> State:
    """Rerun exactly the cells of run ``run_id`` that have no graded answer in its epoch.

    ``models``, ``probes`` and ``error_kinds`` (e.g. ["rate_limited"]) narrow the choice.
    """
    return await rerun_cells(run_id, warehouse, models, probes, error_kinds)
