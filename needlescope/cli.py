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
    # Help texts are plain text: with rich markup, "[counts…]" would vanish as a tag.
    rich_markup_mode=None,
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


ReportOption = Annotated[
    bool, typer.Option("--report/--no-report", help="Write the HTML report afterwards.")
]
ReportDirOption = Annotated[Path, typer.Option(help="Where the report goes.")]


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
    report: ReportOption = True,
    report_dir: ReportDirOption = Path("reports"),
) -> None:
    """Run a sweep: query every cell of the grid not yet graded in the epoch, grade, store."""
    from needlescope.config_file import load_config
    from needlescope.warehouse.store import Warehouse, default_root

    # Everything that can be checked before Prefect starts is checked here, in this order,
    # and nothing is written until it all passes.
    try:
        config = load_config(config_path)
        _check_models(config, query=not only_context)
        store = Warehouse(warehouse or config.warehouse or default_root())
        store.check_ours()
        store.check_files()
        store.ensure()
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None

    prefect_environment()
    from needlescope.flows.sweep import sweep

    flow_run = sweep(
        str(config_path),
        epoch=epoch,
        warehouse=str(store.root),
        only_context=only_context,
        return_state=True,
    )
    _run_and_report(flow_run, store.root, report and not only_context, report_dir)


@app.command()
def rerun(
    run_id: Annotated[str, typer.Argument(help="The run whose unfinished cells to rerun.")],
    model: Annotated[
        list[str] | None, typer.Option("--model", "-m", help="Only this model (repeatable).")
    ] = None,
    probe: Annotated[
        list[str] | None, typer.Option("--probe", "-p", help="Only this probe (repeatable).")
    ] = None,
    error_kind: Annotated[
        list[str] | None,
        typer.Option(
            "--error-kind",
            "-e",
            help="Only cells whose latest error is of this kind, e.g. rate_limited (repeatable); "
            "kinds that cannot succeed as sent (request_too_large, bad_request, …) are rerun "
            "only when named.",
        ),
    ] = None,
    validity: Annotated[
        list[str] | None,
        typer.Option(
            "--validity",
            help="Resend the answered cells whose answer has this validity, e.g. "
            "empty,truncated (comma-separated or repeatable); the new answer supersedes the old.",
        ),
    ] = None,
    warehouse: WarehouseOption = None,
    report: ReportOption = True,
    report_dir: ReportDirOption = Path("reports"),
) -> None:
    """Rerun the cells of RUN_ID that have no graded answer (in that run's epoch), or with
    --validity those whose answer does not measure recall."""
    from needlescope.flows.rerun import run_config
    from needlescope.validity import parse_values
    from needlescope.warehouse.store import Warehouse, default_root

    try:
        validities = parse_values(",".join(validity)) if validity else None
    except ValueError as exc:
        raise fail(f"--validity: {exc}") from None
    try:
        store = Warehouse(warehouse or default_root())
        store.check_ours()
        store.check_files()
        config, _ = run_config(store, run_id)
        _check_models(config, query=True)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None

    prefect_environment()
    from needlescope.flows.rerun import rerun_failed

    flow_run = rerun_failed(
        run_id,
        warehouse=str(store.root),
        models=model or None,
        probes=probe or None,
        error_kinds=error_kind or None,
        validities=validities,
        return_state=True,
    )
    _run_and_report(flow_run, store.root, report, report_dir)


def _check_models(config: Any, *, query: bool) -> None:
    """Keys set and endpoints answering, before Prefect starts (keys in Secret blocks are
    read by the flow)."""
    from needlescope.config import resolve_api_key
    from needlescope.providers.open import check_offline_lengths
    from needlescope.providers.reachability import check_models

    if not query:  # prompts only: no endpoint, no key is needed
        check_offline_lengths(config)
        return
    for model in config.models:
        resolve_api_key(model)
    asyncio.run(check_models(config))


def _run_and_report(flow_run: Any, root: Path, report: bool, report_dir: Path) -> None:
    """Run a sweep-like flow with a progress bar, print its summary, exit with its code."""
    from needlescope.flows.cli_progress import RichProgress
    from needlescope.flows.progress import SINK

    # One line per finished cell would drown the progress bar; failures still show.
    logging.getLogger("prefect.task_runs").setLevel(logging.WARNING)
    SINK.append(RichProgress(console))
    try:
        state = asyncio.run(flow_run)
    finally:
        SINK.clear()
    summary = _state_summary(state)
    if summary is None:
        raise fail(_state_error(state))
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    if summary.get("nothing_measured"):  # every cell dropped: a config to fix, not a result
        raise fail(f"nothing measured: {summary['nothing_measured']}")
    if report and summary.get("cells_graded", 0) + summary.get("cells_skipped", 0) > 0:
        _write_report(root, report_dir)
    if summary.get("cells_unsent"):
        raise fail(
            f"budget spent: {summary['cells_unsent']} cells left unsent. Run the same command "
            "again (with a larger budget) to finish the epoch.",
            EXIT_BUDGET_SPENT,
        )
    if summary.get("cells_failed"):
        run_id = summary.get("run_id", "RUN_ID")
        raise fail(
            f"{summary['cells_failed']} cells failed; their errors are in the failed_cells view. "
            f"Run the same command again, or `needlescope rerun {run_id}`, to retry just those.",
            EXIT_CELLS_FAILED,
        )


