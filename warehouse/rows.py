"""Turn built contexts, replies and grades into warehouse rows (plain dicts matching schema.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from needlescope.errors import ProviderError
from needlescope.grading import RecallGrade, analyze_errors
from needlescope.probes.recall import RecallContext
from needlescope.providers.base import Reply

INTERNAL_ERROR = "internal"


def cell_row(
    context: RecallContext,
    run_id: str,
    *,
    haystack_length: int | None,
    planned_tokens: int | None,
    keep_prompt: bool,
) -> dict[str, Any]:
    cell = context.cell
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
        "region": cell.region,
        "prompt_version": cell.prompt_version,
        "seed": cell.seed,
        "length": cell.length,
        "length_unit": cell.length_unit,
        "needle_count": cell.needle_count,
        "repeat": cell.repeat,
        "filler_chars": context.filler_chars,
        "prompt_length": context.prompt_length,
        "haystack_length": haystack_length,
        "planned_tokens": planned_tokens,
        "max_tokens": context.max_tokens,
        "prompt_sha256": context.prompt_sha256,
        "expected": json.dumps(list(context.expected)),
        "needle_fractions": json.dumps(list(context.fractions)),
        "needle_offsets": json.dumps(list(context.offsets)),
        "prompt_text": context.prompt_text if keep_prompt else None,
    }


def _answer_base(
    context: RecallContext, run_id: str, epoch: str, attempts: int | None
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "epoch": epoch,
        "cell_id": context.cell.cell_id,
        "model": context.cell.model,
        "probe": context.cell.probe,
        "answered_at": datetime.now(UTC),
        "attempts": attempts,
    }


def graded_row(
    context: RecallContext,
    reply: Reply,
    grade: RecallGrade,
    run_id: str,
    epoch: str,
    attempts: int | None = None,
) -> dict[str, Any]:
    return {
        **_answer_base(context, run_id, epoch, attempts),
        "response": reply.text,
        "response_kept": True,
        **grade.figures(),
        "answered": None if grade.answered is None else json.dumps(list(grade.answered)),
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "reasoning_tokens": reply.reasoning_tokens,
        "finish_reason": reply.finish_reason,
        "latency_s": reply.latency_s,
        "model_version": reply.model_version,
    }


def error_row(
    context: RecallContext,
    error: BaseException,
    run_id: str,
    epoch: str,
    attempts: int | None = None,
) -> dict[str, Any]:
    kind = error.kind if isinstance(error, ProviderError) else INTERNAL_ERROR
    message = str(error) if isinstance(error, ProviderError) else f"{type(error).__name__}: {error}"
    return {
        **_answer_base(context, run_id, epoch, attempts),
        "response_kept": False,
        "error_kind": kind,
        "error": " ".join(message.split())[:500],
    }


def needle_rows(
    context: RecallContext, grade: RecallGrade, run_id: str, epoch: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-needle outcomes, hallucinations and duplicates of one parsed answer."""
    return analysis_rows(
        context.expected, grade, run_id, epoch, context.cell.cell_id, context.cell.model, "recall"
    )


def analysis_rows(
    expected: Sequence[int],
    grade: RecallGrade,
    run_id: str,
    epoch: str,
    cell_id: str,
    model: str,
    probe: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    if grade.answered is None:
        return [], [], []
    key = {"run_id": run_id, "epoch": epoch, "cell_id": cell_id, "model": model, "probe": probe}
    analysis = analyze_errors(expected, grade.answered)
    outcomes = [{**key, **o._asdict()} for o in analysis.needles]
    invented = [
        {**key, **h._asdict(), "value": json.dumps(h.value)} for h in analysis.hallucinations
    ]
    copies = [
        {
            **key,
            **d._asdict(),
            "value": json.dumps(d.value),
            "needle_indices": json.dumps(list(d.needle_indices)),
        }
        for d in analysis.duplicates
    ]
    return outcomes, invented, copies
