"""The commands that look and serve rather than sweep: ``plan``, ``sql``, ``report``,
``compact`` and ``import-legacy`` (fast paths: they never import Prefect), and ``serve``,
``server`` and ``deploy`` (Prefect only inside them). ``plan`` runs past 60 lines by its
options and its table's columns."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli._common import (
    WarehouseOption,
    console,
    fail,
    prefect_environment,
    write_report,
)


def plan(
    config_path: Annotated[Path, typer.Argument(help="Sweep config (YAML).")],
    epoch: Annotated[
        str | None, typer.Option(help="Count cells already graded in this epoch as done.")
    ] = None,
    warehouse: WarehouseOption = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Print the cells, tokens and estimated cost a sweep would send; sends nothing. Every
    cell is built as the sweep will build it: a cell that cannot be is refused (exit 2)."""
    from needlescope.config import load_config
    from needlescope.flows.build_check import check_config, refuse_unbuildable
    from needlescope.grid import as_dicts, default_epoch, totals
    from needlescope.grid import plan as plan_sweep
    from needlescope.warehouse.store import Warehouse, default_root

    try:
        config = load_config(config_path)
        store = Warehouse(warehouse or config.warehouse or default_root())
        graded = store.graded_cell_ids(epoch or default_epoch(config)) if store.exists() else set()
        check = asyncio.run(check_config(config, graded))
        refuse_unbuildable(check)
        dropped = {c.cell_id for c in check.window_dropped}
        rows = plan_sweep(config, graded, dropped, {c.cell_id for c in check.unchecked})
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    if output_format == "json":
        sys.stdout.write(json.dumps({"rows": as_dicts(rows), "total": totals(rows)}) + "\n")
        return
    from rich.table import Table

    table = Table(title=f"plan: {config.name}")
    # Batch and flex models pay batch prices: the list price beside them, for comparison.
    discounted = any(r.cost_usd != r.sync_cost_usd for r in rows)
    columns = [
        "model",
        "probe",
        "cells",
        "graded",
        "dropped",
        "to send",
        "prompt tokens",
        "answer tokens ≤",
        "cost (USD)",
        *(["synchronous (USD)"] if discounted else []),
    ]
    for column in columns:
        table.add_column(column, justify="left" if column in ("model", "probe") else "right")
    for row in [*rows]:
        tokens = f"{row.prompt_tokens:,}" + ("" if row.exact else " ≈")
        cost = _usd(row.cost_usd) + (" batch" if row.batch and row.cost_usd is not None else "")
        table.add_row(
            row.model,
            row.probe,
            str(row.cells),
            str(row.already_graded),
            str(row.dropped),
            str(row.to_send) + (f" ({row.unchecked} unchecked)" if row.unchecked else ""),
            tokens,
            f"{row.answer_tokens:,}",
            cost,
            *([_usd(row.sync_cost_usd)] if discounted else []),
        )
    total = totals(rows)
    table.add_row(
        "total",
        "",
        str(total["cells"]),
        "",
        str(total["dropped"]),
        str(total["to_send"]),
        f"{total['prompt_tokens']:,}",
        f"{total['answer_tokens']:,}",
        _usd(total["cost_usd"]),
        *([_usd(total["sync_cost_usd"])] if discounted else []),
    )
    Console().print(table)
    if total["dropped"]:
        console.print(f"dropped: {total['dropped']} cells longer than their model's context window")
    if total["unchecked"]:
        console.print(
            f"unchecked: {total['unchecked']} cells whose token lengths only their model's API"
            " counts; `run` builds them before it sends any query, and refuses what cannot be"
        )


def _usd(value: float | None) -> str:
    return "—" if value is None else f"{value:,.4f}"


ConfigsArgument = Annotated[
    list[Path], typer.Argument(help="Sweep configs: one nightly-<name> deployment each.")
]
CronOption = Annotated[
    str | None,
    typer.Option(
        help="Cron line (UTC) for every nightly deployment; default: each config's "
        "schedule (0 3 * * * UTC unless the config says otherwise)."
    ),
]


def _checked_configs(config_paths: list[Path]) -> list[Any]:
    """Each config loaded, and every cell of its grid built as its nightly sweep will build it."""
    from needlescope.config import load_config
    from needlescope.flows.build_check import check_config, refuse_unbuildable

    try:
        configs = [load_config(path) for path in config_paths]
        for config in configs:
            refuse_unbuildable(asyncio.run(check_config(config)))
        return configs
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None


