"""What ``run`` and ``rerun`` print on stdout when the flow is done: a table, one row per
model × probe of the epoch (warehouse.stats.overview), the failed cells with the command that
reruns them, then the report's path; or with ``--json`` one JSON object, the result. Progress
and logs go to stderr, never here."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from needlescope.flows.cli._common import console as stderr
from needlescope.warehouse.stats.overview import Overview, overview, thresholds_kept
from needlescope.warehouse.store import Warehouse

MIN_WIDTH = 120  # a pipe or a file gets the whole table on one line a row


def epoch_overview(root: Path, summary: dict[str, Any]) -> list[Overview]:
    """The epoch's rows; none (and a note on stderr) when they cannot be read."""
    epoch = summary.get("epoch")
    if not epoch or summary.get("only_context"):
        return []
    try:
        con = Warehouse(root).connect()
        try:
            return overview(con, epoch=str(epoch))
        finally:
            con.close()
    except Exception as exc:  # the answers are stored: a missing table loses only the table
        stderr.print(f"the result table could not be computed: {exc}", markup=False)
        return []


def as_json(summary: dict[str, Any], rows: list[Overview], report: Path | None) -> str:
    result = {**summary, "results": [r.as_json() for r in rows]}
    result["report"] = None if report is None else str(report)
    return json.dumps(result, indent=2)


def _interval(row: Overview) -> str:
    if row.mean_accuracy is None:
        return "—"
    if row.accuracy_lo is None or row.accuracy_hi is None:
        return f"{row.mean_accuracy:.1f}"
    return f"{row.mean_accuracy:.1f} ({row.accuracy_lo:.1f}–{row.accuracy_hi:.1f})"


def _length(row: Overview) -> str:
    unit = f" {row.length_unit}" if row.length_unit else ""
    if row.effective_length is not None:
        return f"{row.effective_length:,}{unit}"
    return "—" if row.longest_tested is not None else ""


def _table(rows: list[Overview]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("model")
    table.add_column("probe")
    for name in ("cells", "valid", "parse fail", "invalid"):
        table.add_column(name, justify="right")
    table.add_column("accuracy % (95% interval)", justify="right")
    table.add_column("effective length", justify="right")
    table.add_column("failed", justify="right")
    for r in rows:
        table.add_row(
            r.model,
            r.probe,
            f"{r.cells:,}",
            f"{r.answers:,}",
            f"{r.parse_failures:,}",
            f"{r.invalid:,}",
            _interval(r),
            _length(r),
            f"{r.failed:,}" if r.failed else "",
        )
    return table


def print_table(summary: dict[str, Any], rows: list[Overview], report: Path | None) -> None:
    out = Console(file=sys.stdout, highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out.width = max(out.width, MIN_WIDTH)
    epoch = summary.get("epoch", "?")
    graded = summary.get("cells_graded", 0)
    skipped = summary.get("cells_skipped", 0)
    head = f"epoch {epoch}: {graded} cells graded, {skipped} already done"
    if summary.get("cells_failed"):
        head += f", {summary['cells_failed']} failed"
    if summary.get("cells_unsent"):
        head += f", {summary['cells_unsent']} left unsent (budget)"
    out.print(head, markup=False)
    if rows:
        out.print(_table(rows))
        out.print(
            "valid: answers that measure recall (parse failures included); invalid: truncated,"
            " refused, … (counted apart); effective length: the longest length whose mean"
            f" accuracy is at least {thresholds_kept(rows)} there and at every shorter one"
            " (—: not even the shortest).",
            markup=False,
            style="dim",
        )
    elif summary.get("only_context"):
        out.print("prompts built and saved; nothing was queried.", markup=False)
    else:
        out.print("no answers in this epoch.", markup=False)
    run_id = summary.get("run_id")
    for r in rows:
        if r.failed and run_id:
            out.print(
                f"{r.model} · {r.probe}: {r.failed} failed cells; rerun them with"
                f" `needlescope rerun {run_id} --model {shlex.quote(r.model)}"
                f" --probe {r.probe}`",
                markup=False,
            )
    if report is not None:
        out.print(f"report: {report}", markup=False)
