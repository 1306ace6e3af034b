"""Another needle tool's records (needlescope.imports) as warehouse rows: a cell, its answer
graded by needlescope, and the answer's needle outcomes, in the same tables as a native run.

gkamradt and U-NIAH answers are ``cases`` answers (U-NIAH's RAG runs ``rag``) graded by keyword
recall, the tool's judge score kept as ``original_score``; Counting-Stars answers are
``counting_stars`` answers; RULER predictions go to their task family's probe, scored by RULER's
metric. A cell id hashes the tool, the model and the record's key: the same files give the same
ids.

Design: docs/design/warehouse.md#tool-rows
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from needlescope.grading import UNKNOWN
from needlescope.imports import CaseAnswer, RulerAnswer, StarsAnswer
from needlescope.imports.ruler import is_null, score
from needlescope.probes.base import Grade
from needlescope.probes.cases import probe as cases
from needlescope.probes.cases.case_file import default_keywords
from needlescope.probes.counting_stars import probe as counting_stars
from needlescope.provenance import canonical_json, short_hash

# Bump when the meaning of an imported cell changes, so old and new ones never share an id.
ID_VERSION: Final = 1
SCORE_ONLY = "score only: the tool kept no reply to grade"
RULER_FAMILIES: Final = (
    ("niah_", "niah"),
    ("vt", "variable_tracking"),
    ("cwe", "aggregation"),
    ("fwe", "aggregation"),
    ("qa_", "qa"),
)

Record = CaseAnswer | StarsAnswer | RulerAnswer


@dataclass
class Imported:
    """One answer of another tool as rows of ``cells``, ``answers`` and ``needle_outcomes``
    (without the run's keys, which the importer adds)."""

    cell: dict[str, Any]
    answer: dict[str, Any]
    outcomes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cell_id(self) -> str:
        return str(self.cell["cell_id"])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=list)


def cell_id_of(tool: str, model: str, key: Sequence[Any]) -> str:
    return short_hash({"import": tool, "version": ID_VERSION, "model": model, "key": list(key)})


def _cell(
    tool: str, model: str, record: Record, probe: str, params: Mapping[str, Any], **axes: Any
) -> dict[str, Any]:
    cell_id = cell_id_of(tool, model, record.key)
    identity = {
        "name": model,
        "provider": f"import:{tool}",
        "model": getattr(record, "model", None),
    }
    return {
        "cell_id": cell_id,
        "context_id": cell_id,
        "created_at": datetime.now(UTC),
        "model": model,
        "model_identity": canonical_json(identity),
        "probe": probe,
        "probe_params": canonical_json({"tool": tool, **params}),
        "filler": tool,
        "filler_spec": canonical_json(
            {"kind": "import", "tool": tool, "source": str(record.source)}
        ),
        "placement": "unknown",
        "region": "whole",
        "prompt_version": tool,
        "length_unit": "tokens",
        "length_basis": f"{tool}: the tool's own count",
        **axes,
    }


def _graded(grade: Grade) -> dict[str, Any]:
    return {
        "response_kept": True,
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": None if grade.answered is None else _json(grade.answered),
        "validity": UNKNOWN,  # no finish reason kept: counted as valid, as the seed's answers
    }


def _outcomes(grade: Grade) -> list[dict[str, Any]]:
    return [
        {
            "needle_index": n.needle_index,
            "expected": n.expected,
            "in_lcs": n.in_lcs,
            "outcome": n.outcome,
        }
        for n in grade.needles
    ]


def _whole(value: float | None) -> float | int | None:
    """A score as the judge gave it: 7.0 is 7 (the views read ``judge_score`` as an integer)."""
    return int(value) if value is not None and float(value).is_integer() else value


# --- needle cases: gkamradt, U-NIAH ------------------------------------------------------------