def _ensure_alerts(configs: list[Any]) -> None:
    """The automations sending each config's alerts to its ``notify`` block, on the server."""
    if not any(c.notify for c in configs):
        return
    from needlescope.flows.alerts import ensure_alerts

    try:
        asyncio.run(ensure_alerts(configs, log=lambda line: console.print(escape(line))))
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None


def _serve(config_paths: list[Path], cron: str | None, warehouse: Path | None) -> None:
    from prefect import serve as prefect_serve

    from needlescope.flows.deployments import deployments_for

    deployments = deployments_for(
        config_paths, cron=cron, warehouse=str(warehouse) if warehouse else None
    )
    for deployment in deployments:
        console.print(f"serving sweep deployment [bold]{escape(deployment.name)}[/]")
    prefect_serve(*deployments, print_starting_message=False)


def serve(
    config_paths: ConfigsArgument,
    cron: CronOption = None,
    warehouse: WarehouseOption = None,
) -> None:
    """Serve the nightly deployments of CONFIGS and `rerun-failed` from this process (runs
    from the UI, the API or their schedules), against $PREFECT_API_URL."""
    configs = _checked_configs(config_paths)
    prefect_environment()
    if os.environ.get("PREFECT_API_URL"):  # automations live on a server, not the ephemeral API
        _ensure_alerts(configs)
    _serve(config_paths, cron, warehouse)


def server(
    config_paths: ConfigsArgument,
    cron: CronOption = None,
    warehouse: WarehouseOption = None,
    port: Annotated[int, typer.Option(help="Port of the Prefect server and its UI.")] = 4200,
    database: Annotated[
        str | None,
        typer.Option(
            envvar="NEEDLESCOPE_PREFECT_DATABASE",
            help="The Prefect server's database: a PostgreSQL URL "
            "(postgresql://user:password@host:5432/db) for a server many workers share. "
            "Default: Prefect's SQLite file in PREFECT_HOME.",
        ),
    ] = None,
) -> None:
    """Start a Prefect server (UI included) on 127.0.0.1 and serve the deployments on it."""
    from needlescope.errors import NeedlescopeError
    from needlescope.flows.local_server import database_url, running_prefect_server

    configs = _checked_configs(config_paths)
    if database is not None:
        try:
            database_url(database)
        except NeedlescopeError as exc:
            raise fail(str(exc)) from None
    prefect_environment()
    with running_prefect_server(port, log=console.print, database=database) as api_url:
        os.environ["PREFECT_API_URL"] = api_url
        console.print(f"Prefect UI: [bold]{api_url.removesuffix('/api')}[/]  (Ctrl-C stops)")
        _ensure_alerts(configs)
        _serve(config_paths, cron, warehouse)


def deploy(
    config_paths: ConfigsArgument,
    pool: Annotated[str, typer.Option(help="Process work pool (created if missing).")],
    shards: Annotated[
        int,
        typer.Option(min=1, help="Split each sweep into this many flow runs for the workers."),
    ] = 1,
    cron: CronOption = None,
    warehouse: WarehouseOption = None,
) -> None:
    """Register the deployments on a work pool; `prefect worker start --pool POOL` runs them."""
    configs = _checked_configs(config_paths)
    prefect_environment()
    from needlescope.flows.deployments import deploy_to_pool, deployments_for

    _ensure_alerts(configs)

    deployments = deployments_for(
        config_paths,
        cron=cron,
        warehouse=str(warehouse) if warehouse else None,
        shards=shards,
        work_pool=pool,
    )
    ids = asyncio.run(deploy_to_pool(deployments, pool))
    for deployment, deployment_id in zip(deployments, ids, strict=True):
        console.print(f"deployed {escape(deployment.name)} ({deployment_id}) on pool {pool}")
    console.print(f"start workers with: prefect worker start --pool {pool}")


def sql(
    query: Annotated[str, typer.Argument(help="SQL over the views (results, cells, runs, …).")],
    warehouse: WarehouseOption = None,
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="table, csv or json.")
    ] = "table",
) -> None:
    """Run SQL on the warehouse views."""
    from needlescope.warehouse.store.query import run_sql

    if output_format not in ("table", "csv", "json"):
        raise fail(f"--format must be table, csv or json, not {output_format!r}")
    try:
        text = run_sql(warehouse, query, output_format)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(text)


