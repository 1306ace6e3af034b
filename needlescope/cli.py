"""The needlescope command line. Only `run` (and later ops commands) import Prefect."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from needlescope.errors import NeedlescopeError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Measure how well LLMs recall needles spread through long contexts.",
)
console = Console(stderr=True)

EXIT_OK, EXIT_CELLS_FAILED, EXIT_BAD_INPUT, EXIT_BUDGET_SPENT = 0, 1, 2, 3

WarehouseOption = Annotated[
    Path | None,
    typer.Option(
        "--warehouse",
        "-w",
        help="Warehouse folder (default: $NEEDLESCOPE_WAREHOUSE, the config's warehouse, "
        "or warehouse/data).",
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


@app.command()
def run(
    config_path: Annotated[Path, typer.Argument(help="Sweep config (YAML).")],
    epoch: Annotated[
        str | None,
        typer.Option(help="Epoch name; default: the config's name plus today's UTC date."),
    ] = None,
    warehouse: WarehouseOption = None,
    only_context: Annotated[
        bool, typer.Option("--only-context", help="Build and save the prompts; query nothing.")
    ] = False,
    report: Annotated[
        bool, typer.Option("--report/--no-report", help="Write the HTML report afterwards.")
    ] = True,
    report_dir: Annotated[Path, typer.Option(help="Where the report goes.")] = Path("reports"),
) -> None:
    """Run a sweep: query every cell of the grid not yet graded in the epoch, grade, store."""
    from needlescope.config import load_config, resolve_api_key
    from needlescope.providers.reachability import check_models
    from needlescope.warehouse.store import Warehouse, default_root

    # Everything that can be checked before Prefect starts is checked here, in this order,
    # and nothing is written until it all passes.
    try:
        config = load_config(config_path)
        for model in config.models:
            resolve_api_key(model)
        if not only_context:
            asyncio.run(check_models(config))
        store = Warehouse(warehouse or config.warehouse or default_root()).ensure()
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None

    prefect_environment()
    from needlescope.flows.cli_progress import RichProgress
    from needlescope.flows.progress import SINK
    from needlescope.flows.sweep import sweep

    # One line per finished cell would drown the progress bar; failures still show.
    logging.getLogger("prefect.task_runs").setLevel(logging.WARNING)
    SINK.append(RichProgress(console))
    try:
        state = asyncio.run(
            sweep(
                str(config_path),
                epoch=epoch,
                warehouse=str(store.root),
                only_context=only_context,
                return_state=True,
            )
        )
    finally:
        SINK.clear()
    summary = _state_summary(state)
    if summary is None:
        raise fail(_state_error(state))
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    if report and not only_context and summary["cells_graded"] + summary["cells_skipped"] > 0:
        _write_report(store.root, report_dir)
    if summary.get("cells_unsent"):
        raise fail(
            f"budget spent: {summary['cells_unsent']} cells left unsent. Run the same command "
            "again (with a larger budget) to finish the epoch.",
            EXIT_BUDGET_SPENT,
        )
    if summary["cells_failed"]:
        raise fail(
            f"{summary['cells_failed']} cells failed; their errors are in the failed_cells view. "
            "Run the same command again to retry just those.",
            EXIT_CELLS_FAILED,
        )


def _state_summary(state: Any) -> dict[str, Any] | None:
    data = getattr(state, "data", None)
    result = getattr(data, "data", data)  # a flow returning a State nests it
    if isinstance(result, dict) and "cells_total" in result:
        return result
    try:
        value = state.result(raise_on_failure=False)
    except Exception:
        return None
    inner = getattr(value, "data", value)
    return inner if isinstance(inner, dict) and "cells_total" in inner else None


def _state_error(state: Any) -> str:
    try:
        value = state.result(raise_on_failure=False)
    except Exception as exc:  # the state's own error, whatever it was
        value = exc
    if isinstance(value, NeedlescopeError):
        return str(value)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return getattr(state, "message", None) or "the sweep failed"


def _write_report(root: Path, out: Path) -> None:
    from needlescope.warehouse.report import write_report

    path = write_report(root, out)
    console.print(f"report: {path}")


@app.command()
def plan(
    config_path: Annotated[Path, typer.Argument(help="Sweep config (YAML).")],
    epoch: Annotated[
        str | None, typer.Option(help="Count cells already graded in this epoch as done.")
    ] = None,
    warehouse: WarehouseOption = None,
    output_format: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Print the cells, tokens and estimated cost a sweep would send; sends nothing."""
    from needlescope.cells import default_epoch
    from needlescope.config import load_config
    from needlescope.plan import as_dicts, totals
    from needlescope.plan import plan as plan_sweep
    from needlescope.warehouse.store import Warehouse, default_root

    try:
        config = load_config(config_path)
        store = Warehouse(warehouse or config.warehouse or default_root())
        graded = store.graded_cell_ids(epoch or default_epoch(config)) if store.exists() else set()
        rows = plan_sweep(config, graded)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    if output_format == "json":
        sys.stdout.write(json.dumps({"rows": as_dicts(rows), "total": totals(rows)}) + "\n")
        return
    from rich.table import Table

    table = Table(title=f"plan: {config.name}")
    for column in (
        "model",
        "probe",
        "cells",
        "graded",
        "to send",
        "prompt tokens",
        "answer tokens ≤",
        "cost (USD)",
    ):
        table.add_column(column, justify="left" if column in ("model", "probe") else "right")
    for row in [*rows]:
        tokens = f"{row.prompt_tokens:,}" + ("" if row.exact else " ≈")
        cost = "—" if row.cost_usd is None else f"{row.cost_usd:,.4f}"
        table.add_row(
            row.model,
            row.probe,
            str(row.cells),
            str(row.already_graded),
            str(row.to_send),
            tokens,
            f"{row.answer_tokens:,}",
            cost,
        )
    total = totals(rows)
    table.add_row(
        "total",
        "",
        str(total["cells"]),
        "",
        str(total["to_send"]),
        f"{total['prompt_tokens']:,}",
        f"{total['answer_tokens']:,}",
        "—" if total["cost_usd"] is None else f"{total['cost_usd']:,.4f}",
    )
    Console().print(table)


