"""What the command line's commands share: the console, one-line errors and exit codes, the
common options, and Prefect's environment (set only by the commands that orchestrate)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from needlescope.flows.retention import vacuum_after_ephemeral_run, with_retention

console = Console(stderr=True)

EXIT_OK, EXIT_CELLS_FAILED, EXIT_BAD_INPUT, EXIT_BUDGET_SPENT = 0, 1, 2, 3
EXIT_GATE_FAILED = 4  # needlescope.gates._results.GATE_FAILED_EXIT

WarehouseOption = Annotated[
    Path | None,
    typer.Option(
        "--warehouse",
        "-w",
        help="Warehouse folder (default: $NEEDLESCOPE_WAREHOUSE, the config's warehouse, "
        "or warehouse/data).",
    ),
]


ReportOption = Annotated[
    bool, typer.Option("--report/--no-report", help="Write the HTML report afterwards.")
]
ReportDirOption = Annotated[Path, typer.Option(help="Where the report goes.")]
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json", help="Print the result as one JSON object on stdout (for scripts), no table."
    ),
]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    # The message quotes user input (names, paths): never read it as markup.
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def prefect_environment() -> None:
    """Settings measured to matter here; a user's own values win."""
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LOG_PRINTS", "true")
    with_retention(os.environ)  # the ephemeral server's, and the vacuum run after it


def vacuum_quietly() -> None:
    """Prefect's flow-run vacuum after a run on the ephemeral server (flows/retention.py); a
    failure is a warning: the run's results are stored."""
    try:
        vacuum_after_ephemeral_run()
    except Exception as exc:
        console.print(f"[yellow]warning:[/] Prefect's flow-run vacuum failed: {escape(str(exc))}")


def write_report(root: Path, out: Path, *, announce: bool = True, **options: Any) -> Path:
    from needlescope.warehouse.report.page import write_report as write

    path = write(root, out, **options)
    if announce:
        console.print(f"report: {path}")
    return path