def compact(
    warehouse: WarehouseOption = None,
    min_files: Annotated[
        int,
        typer.Option(
            "--min-files", min=2, help="Merge a folder once it holds at least this many files."
        ),
    ] = 8,
    grace_minutes: Annotated[
        float,
        typer.Option(
            "--grace",
            min=0.0,
            help="Minutes the merged-away files stay on disk for readers that listed them "
            "before the merge (a later compaction deletes them).",
        ),
    ] = 60.0,
) -> None:
    """Merge the warehouse's small files (sweeps also do it when they end). Safe while sweeps
    write and reports read: readers see every row exactly once."""
    from needlescope.errors import WarehouseError
    from needlescope.warehouse.store import Warehouse
    from needlescope.warehouse.store.rollups_update import compact as compact_files

    store = Warehouse(warehouse)
    if not store.exists():
        raise fail(f"no warehouse at {store.root}")
    try:
        done, _ = compact_files(store.root, min_files=min_files, grace_s=grace_minutes * 60)
    except OSError as exc:
        raise fail(str(WarehouseError(f"cannot compact {store.root}: {exc}"))) from None
    if not done.ran:
        console.print("another compaction of this warehouse is running; nothing done")
        return
    store.refresh_views_file()
    console.print(
        f"merged {done.files_merged} files into "
        f"{sum(t.folders for t in done.tables)}, deleted {done.files_deleted} merged earlier "
        f"({done.seconds:.1f} s)"
    )


def rollups(
    warehouse: WarehouseOption = None,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild", help="Derive the rollups from the raw tables alone, ignoring the last."
        ),
    ] = False,
) -> None:
    """Bring the warehouse's rollups (the needle tallies position accuracy and the heatmaps
    read) up to date; compaction does it too. Derived data: `--rebuild` recounts them from the
    raw tables, and the views fall back to the raw rows whenever they do not match."""
    from needlescope.errors import WarehouseError
    from needlescope.warehouse.store import Warehouse
    from needlescope.warehouse.store.compaction import exclusive, snapshot
    from needlescope.warehouse.store.rollups_update import update

    store = Warehouse(warehouse)
    if not store.exists():
        raise fail(f"no warehouse at {store.root}")
    root = store.root.resolve()
    try:
        with exclusive(root) as mine:
            if not mine:
                raise fail("a compaction of this warehouse is running; try again when it ends")
            done = update(root, snapshot(root), rebuild=rebuild)
    except OSError as exc:
        raise fail(str(WarehouseError(f"cannot update the rollups of {root}: {exc}"))) from None
    how = "rebuilt from the raw tables" if done.rebuilt else "updated"
    console.print(
        f"rollups {how}: {done.fresh_files} files counted, {done.attempts:,} attempts and "
        f"{done.tally_rows:,} needle, {done.answer_rows:,} answer and "
        f"{done.invented_rows:,} hallucination tally rows added "
        f"({done.seconds:.1f} s)"
    )


def report(
    warehouse: WarehouseOption = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("reports"),
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=100.0,
            help="Accuracy (%) for the effective context length: the longest length at which "
            "mean accuracy is at least this, there and at every shorter length tested "
            "(default: 85.6, RULER's, for niah, variable_tracking and aggregation; 85 for "
            "the seed probes).",
        ),
    ] = None,
    unstable_spread: Annotated[
        float | None,
        typer.Option(
            "--unstable-spread",
            min=0.0,
            help="Accuracy points: a cell config whose parsed answers (over repeats and "
            "epochs) span more than this is flagged and listed as unstable (default 30).",
        ),
    ] = None,
) -> None:
    """Write the offline HTML report with its charts (PNG + SVG)."""
    from needlescope.warehouse.store import default_root

    options: dict[str, Any] = {"effective_threshold": threshold}
    if unstable_spread is not None:
        options |= {"unstable_range": unstable_spread, "unstable_spread": unstable_spread}
    try:
        write_report(warehouse or default_root(), out, **options)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None


def import_legacy(
    db_path: Annotated[Path, typer.Argument(help="A result database of the recall seed (SQLite).")],
    model: Annotated[str, typer.Option(help="Model name to file the answers under.")],
    warehouse: WarehouseOption = None,
) -> None:
    """Import the recall seed's SQLite results into the warehouse (idempotent)."""
    from needlescope.warehouse.store import Warehouse, default_root
    from needlescope.warehouse.store.legacy import import_legacy_db

    try:
        summary = import_legacy_db(db_path, model, Warehouse(warehouse or default_root()))
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