@app.command()
def serve(
    config_paths: Annotated[list[Path], typer.Argument(help="Sweep configs to serve.")],
    cron: Annotated[
        str | None, typer.Option(help="Cron schedule (UTC) for every served sweep.")
    ] = None,
    warehouse: WarehouseOption = None,
) -> None:
    """Serve sweep configs as Prefect deployments (runs from the UI, the API or a schedule)."""
    from needlescope.config import load_config

    try:
        for path in config_paths:
            load_config(path)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    prefect_environment()
    from prefect import serve as prefect_serve

    from needlescope.flows.deployments import sweep_deployment

    deployments = [
        sweep_deployment(path, cron=cron, warehouse=str(warehouse) if warehouse else None)
        for path in config_paths
    ]
    prefect_serve(*deployments)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the views (results, cells, runs, …).")],
    warehouse: WarehouseOption = None,
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="table, csv or json.")
    ] = "table",
) -> None:
    """Run SQL on the warehouse views."""
    from needlescope.warehouse.query import run_sql

    if output_format not in ("table", "csv", "json"):
        raise fail(f"--format must be table, csv or json, not {output_format!r}")
    try:
        text = run_sql(warehouse, query, output_format)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(text)


@app.command()
def report(
    warehouse: WarehouseOption = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("reports"),
) -> None:
    """Write the offline HTML report with its charts (PNG + SVG)."""
    from needlescope.warehouse.store import default_root

    try:
        _write_report(warehouse or default_root(), out)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None


@app.command()
def grade(
    probe: Annotated[
        str,
        typer.Argument(
            help="The probe whose grader to use: recall, counting_stars, goto, cases, rag."
        ),
    ],
    expected: Annotated[
        str,
        typer.Option(
            help='Expected answer, JSON or a file path: recall {"1": 1234, …} or [1234, …]; '
            "counting_stars [counts…]; goto the value; cases/rag the case as in the cells table."
        ),
    ],
    answer: Annotated[str, typer.Option(help="The model's answer: text or a file path.")],
    facts: Annotated[
        str | None,
        typer.Option(help="The context's facts (JSON or file), as in the cells table's `facts`."),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(help="cases/rag: a model of --config that also judges the answer (1–10)."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="The sweep config that defines the --judge model.")
    ] = None,
    rubric: Annotated[
        Path | None, typer.Option(help="The judge's rubric (default: needlescope's own).")
    ] = None,
) -> None:
    """Grade one answer by hand and print the grade as one JSON object (accuracy 0–100)."""
    from needlescope.grading.cli import grade_one, judge_answer

    if judge is not None and (config is None or probe not in ("cases", "rag")):
        raise fail("--judge needs --config, and only cases and rag answers are judged")
    try:
        expected_text = _text_or_file(expected)
        answer_text = _text_or_file(answer)
        result = grade_one(
            probe, expected_text, answer_text, _text_or_file(facts) if facts else None
        )
        if judge is not None:
            verdict = asyncio.run(
                judge_answer(
                    str(config),
                    judge,
                    json.loads(expected_text),
                    answer_text,
                    str(rubric) if rubric else None,
                )
            )
            result.update(verdict)
            from needlescope.judge import disagreement

            result["disagreement"] = disagreement(result["accuracy"], verdict["judge_score"])
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(json.dumps(result, ensure_ascii=False, default=str) + "\n")


@app.command("import-legacy")
def import_legacy(
    db_path: Annotated[Path, typer.Argument(help="A result database of the recall seed (SQLite).")],
    model: Annotated[str, typer.Option(help="Model name to file the answers under.")],
    warehouse: WarehouseOption = None,
) -> None:
    """Import the recall seed's SQLite results into the warehouse (idempotent)."""
    from needlescope.warehouse.legacy import import_legacy_db
    from needlescope.warehouse.store import Warehouse, default_root

    try:
        summary = import_legacy_db(db_path, model, Warehouse(warehouse or default_root()))
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")


def _text_or_file(value: str) -> str:
    path = Path(value)
    try:
        if len(value) < 4096 and path.is_file():
            return path.read_text(encoding="utf-8")
    except OSError:
        pass
    return value


def main() -> None:
    app()


if __name__ == "__main__":
    main()
