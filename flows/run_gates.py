"""A sweep's gates at its end: each gate judged per model on the epoch's answers, the serving
changes since the previous epoch, and the alerts (Prefect events the config's automation turns
into notifications). Only the events need Prefect; judging reads the warehouse alone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from needlescope.config import SweepConfig
from needlescope.gates import (
    FAILED_CELLS_EVENT,
    GATE_FAILED_EVENT,
    GateResult,
    failed_results,
    state_message,
)
from needlescope.warehouse.store import Warehouse

NO_SERVER = "no alert was sent: no Prefect server is configured (PREFECT_API_URL is not set)"


@dataclass
class Verdicts:
    """What the sweep's result carries about its gates and serving changes."""

    gates: list[GateResult] = field(default_factory=list)
    serving_changes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def failed(self) -> list[GateResult]:
        return failed_results(self.gates)

    @property
    def message(self) -> str | None:
        return state_message(self.gates)


def judge_epoch(
    config: SweepConfig,
    store: Warehouse,
    epoch: str,
    models: Sequence[str] | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> Verdicts:
    """The config's gates over ``epoch`` (sending nothing) and each model's serving changes.
    ``con``: a connection with the views to read (else one of its own)."""
    from needlescope.warehouse.stats.gates import evaluate_epoch, serving_changes

    with store.reading(con) as reader:
        gates = (
            evaluate_epoch(reader, config.gates, epoch, models=models, seed=config.seed)
            if config.gates
            else []
        )
        return Verdicts(gates, serving_changes(reader, epoch))


def prefect_server_configured() -> bool:
    """Automations live on a Prefect server: without one (the ephemeral API of a plain
    ``needlescope run``) an event reaches nobody."""
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)


def config_resource(config: SweepConfig) -> dict[str, str]:
    """The resource needlescope's events are about: the config (what its automation matches)."""
    return {
        "prefect.resource.id": f"needlescope.config._sweep.{config.name}",
        "prefect.resource.name": config.name,
    }


def emit_alerts(
    config: SweepConfig, epoch: str, verdicts: Verdicts, summary: dict[str, Any], logger: Any
) -> int:
    """One ``needlescope.gate.failed`` event per failed gate and model, and one
    ``needlescope.sweep.failed-cells`` when cells failed; the number emitted. On the ephemeral
    API none is emitted and one line says so."""
    failed_cells = int(summary.get("cells_failed") or 0)
    if not verdicts.failed and not failed_cells:
        return 0
    if not prefect_server_configured():
        logger.warning(NO_SERVER)
        return 0
    from prefect.events import emit_event

    emitted = 0
    for result in verdicts.failed:
        entry = result.to_dict()
        payload = {
            **entry,
            "config": config.name,
            "epoch": epoch,
            "figures_json": json.dumps(entry["figures"], sort_keys=True),
            "serving_changes": verdicts.serving_changes.get(result.model, []),
        }
        resource = {**config_resource(config), "needlescope.model": result.model}
        if emit_event(GATE_FAILED_EVENT, resource=resource, payload=payload) is not None:
            emitted += 1
    if failed_cells:
        message = f"sweep {config.name} epoch {epoch}: {failed_cells} cells failed"
        payload = {
            "message": message,
            "config": config.name,
            "epoch": epoch,
            "run_id": summary.get("run_id"),
            "cells_failed": failed_cells,
            "cells_total": summary.get("cells_total"),
            "figures_json": json.dumps(
                {k: summary.get(k) for k in ("cells_failed", "cells_total", "cells_graded")}
            ),
        }
        if emit_event(FAILED_CELLS_EVENT, resource=config_resource(config), payload=payload):
            emitted += 1
    return emitted


def judge_and_alert(
    config: SweepConfig,
    store: Warehouse,
    epoch: str,
    summary: dict[str, Any],
    logger: Any,
    con: duckdb.DuckDBPyConnection | None = None,
) -> str | None:
    """At a sweep's end: the gates judged into ``summary`` (``gates``, ``serving_changes``,
    ``alerts_sent``), alerts emitted; the flow run's Failed message, or None. A gate that
    cannot be judged fails the run rather than pass unseen. ``con``: as :func:`judge_epoch`."""
    verdicts, unjudged = Verdicts(), None
    try:
        models = [m.name for m in config.tested_models()]
        verdicts = judge_epoch(config, store, epoch, models, con)
    except Exception as exc:
        unjudged = f"gates not evaluated: {type(exc).__name__}: {exc}"
        logger.error(unjudged)
    summary["gates"] = [r.to_dict() for r in verdicts.gates]
    summary["serving_changes"] = verdicts.serving_changes
    log_verdicts(verdicts, logger)
    summary["alerts_sent"] = emit_alerts(config, epoch, verdicts, summary, logger)
    return verdicts.message or unjudged


def log_verdicts(verdicts: Verdicts, logger: Any) -> None:
    for result in verdicts.gates:
        (logger.warning if result.failed else logger.info)(result.message)
    for model, lines in verdicts.serving_changes.items():
        for line in lines:
            logger.warning("serving change: %s: %s", model, line)
