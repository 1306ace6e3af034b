"""Grading a batch of answers into the warehouse's rows: each probe's replies graded together
(``grade_batch``), failures kept as rows of their own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from needlescope.haystack import storable
from needlescope.probes.base import Grade
from needlescope.probes.registry import probe_module
from needlescope.providers.base import Reply
from needlescope.tasks.query import Answer
from needlescope.warehouse.store import rows

GRADED_TABLES = ("answers", *rows.ANALYSIS_TABLES)


# Not a task run: grading a batch takes a few ms of CPU, less than Prefect's work to record a
# task run of it (about 16 KB of database and 0.7 ms of server CPU a task run, measured
# 2026-11-29 with bench_orchestration.py's scale part); the batch's query task run shows it.
async def grade_answers(
    answers: list[Answer], run_id: str, epoch: str
) -> dict[str, list[dict[str, Any]]]:
    """The rows of each table for a batch of answers: ``answers`` last, as it marks a cell done."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in GRADED_TABLES}
    stored = [_storable(answer) for answer in answers]
    grades = _grade(stored, tables, run_id, epoch)
    for index, (original, answer) in enumerate(zip(answers, stored, strict=True)):
        cell = answer.context.cell
        if not isinstance(answer.outcome, Reply):
            row = rows.error_row(
                cell, answer.outcome, run_id, epoch, answer.attempts, batch_id=answer.batch_id
            )
        else:
            row = rows.graded_row(
                answer.context,
                answer.outcome,
                grades[index],
                run_id,
                epoch,
                answer.attempts,
                cost=answer.cost_usd,
                repaired=answer is not original,
                judged=answer.verdict,
                batch_id=answer.batch_id,
            )
        tables["answers"].append(row)
    return tables


def _storable(answer: Answer) -> Answer:
    """The answer with a reply text UTF-8 can hold (graded as stored): a new one if it had to
    change, so the row can say it was repaired."""
    if not isinstance(answer.outcome, Reply):
        return answer
    text = storable(answer.outcome.text)
    if text is answer.outcome.text:
        return answer
    return replace(answer, outcome=replace(answer.outcome, text=text))


def _grade(
    answers: list[Answer], tables: dict[str, list[dict[str, Any]]], run_id: str, epoch: str
) -> dict[int, Grade]:
    """The replies graded a batch per probe: their grades by position, their per-answer
    tables' rows added to ``tables``."""
    replies: dict[str, list[tuple[int, Reply]]] = {}
    for index, answer in enumerate(answers):
        if isinstance(answer.outcome, Reply):
            replies.setdefault(answer.context.cell.probe, []).append((index, answer.outcome))
    grades: dict[int, Grade] = {}
    for probe, found in replies.items():
        indices = [index for index, _ in found]
        chosen = [answers[i].context for i in indices]
        graded = probe_module(probe).grade_batch(
            [c.expected for c in chosen],
            [c.rendered.facts for c in chosen],
            [reply.text for _, reply in found],
        )
        grades.update(zip(indices, graded.grades, strict=True))
        keys = [rows.AnswerKey(run_id, epoch, c.cell.cell_id, c.cell.model, probe) for c in chosen]
        for table, table_rows in rows.table_rows(graded.tables, keys).items():
            tables.setdefault(table, []).extend(table_rows)
    return grades
