"""Grading and persisting, a batch per task run."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from prefect import task
from prefect.runtime import task_run

from needlescope.probes import probe_module
from needlescope.probes.base import Context, Grade
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


def with_verdict(grade: Grade, verdict: dict[str, Any]) -> Grade:
    """A judge's verdict beside the deterministic grade, and whether the two disagree."""
    from needlescope.judge import disagreement

    score = verdict.get("judge_score")
    disagree = (
        None if score is None or grade.accuracy is None else disagreement(grade.accuracy, score)
    )
    return replace(grade, detail={**grade.detail, **verdict, "disagreement": disagree})


@task(name="grade", task_run_name=_grade_name)
def grade_answers(
    contexts: list[Context],
    outcomes: list[Reply | BaseException],
    attempts: list[int],
    verdicts: list[dict[str, Any] | None],
    run_id: str,
    epoch: str,
) -> GradedBatch:
    batch = GradedBatch()
    for context, outcome, tries, verdict in zip(
        contexts, outcomes, attempts, verdicts, strict=True
    ):
        if not isinstance(outcome, Reply):
            batch.tables["answers"].append(
                row_builders.error_row(context.cell, outcome, run_id, epoch, tries)
            )
            continue
        cell = context.cell
        grade = probe_module(cell.probe).grade(
            context.expected, context.rendered.facts, outcome.text
        )
        if verdict is not None:
            grade = with_verdict(grade, verdict)
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
