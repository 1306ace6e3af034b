"""``needlescope gates``: an epoch's gates judged again from the config it was swept with,
sending nothing (no Prefect)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from needlescope.errors import ConfigError, NeedlescopeError
from needlescope.flows.cli._common import EXIT_GATE_FAILED, WarehouseOption, console, fail

if TYPE_CHECKING:
    from needlescope.config import SweepConfig
    from needlescope.warehouse.store import Warehouse


def epoch_config(store: Warehouse, epoch: str | None) -> tuple[SweepConfig, str]:
    """The config ``epoch`` (default: the latest epoch started) was swept with, as its latest
    run stored it, and the epoch."""
    from needlescope.config import SweepConfig

    if not store.exists():
        raise ConfigError(f"no warehouse at {store.root}")
    sql = "SELECT epoch, config_json FROM t WHERE event = 'start'"
    params: list[object] = []
    if epoch is not None:
        sql += " AND epoch = ?"
        params.append(epoch)
    rows = store.query_table("runs", sql + ' ORDER BY "at" DESC LIMIT 1', params)
    if not rows:
        what = f"epoch {epoch!r}" if epoch else "any run"
        raise ConfigError(f"the warehouse at {store.root} has no {what}")
    found, config_json = rows[0]
    return SweepConfig.model_validate_json(config_json), str(found)


def gates(
    epoch: Annotated[
        str | None, typer.Option(help="Epoch to judge; default: the latest one started.")
    ] = None,
    warehouse: WarehouseOption = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
) -> None:
    """Judge an epoch's gates again (from the config it was swept with), sending nothing:
    exit 4 if any failed, else 0."""
    from needlescope.flows.run_gates import judge_epoch
    from needlescope.warehouse.store import Warehouse, default_root

    if output_format not in ("text", "json"):
        raise fail(f"--format must be text or json, not {output_format!r}")
    store = Warehouse(warehouse or default_root())
    try:
        config, found = epoch_config(store, epoch)
        verdicts = judge_epoch(config, store, found, [m.name for m in config.tested_models()])
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    if output_format == "json":
        out = {
            "epoch": found,
            "config": config.name,
            "gates": [r.to_dict() for r in verdicts.gates],
            "serving_changes": verdicts.serving_changes,
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        if not config.gates:
            sys.stdout.write(f"epoch {found}: the config {config.name} declares no gates\n")
        for result in verdicts.gates:
            sys.stdout.write(result.message + "\n")
        for model, lines in verdicts.serving_changes.items():
            for line in lines:
                sys.stdout.write(f"serving change: {model}: {line}\n")
    if verdicts.failed:
        console.print(f"{len(verdicts.failed)} gate verdicts failed in epoch {found}")
        raise typer.Exit(EXIT_GATE_FAILED)
