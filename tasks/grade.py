"""Grading and persisting, a batch per task run."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from prefect import task
from prefect.runtime import task_run

from needlescope.probes.base import Context, Grade
from needlescope.probes.registry import probe_module
from needlescope.providers.base import Reply
from needlescope.text import storable
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store import rows as row_builders

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


# Async tasks: a sync task called from the async flow runs in a worker thread with a client
# of its own (~250 ms a call here); the work below takes a few ms a batch.
@task(name="grade", task_run_name=_grade_name)
async def grade_answers(
    contexts: list[Context],
    outcomes: list[Reply | BaseException],
    attempts: list[int],
    verdicts: list[dict[str, Any] | None],
    run_id: str,
    epoch: str,
) -> GradedBatch:
    batch = GradedBatch()
    repaired = [_storable(o) for o in outcomes]
    outcomes = [o for o, _ in repaired]
    graded = _grade_batches(contexts, outcomes, batch, run_id, epoch)
    for index, (context, outcome, tries, verdict) in enumerate(
        zip(contexts, outcomes, attempts, verdicts, strict=True)
    ):
        if not isinstance(outcome, Reply):
            batch.tables["answers"].append(
                row_builders.error_row(context.cell, outcome, run_id, epoch, tries)
            )
            continue
        grade = graded[index]
        if verdict is not None:
            grade = with_verdict(grade, verdict)
        batch.tables["answers"].append(
            row_builders.graded_row(
                context, outcome, grade, run_id, epoch, tries, repaired=repaired[index][1]
            )
        )
    return batch


def _storable(outcome: Reply | BaseException) -> tuple[Reply | BaseException, bool]:
    """A reply whose text UTF-8 can hold (graded as stored), and whether it had to change."""
    if not isinstance(outcome, Reply):
        return outcome, False
    text = storable(outcome.text)
    return (outcome, False) if text is outcome.text else (replace(outcome, text=text), True)


def _grade_batches(
    contexts: list[Context],
    outcomes: list[Reply | BaseException],
    batch: GradedBatch,
    run_id: str,
    epoch: str,
) -> dict[int, Grade]:
    """Grade the replies, a batch per probe (``grade_batch``): their grades by position, their
    analysis rows added to ``batch``."""
    positions: dict[str, list[int]] = {}
    for index, (context, outcome) in enumerate(zip(contexts, outcomes, strict=True)):
        probe = context.cell.probe
        if isinstance(outcome, Reply):
            positions.setdefault(probe, []).append(index)
    grades: dict[int, Grade] = {}
    for probe, indices in positions.items():
        chosen = [contexts[i] for i in indices]
        graded = probe_module(probe).grade_batch(
            [c.expected for c in chosen],
            [c.rendered.facts for c in chosen],
            [outcomes[i].text for i in indices],  # type: ignore[union-attr]
        )
        grades.update(zip(indices, graded.grades, strict=True))
        key_names = ("run_id", "epoch", "cell_id", "model", "probe")
        keys = [(run_id, epoch, c.cell.cell_id, c.cell.model, c.cell.probe) for c in chosen]
        for table, columns in graded.tables.items():
            batch.tables.setdefault(table, []).extend(_column_rows(columns, key_names, keys))
    return grades


def _column_rows(
    columns: dict[str, list[Any]], key_names: tuple[str, ...], keys: list[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """Rows from columns whose ``answer`` column points into ``keys`` (the key columns)."""
    names = [name for name in columns if name != "answer"]
    row_names = (*key_names, *names)
    return [
        dict(zip(row_names, keys[answer] + values, strict=True))
        for answer, values in zip(
            columns["answer"], zip(*(columns[name] for name in names), strict=True), strict=True
        )
    ]


@task(name="persist", task_run_name=_persist_name)
async def persist(
    warehouse_root: str, table: str, rows: list[dict[str, Any]], parts: list[str]
) -> str | None:
    path = Warehouse(warehouse_root).append(table, rows, parts=parts)
    return None if path is None else str(path)
