"""Grading and persisting, a batch per task run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.runtime import task_run

from needlescope.probes import probe_module
from needlescope.probes.base import Context
from needlescope.providers.base import Reply
from needlescope.warehouse import rows as row_builders
from needlescope.warehouse.store import Warehouse

GRADED_TABLES = ("answers", *row_builders.ANALYSIS_TABLES)


def _grade_name() -> str:
    return f"grade ×{len(task_run.parameters['contexts'])}"


def _persist_name() -> str:
    parameters = task_run.parameters
    return f"persist {parameters['table']} ×{len(parameters['rows'])}"


@dataclass
class GradedBatch:
    """Rows for each warehouse table, from one batch of answers."""

    tables: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {name: [] for name in GRADED_TABLES}
    )


@task(name="grade", task_run_name=_grade_name)
def grade_answers(
    contexts: list[Context],
    outcomes: list[Reply | BaseException],
    attempts: list[int],
    run_id: str,
    epoch: str,
) -> GradedBatch:
    batch = GradedBatch()
    for context, outcome, tries in zip(contexts, outcomes, attempts, strict=True):
        if not isinstance(outcome, Reply):
            batch.tables["answers"].append(
                row_builders.error_row(context, outcome, run_id, epoch, tries)
            )
            continue
        cell = context.cell
        grade = probe_module(cell.probe).grade(
            context.expected, context.rendered.facts, outcome.text
        )
        batch.tables["answers"].append(
            row_builders.graded_row(context, outcome, grade, run_id, epoch, tries)
        )
        extra = row_builders.grade_tables(
            grade, run_id, epoch, cell.cell_id, cell.model, cell.probe
        )
        for table, rows in extra.items():
            batch.tables.setdefault(table, []).extend(rows)
    return batch


@task(name="persist", task_run_name=_persist_name)
def persist(
    warehouse_root: str, table: str, rows: list[dict[str, Any]], parts: list[str]
) -> str | None:
    path = Warehouse(warehouse_root).append(table, rows, parts=parts)
    return None if path is None else str(path)
