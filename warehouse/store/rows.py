"""Turn built contexts, replies and grades into warehouse rows (plain dicts matching schema.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from needlescope.cells import Cell
from needlescope.errors import ProviderError
from needlescope.grading import RecallGrade, analyze_errors
from needlescope.probes.base import Context, Grade
from needlescope.probes.recall import error_tables
from needlescope.providers.base import Reply
from needlescope.text import storable_values
from needlescope.validity import validity_of

INTERNAL_ERROR = "internal"
# finish reasons of a reply cut off by its token limit (OpenAI, Anthropic, Gemini spellings)
TRUNCATED_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})
ANALYSIS_TABLES = ("needle_outcomes", "hallucinations", "duplicates")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=list)


def cell_row(
    context: Context,
    run_id: str,
    *,
    haystack_length: int | None,
    planned_tokens: int | None,
    keep_prompt: bool,
    length_basis: str | None = None,
    length: int | None = None,
) -> dict[str, Any]:
    """``length``: the length measured, for a cell whose haystack was taken as it is."""
    cell = context.cell
    rendered = context.rendered
    sent_max_tokens = json.loads(cell.generation).get("max_tokens") != "omit"
    row = bare_cell_row(cell, run_id)
    if length is not None:
        row["length"] = length
    return {
        **row,
        "filler_chars": context.filler_chars,
        "prompt_length": context.prompt_length,
        "prompt_bytes": context.prompt_bytes,
        "haystack_length": haystack_length,
        "planned_tokens": planned_tokens,
        "max_tokens": context.max_tokens if sent_max_tokens else None,
        "prompt_sha256": context.prompt_sha256,
        "expected": _json(rendered.expected),
        "needle_fractions": _json(list(rendered.fractions)),
        "needle_offsets": _json(list(rendered.offsets)),
        "prompt_text": context.prompt_text if keep_prompt else None,
        "facts": _json(dict(rendered.facts)),
        "length_basis": length_basis,
    }


def _answer_base(cell: Cell, run_id: str, epoch: str, attempts: int | None) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "epoch": epoch,
        "cell_id": cell.cell_id,
        "model": cell.model,
        "probe": cell.probe,
        "answered_at": datetime.now(UTC),
        "attempts": attempts,
    }


def graded_row(
    context: Context,
    reply: Reply,
    grade: Grade,
    run_id: str,
    epoch: str,
    attempts: int | None,
    repaired: bool = False,
) -> dict[str, Any]:
    """``repaired``: the reply's text was made storable before grading (text.storable); values
    read from it (a JSON ``"\\ud800"`` in an answer) are made storable here, and flagged too."""
    row, fixed = storable_values(_graded_columns(context, reply, grade, run_id, epoch, attempts))
    row["response_repaired"] = repaired or fixed
    return row


def _graded_columns(
    context: Context, reply: Reply, grade: Grade, run_id: str, epoch: str, attempts: int | None
) -> dict[str, Any]:
    return {
        **_answer_base(context.cell, run_id, epoch, attempts),
        "response": reply.text,
        "response_kept": True,
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": None if grade.answered is None else _json(grade.answered),
        "detail": _json(dict(grade.detail)) if grade.detail else None,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "reasoning_tokens": reply.reasoning_tokens,
        "cached_tokens": reply.cached_tokens,
        "validity": validity_of(reply),
        "finish_reason": reply.finish_reason,
        "latency_s": reply.latency_s,
        "model_version": reply.model_version,
        "truncated": reply.finish_reason in TRUNCATED_REASONS,
    }


def error_row(
    cell: Cell, error: BaseException, run_id: str, epoch: str, attempts: int | None
) -> dict[str, Any]:
    kind = error.kind if isinstance(error, ProviderError) else INTERNAL_ERROR
    message = str(error) if isinstance(error, ProviderError) else f"{type(error).__name__}: {error}"
    return {
        **_answer_base(cell, run_id, epoch, attempts),
        "response_kept": False,
        "error_kind": kind,
        "error": " ".join(message.split())[:500],
    }


def bare_cell_row(cell: Cell, run_id: str) -> dict[str, Any]:
    """A cell whose prompt could not be built (e.g. its tokenizer call failed): axes only."""
    return {
        "cell_id": cell.cell_id,
        "context_id": cell.context_id,
        "run_id": run_id,
        "created_at": datetime.now(UTC),
        "model": cell.model,
        "model_identity": cell.model_identity,
        "generation": cell.generation,
        "probe": cell.probe,
        "probe_params": cell.probe_params,
        "filler": cell.filler,
        "filler_spec": cell.filler_spec,
        "placement": cell.placement,
        "region": cell.region if cell.depth is None else f"depth {cell.depth:g}%",
        "prompt_version": cell.prompt_version,
        "seed": cell.seed,
        "length": cell.length,
        "length_unit": cell.length_unit,
        "length_budget": cell.params().get("length_budget", "prompt"),
        "needle_count": cell.needle_count,
        "repeat": cell.repeat,
    }


def grade_tables(
    grade: Grade, run_id: str, epoch: str, cell_id: str, model: str, probe: str
) -> dict[str, list[dict[str, Any]]]:
    """Rows of the per-needle analysis tables for one graded answer."""
    key = {"run_id": run_id, "epoch": epoch, "cell_id": cell_id, "model": model, "probe": probe}
    tables: dict[str, list[dict[str, Any]]] = {
        "needle_outcomes": [
            {
                **key,
                "needle_index": n.needle_index,
                "expected": n.expected,
                "in_lcs": n.in_lcs,
                "outcome": n.outcome,
            }
            for n in grade.needles
        ]
    }
    for table, rows in grade.tables.items():
        tables[table] = [{**key, **row} for row in rows]
    return tables


def analysis_rows(
    expected: Sequence[int],
    grade: RecallGrade,
    run_id: str,
    epoch: str,
    cell_id: str,
    model: str,
    probe: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Needle outcomes, hallucinations and duplicates of one recall answer (legacy imports)."""
    if grade.answered is None:
        return [], [], []
    key = {"run_id": run_id, "epoch": epoch, "cell_id": cell_id, "model": model, "probe": probe}
    analysis = analyze_errors(expected, grade.answered)
    extra = error_tables(analysis)
    return (
        [{**key, **o._asdict()} for o in analysis.needles],
        [{**key, **row} for row in extra["hallucinations"]],
        [{**key, **row} for row in extra["duplicates"]],
    )
