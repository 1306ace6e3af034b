"""The warehouse's rows, one builder per kind (plain dicts matching schema.py): a run's start
or end (``run_row``), a cell (``cell_row``), a graded answer (``graded_row``, with the judge's
keys from ``judge_row``) or a failed one (``error_row``), and the per-answer tables' rows
(``table_rows``; a legacy import's: ``analysis_rows``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any, NamedTuple

from needlescope.config import SweepConfig
from needlescope.errors import ProviderError
from needlescope.grading import disagreement, validity_of
from needlescope.grading.recall import RecallGrade, analyze_errors
from needlescope.grid import Cell
from needlescope.haystack import storable_values
from needlescope.probes.base import Context, Grade
from needlescope.probes.recall.probe import error_tables
from needlescope.provenance import Fingerprint, template_sha256
from needlescope.providers.base import Reply

INTERNAL_ERROR = "internal"
# finish reasons of a reply cut off by its token limit (OpenAI, Anthropic, Gemini spellings)
TRUNCATED_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})
ANALYSIS_TABLES = ("needle_outcomes", "hallucinations", "duplicates")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=list)


def run_row(
    run_id: str,
    epoch: str,
    config: SweepConfig,
    event: str,
    *,
    flow_run_id: str | None,
    **counts: Any,
) -> dict[str, Any]:
    """A run's ``start`` or ``end`` (``counts``: cells_total, cells_graded, note, …)."""
    return {
        "run_id": run_id,
        "epoch": epoch,
        "event": event,
        "at": datetime.now(UTC),
        "config_name": config.name,
        # Keys live in the environment, never in the config, so the config is safe to store.
        "config_json": config.model_dump_json(),
        "needlescope_version": version("needlescope"),
        "flow_run_id": flow_run_id,
        **counts,
    }


def cell_row(
    built: Context | Cell,
    run_id: str,
    *,
    haystack_length: int | None = None,
    planned_tokens: int | None = None,
    keep_prompt: bool = False,
    length_basis: str | None = None,
    length: int | None = None,
) -> dict[str, Any]:
    """A built cell's row; a cell whose prompt could not be built (e.g. its tokenizer call
    failed) has its axes only. ``length``: the length measured, for a cell whose haystack was
    taken as it is."""
    if isinstance(built, Cell):
        return _axes(built, run_id)
    context, rendered = built, built.rendered
    sent_max_tokens = json.loads(context.cell.generation).get("max_tokens") != "omit"
    row = _axes(context.cell, run_id)
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


def _axes(cell: Cell, run_id: str) -> dict[str, Any]:
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
        "depth": cell.depth,
        "prompt_version": cell.prompt_version,
        "seed": cell.seed,
        "length": cell.length,
        "length_unit": cell.length_unit,
        "length_budget": cell.params().get("length_budget", "prompt"),
        "needle_count": cell.needle_count,
        "repeat": cell.repeat,
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
    *,
    cost: float | None = None,
    repaired: bool = False,
    judged: Mapping[str, Any] | None = None,
    batch_id: str | None = None,
) -> dict[str, Any]:
    """A graded answer; ``cost``: from the model's price table; ``judged``: the judge's verdict
    (needlescope.grading._judge), merged into ``detail`` by :func:`judge_row`. ``repaired``: the
    reply's text was made storable before grading (text.storable); values read from it (a JSON
    ``"\\ud800"`` in an answer) are made storable here, and flagged too."""
    detail = dict(grade.detail)
    if judged is not None:
        detail |= judge_row(judged, grade.accuracy)
    row, fixed = storable_values(
        {
            **_answer_base(context.cell, run_id, epoch, attempts),
            "response": reply.text,
            "response_kept": True,
            "parse_ok": grade.parse_ok,
            "parse_error": grade.parse_error,
            "accuracy": grade.accuracy,
            **grade.figures,
            "answered": None if grade.answered is None else _json(grade.answered),
            "detail": _json(detail) if detail else None,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "reasoning_tokens": reply.reasoning_tokens,
            "cached_tokens": reply.cached_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "cache_write_1h_tokens": reply.cache_write_1h_tokens,
            "batch_id": batch_id,
            "validity": validity_of(reply),
            "finish_reason": reply.finish_reason,
            "latency_s": reply.latency_s,
            "model_version": reply.model_version,
            "truncated": reply.finish_reason in TRUNCATED_REASONS,
            "cost_usd": cost,
            **serving_columns(context.cell, reply),
        }
    )
    row["response_repaired"] = repaired or fixed
    return row


# The fingerprint's columns of an answer (schema step 7); its model_version has a column of
# old, and its prompt_version is the cell's.
SERVING_COLUMNS = (
    "system_fingerprint",
    "service_tier",
    "sampling",
    "template_sha256",
    "gguf_sha256",
    "chat_template_sha256",
    "llama_cpp",
)


def serving_columns(cell: Cell, reply: Reply) -> dict[str, str | None]:
    found = (reply.fingerprint or Fingerprint()).to_row()
    found["template_sha256"] = template_sha256(cell.prompt_version)
    return {k: found[k] for k in SERVING_COLUMNS}


def judge_row(verdict: Mapping[str, Any], keyword_accuracy: float | None) -> dict[str, Any]:
    """The judge's keys of an answer's ``detail``: its verdict (needlescope.grading._judge's record)
    and whether it disagrees with the deterministic grade (None when either is missing)."""
    score = verdict.get("judge_score")
    disagree = (
        None if score is None or keyword_accuracy is None else disagreement(keyword_accuracy, score)
    )
    return {**verdict, "disagreement": disagree}


def error_row(
    cell: Cell,
    error: BaseException,
    run_id: str,
    epoch: str,
    attempts: int | None,
    *,
    batch_id: str | None = None,
) -> dict[str, Any]:
    """A request that failed after its retries (or a build that failed): kept, with why;
    ``batch_id``: the provider's batch it failed in."""
    kind = error.kind if isinstance(error, ProviderError) else INTERNAL_ERROR
    message = str(error) if isinstance(error, ProviderError) else f"{type(error).__name__}: {error}"
    return {
        **_answer_base(cell, run_id, epoch, attempts),
        "response_kept": False,
        "batch_id": batch_id,
        "error_kind": kind,
        "error": " ".join(message.split())[:500],
    }


class AnswerKey(NamedTuple):
    """The columns that tie a per-answer table's row to its answer."""

    run_id: str
    epoch: str
    cell_id: str
    model: str
    probe: str


def table_rows(
    tables: Mapping[str, Mapping[str, Sequence[Any]]], keys: Sequence[AnswerKey]
) -> dict[str, list[dict[str, Any]]]:
    """Rows of the per-answer tables (``GradedReplies.tables``: columns whose ``answer``
    column points into ``keys``), each with its answer's key columns."""
    found: dict[str, list[dict[str, Any]]] = {}
    for table, columns in tables.items():
        names = [name for name in columns if name != "answer"]
        values = zip(*(columns[name] for name in names), strict=True)
        found[table] = [
            {**keys[answer]._asdict(), **dict(zip(names, row, strict=True))}
            for answer, row in zip(columns["answer"], values, strict=True)
        ]
    return found


def analysis_rows(
    expected: Sequence[int],
    grade: RecallGrade,
    run_id: str,
    epoch: str,
    cell_id: str,
    model: str,
    probe: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Needle outcomes, hallucinations and duplicates of one recall answer graded on its own
    (the seed's results, as import-legacy stores them)."""
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