def case_rows(tool: str, model: str, record: CaseAnswer) -> Imported:
    case = record.key[1] if tool == "uniah" else tool  # U-NIAH: the experiment
    question = record.question or ""
    keywords = default_keywords(record.needles, question, record.true_answer)
    expected = {
        "case": case,
        "needles": list(record.needles),
        "keywords": [list(k) for k in keywords],
        "question": record.question,
        "true_answer": record.true_answer,
    }
    params: dict[str, Any] = {"case": case, **dict(record.settings)}
    if record.mode == "rag":
        params["mode"] = record.settings.get("context_mode", "rag")
    cell = _cell(
        tool,
        model,
        record,
        "rag" if record.mode == "rag" else "cases",
        params,
        length=record.length,
        depth=record.depth_percent,
        needle_count=len(record.needles) or None,
        repeat=record.repeat,
        expected=_json(expected),
        facts=_json({"depth": record.depth_percent, "source": str(record.source)}),
    )
    judged: dict[str, Any] = {"judge_model": f"{tool}'s judge"}
    if record.original_score is not None and not record.judge_unreadable:
        judged["judge_score"] = _whole(record.original_score)
    if record.judge_unreadable:
        judged["judge_error"] = "the tool's judge gave no readable score (-1)"
    answer: dict[str, Any] = {
        "answered_at": record.answered_at,
        "latency_s": record.duration_s,
        "original_score": None if record.judge_unreadable else record.original_score,
    }
    if record.response is None:
        answer |= {"response_kept": False, "uncounted": SCORE_ONLY, "validity": UNKNOWN}
        answer["detail"] = _json(judged)
        return Imported(cell, answer)
    grade = cases.grade(expected, {}, record.response)
    keyword = grade.accuracy
    score_ = judged.get("judge_score")
    if keyword is not None and score_ is not None:
        judged["disagreement"] = (keyword >= 50) != (score_ >= 7)
    answer |= _graded(grade) | {
        "response": record.response,
        "detail": _json({**grade.detail, **judged}),
    }
    return Imported(cell, answer, _outcomes(grade))


# --- Counting-Stars ----------------------------------------------------------------------------


def stars_rows(tool: str, model: str, record: StarsAnswer) -> Imported:
    params = {
        "language": record.language,
        "counts": "counting-stars",
        "reasoning": False,
        "file": record.key[1],
    }
    cell = _cell(
        tool,
        model,
        record,
        "counting_stars",
        params,
        length=record.sky_size,
        length_unit="tokens" if record.language == "en" else "chars",
        needle_count=record.star_count,
        repeat=record.repeat,
        expected=_json(list(record.counts)),
        prompt_sha256=record.prompt_sha256,
        prompt_length=record.prompt_chars,
    )
    # Its files come from the paper's code: graded by the paper's comparison (true == 1).
    grade = counting_stars.grade(record.counts, counting_stars.PAPER_SCORING, record.response)
    detail = {**grade.detail, "parameters": dict(record.parameters), "code": record.code}
    answer = _graded(grade) | {
        "response": record.response,
        "detail": _json(detail),
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
    }
    return Imported(cell, answer, _outcomes(grade))


# --- RULER -------------------------------------------------------------------------------------


def ruler_probe(task: str) -> str:
    for prefix, family in RULER_FAMILIES:
        if task == prefix or (prefix.endswith("_") and task.startswith(prefix)):
            return family
    return task


def ruler_rows(tool: str, model: str, record: RulerAnswer) -> Imported:
    params = {"task": record.task, "metric": record.metric, "folder": record.folder}
    cell = _cell(
        tool,
        model,
        record,
        ruler_probe(record.task),
        params,
        length=record.max_seq_length or record.length,
        needle_count=len(record.references),
        repeat=1,
        expected=_json(list(record.references)),
        prompt_sha256=record.input_sha256,
        prompt_length=record.length,
        facts=_json({"sample_id": record.sample_id, "index": record.index}),
    )
    null = is_null(record)
    answer = {
        "response": record.prediction,
        "response_kept": True,
        # RULER scores an empty prediction 0 and keeps it in the mean: so do we
        "parse_ok": True,
        "accuracy": score(record),
        "validity": UNKNOWN,
        "detail": _json({"task": record.task, "metric": record.metric, "null": null}),
    }
    return Imported(cell, answer)


CONVERTERS: Final[dict[str, Callable[[str, str, Any], Imported]]] = {
    "gkamradt": case_rows,
    "uniah": case_rows,
    "counting-stars": stars_rows,
    "ruler": ruler_rows,
}