def _state_summary(state: Any) -> dict[str, Any] | None:
    data = getattr(state, "data", None)
    result = getattr(data, "data", data)  # a flow returning a State nests it
    if isinstance(result, dict) and "epoch" in result:
        return result
    try:
        value = state.result(raise_on_failure=False)
    except Exception:
        return None
    inner = getattr(value, "data", value)
    return inner if isinstance(inner, dict) and "epoch" in inner else None


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


def _write_report(root: Path, out: Path, **options: Any) -> None:
    from needlescope.warehouse.report.page import write_report

    path = write_report(root, out, **options)
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
    from needlescope.config_file import load_config
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


def _checked_configs(config_paths: list[Path]) -> None:
    from needlescope.config_file import load_config

    try:
        for path in config_paths:
            load_config(path)
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


@app.command()
def serve(
    config_paths: ConfigsArgument,
    cron: CronOption = None,
    warehouse: WarehouseOption = None,
) -> None:
    """Serve the nightly deployments of CONFIGS and `rerun-failed` from this process (runs
    from the UI, the API or their schedules), against $PREFECT_API_URL."""
    _checked_configs(config_paths)
    prefect_environment()
    _serve(config_paths, cron, warehouse)


@app.command()
def server(
    config_paths: ConfigsArgument,
    cron: CronOption = None,
    warehouse: WarehouseOption = None,
    port: Annotated[int, typer.Option(help="Port of the Prefect server and its UI.")] = 4200,
) -> None:
    """Start a Prefect server (UI included) on 127.0.0.1 and serve the deployments on it."""
    from needlescope.flows.local_server import running_prefect_server

    _checked_configs(config_paths)
    prefect_environment()
    with running_prefect_server(port, log=console.print) as api_url:
        os.environ["PREFECT_API_URL"] = api_url
        console.print(f"Prefect UI: [bold]{api_url.removesuffix('/api')}[/]  (Ctrl-C stops)")
        _serve(config_paths, cron, warehouse)


@app.command()
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
    _checked_configs(config_paths)
    prefect_environment()
    from needlescope.flows.deployments import deploy_to_pool, deployments_for

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


@app.command()
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


@app.command()
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
    from needlescope.warehouse.store.compaction import compact as compact_files

    store = Warehouse(warehouse)
    if not store.exists():
        raise fail(f"no warehouse at {store.root}")
    try:
        done = compact_files(store.root, min_files=min_files, grace_s=grace_minutes * 60)
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


@app.command()
def report(
    warehouse: WarehouseOption = None,
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("reports"),
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            min=0.0,
            max=100.0,
            help="Accuracy (%) for the effective context length: the longest length at which "
            "mean accuracy is at least this, there and at every shorter length tested.",
        ),
    ] = 85.0,
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
        _write_report(warehouse or default_root(), out, **options)
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
    judge_prompt: Annotated[
        str, typer.Option(help="The judge's prompt: judge-v1 (needlescope's) or uniah-judge.")
    ] = "judge-v1",
    finish_reason: Annotated[
        str | None,
        typer.Option(
            help="How the reply ended, as stored (stop, length, refusal, content_filter, …): "
            "sets `validity` (without it: unknown)."
        ),
    ] = None,
    reasoning_tokens: Annotated[
        int | None, typer.Option(help="Tokens the reply spent reasoning (for `validity`).")
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
            probe,
            expected_text,
            answer_text,
            _text_or_file(facts) if facts else None,
            finish_reason=finish_reason,
            reasoning_tokens=reasoning_tokens,
        )
        if judge is not None:
            verdict = asyncio.run(
                judge_answer(
                    str(config),
                    judge,
                    json.loads(expected_text),
                    answer_text,
                    str(rubric) if rubric else None,
                    judge_prompt,
                )
            )
            result.update(verdict)
            from needlescope.judge import disagreement

            result["disagreement"] = disagreement(result["accuracy"], verdict["judge_score"])
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    from needlescope.text import storable

    # A value read from the answer may hold a lone surrogate (a JSON "\\ud800"): printed as
    # U+FFFD, and flagged, since no terminal or pipe can take it as it is.
    text = json.dumps(result, ensure_ascii=False, default=str)
    if (printable := storable(text)) is not text:
        result["response_repaired"] = True
        printable = storable(json.dumps(result, ensure_ascii=False, default=str))
    sys.stdout.write(printable + "\n")


@app.command("import-legacy")
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


def _text_or_file(value: str) -> str:
    path = Path(value)
    try:
        if len(value) < 4096 and path.is_file():
            return path.read_text(encoding="utf-8", errors="surrogateescape")
    except (OSError, ValueError):  # ValueError: text no path can be (a NUL, a lone surrogate)
        pass
    return value


def main() -> None:
    app()


if __name__ == "__main__":
    main()
