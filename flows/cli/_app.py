"""The needlescope command line (the ``needlescope`` console script). Only the commands that
orchestrate (``run``, ``rerun``, ``serve``, ``server``, ``deploy``) import Prefect, and only
once everything that can be checked before it starts has passed: the others stay fast.
A command runs past 60 lines by its options alone: typer reads them from the signature."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli import _batches as cli_batches
from needlescope.flows.cli import _gates as cli_gates
from needlescope.flows.cli import _grade as cli_grade
from needlescope.flows.cli import _import as cli_import
from needlescope.flows.cli import _ops as cli_ops
from needlescope.flows.cli import _stats as cli_stats
from needlescope.flows.cli._common import (
    EXIT_BUDGET_SPENT,
    EXIT_CELLS_FAILED,
    EXIT_GATE_FAILED,
    JsonOption,
    ReportDirOption,
    ReportOption,
    WarehouseOption,
    console,
    fail,
    prefect_environment,
    vacuum_quietly,
    write_report,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Measure how well LLMs recall needles spread through long contexts.",
    # Help texts are plain text: with rich markup, "[counts…]" would vanish as a tag.
    rich_markup_mode=None,
)


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
    as_json: JsonOption = False,
) -> None:
    """Run a sweep: query every cell of the grid not yet graded in the epoch, grade, store."""
    from needlescope.config import load_config
    from needlescope.flows.build_check import check_config, refuse_unbuildable
    from needlescope.grid import default_epoch
    from needlescope.warehouse.store import Warehouse, default_root

    # Everything that can be checked before Prefect starts is checked here, in this order,
    # and nothing is written until it all passes: the last check builds every cell to do.
    try:
        config = load_config(config_path)
        _check_models(config, query=not only_context)
        store = Warehouse(warehouse or config.warehouse or default_root())
        store.check_ours()
        store.check_files()
        done = set()
        if not only_context and store.exists():
            done = store.graded_cell_ids(epoch or default_epoch(config))
        refuse_unbuildable(asyncio.run(check_config(config, done)))
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
        config=config,  # checked above: the flow does not read the file again
        checked=True,
        return_state=True,
    )
    _run_and_report(flow_run, store.root, report and not only_context, report_dir, as_json)


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
    as_json: JsonOption = False,
) -> None:
    """Rerun the cells of RUN_ID that have no graded answer (in that run's epoch), or with
    --validity those whose answer does not measure recall."""
    from needlescope.flows.rerun import run_config
    from needlescope.grading import parse_values
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
    _run_and_report(flow_run, store.root, report, report_dir, as_json)


def _check_models(config: Any, *, query: bool) -> None:
    """Keys set and endpoints answering, before Prefect starts (keys in Secret blocks are
    read by the flow)."""
    from needlescope.config import resolve_api_key
    from needlescope.providers.local import default_threads
    from needlescope.providers.open import check_offline_lengths
    from needlescope.providers.reachability import check_models

    if not query:  # prompts only: no endpoint, no key is needed
        check_offline_lengths(config)
        return
    for model in config.models:
        resolve_api_key(model)
        if model.provider == "local" and model.threads is None:
            default_threads()  # a bad $NEEDLESCOPE_LOCAL_THREADS, here rather than in the flow
    asyncio.run(check_models(config))


def _run_and_report(
    flow_run: Any, root: Path, report: bool, report_dir: Path, as_json: bool = False
) -> None:
    """Run a sweep-like flow with a progress bar, print its result (a table, or with
    ``as_json`` one JSON object) on stdout, exit with its code."""
    from needlescope.flows.cli import _summary as cli_summary
    from needlescope.flows.cli._progress import RichProgress
    from needlescope.flows.progress import showing

    # One line per finished cell would drown the progress bar; failures still show.
    logging.getLogger("prefect.task_runs").setLevel(logging.WARNING)
    with showing(RichProgress(console)):
        state = asyncio.run(flow_run)
    vacuum_quietly()
    summary = _state_summary(state)
    if summary is None:
        raise fail(_state_error(state))
    path = None
    if summary.get("nothing_measured"):  # every cell dropped: a config to fix, not a result
        report = False
    if report and summary.get("cells_graded", 0) + summary.get("cells_skipped", 0) > 0:
        path = write_report(root, report_dir, announce=False)
    rows = cli_summary.epoch_overview(root, summary)
    if as_json:
        sys.stdout.write(cli_summary.as_json(summary, rows, path) + "\n")
    else:
        cli_summary.print_table(summary, rows, path)
    if summary.get("nothing_measured"):
        raise fail(f"nothing measured: {summary['nothing_measured']}")
    if summary.get("cells_unsent"):
        raise fail(
            f"budget spent: {summary['cells_unsent']} cells left unsent. Run the same command "
            "again (with a larger budget) to finish the epoch.",
            EXIT_BUDGET_SPENT,
        )
    if failed := [g for g in summary.get("gates") or [] if g.get("status") == "failed"]:
        more = f" (and {len(failed) - 1} more failed gates)" if len(failed) > 1 else ""
        raise fail(str(failed[0]["message"]) + more, EXIT_GATE_FAILED)
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


for command in (cli_ops.plan, cli_ops.serve, cli_ops.server, cli_ops.deploy, cli_ops.sql):
    app.command()(command)
for command in (cli_ops.compact, cli_ops.rollups, cli_ops.report, cli_grade.grade):
    app.command()(command)
app.command("import-legacy")(cli_ops.import_legacy)
app.command()(cli_gates.gates)
app.command()(cli_stats.stats)
app.command()(cli_batches.batches)
app.command("import")(cli_import.import_results)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
