"""The recall probe: N distinct k-digit numbers in a haystack, to be listed in order as JSON."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from needlescope.cells import Cell, canonical_json, filler_identity, model_fields
from needlescope.config import RecallProbe, SweepConfig
from needlescope.fillers import Filler
from needlescope.grading import ErrorAnalysis, grade_recall_batch
from needlescope.haystack import insert_needles, parse_regions, place_needles
from needlescope.probes.base import Grade, NeedleResult, Rendered
from needlescope.probes.templates import RECALL_TEMPLATES

NAME = "recall"
FITS_FILLER = True


@dataclass(frozen=True)
class Needles:
    values: tuple[int, ...]
    fractions: tuple[float, ...]


def expand(config: SweepConfig, probe: RecallProbe) -> Iterator[Cell]:
    params = canonical_json({"digits": probe.digits, "snap": probe.snap})
    axes = itertools.product(
        config.tested_models(),
        probe.lengths,
        probe.needle_counts,
        probe.fillers,
        probe.placements,
        probe.regions,
        probe.prompts,
        range(probe.repeats),
    )
    for model, length, count, filler, placement, region, prompt, repeat in axes:
        yield Cell(
            **model_fields(model),
            probe=NAME,
            probe_params=params,
            filler=filler,
            filler_spec=filler_identity(config.filler_spec(filler)),
            placement=placement,
            region=region,
            prompt_version=prompt,
            length=length,
            length_unit=probe.length_unit,
            needle_count=count,
            repeat=repeat,
            seed=config.seed,
        )


def draw_needles(cell: Cell) -> Needles:
    """Distinct k-digit values and their positions from the cell's seed (same for every model)."""
    digits = int(cell.params()["digits"])
    rng = random.Random(cell.rng_seed)
    values = tuple(rng.sample(range(10 ** (digits - 1), 10**digits), cell.needle_count))
    regions = parse_regions(cell.region)
    fractions = place_needles(cell.needle_count, regions, cell.placement, rng)  # type: ignore[arg-type]
    return Needles(values=values, fractions=tuple(fractions))


def snap_mode(cell: Cell, filler_kind: str) -> str:
    snap = str(cell.params()["snap"])
    if snap != "auto":
        return snap
    # The seed inserts raw into the `a|` pattern; glued to a word, a number reads as a typo.
    return "char" if filler_kind == "pattern" else "word"


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The prompt around ``filler_chars`` characters of filler."""
    needles = draw_needles(cell)
    inserted = insert_needles(
        filler.text(filler_chars),
        [str(v) for v in needles.values],
        needles.fractions,
        snap_mode(cell, filler_kind),  # type: ignore[arg-type]
    )
    template = RECALL_TEMPLATES[cell.prompt_version]
    prompt = template.render(digits=int(cell.params()["digits"]), haystack=inserted.text)
    return Rendered(
        prompt_text=prompt,
        haystack_text=inserted.text,
        expected=needles.values,
        fractions=needles.fractions,
        offsets=tuple(inserted.offsets),
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    """Room for the answer: each `"i": value,` entry costs about digits + 8 tokens."""
    if max_tokens is not None:
        return max_tokens
    digits = int(cell.params()["digits"])
    return cell.needle_count * (digits + 8) + 32


@dataclass(frozen=True)
class GradedReplies:
    """A batch of graded replies: a :class:`Grade` per reply (figures only: its ``needles``
    and ``tables`` stay empty), and the rows of the analysis tables (``needle_outcomes``,
    ``hallucinations``, ``duplicates``) as columns, where ``answer`` is the reply's position
    in the batch and the other columns are the table's own."""

    grades: list[Grade]
    tables: dict[str, dict[str, list[Any]]]


def _json_value(value: object) -> str:
    return str(value) if type(value) is int else json.dumps(value)


def _json_indices(indices: tuple[int, ...]) -> str:
    return f"[{indices[0]}]" if len(indices) == 1 else json.dumps(list(indices))


def grade_batch(
    expected: Sequence[Sequence[int]],
    facts: Sequence[Mapping[str, Any]],
    responses: Sequence[str],
) -> GradedReplies:
    """:func:`grade` for a batch of replies, in one pass (the sweep's grade task calls this)."""
    batch = grade_recall_batch(expected, responses)
    grades = [
        Grade(
            ok,
            error,
            accuracy,
            answered,
            {
                "edit_distance": distance,
                "correct": correct,
                "missing": missing,
                "extra": extra,
                "wrong": wrong,
            },
        )
        for ok, error, accuracy, distance, correct, missing, extra, wrong, answered in zip(
            batch.parse_ok,
            batch.parse_error,
            batch.accuracy,
            batch.edit_distance,
            batch.correct,
            batch.missing,
            batch.extra,
            batch.wrong,
            batch.answered,
            strict=True,
        )
    ]
    needles, halls, dups = batch.needles, batch.hallucinations, batch.duplicates
    values = needles.expected
    if not set(map(type, values)) <= {int}:
        values = [int(v) for v in values]
    tables: dict[str, dict[str, list[Any]]] = {
        "needle_outcomes": {
            "answer": needles.answer,
            "needle_index": needles.needle_index,
            "expected": values,
            "in_lcs": needles.in_lcs,
            "outcome": needles.outcome,
        },
        "hallucinations": {
            "answer": halls.answer,
            "answer_index": halls.answer_index,
            "value": [_json_value(v) for v in halls.value],
            "key_from": halls.key_from,
            "key_to": halls.key_to,
        },
        "duplicates": {
            "answer": dups.answer,
            "answer_index": dups.answer_index,
            "value": [_json_value(v) for v in dups.value],
            "needle_indices": [_json_indices(n) for n in dups.needle_indices],
        },
    }
    return GradedReplies(grades, tables)


def grade(expected: Sequence[int], facts: Mapping[str, Any], response: str) -> Grade:
    """One reply: its per-needle results in ``needles``, hallucinations and duplicates in
    ``tables`` (the same figures and rows :func:`grade_batch` gives)."""
    graded = grade_batch([expected], [facts], [response])
    result = graded.grades[0]
    if result.answered is None:
        return result
    tables = graded.tables
    needles = tables["needle_outcomes"]
    return replace(
        result,
        needles=tuple(
            NeedleResult(*row)
            for row in zip(
                needles["needle_index"],
                needles["expected"],
                needles["in_lcs"],
                needles["outcome"],
                strict=True,
            )
        ),
        tables={
            table: tuple(_column_rows(tables[table])) for table in ("hallucinations", "duplicates")
        },
    )


def _column_rows(columns: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    names = [name for name in columns if name != "answer"]
    rows = zip(*(columns[n] for n in names), strict=True)
    return [dict(zip(names, row, strict=True)) for row in rows]


def error_tables(analysis: ErrorAnalysis) -> dict[str, tuple[dict[str, Any], ...]]:
    """Hallucination and duplicate rows (without their key columns) of one answer."""
    return {
        "hallucinations": tuple(
            {**h._asdict(), "value": json.dumps(h.value)} for h in analysis.hallucinations
        ),
        "duplicates": tuple(
            {
                **d._asdict(),
                "value": json.dumps(d.value),
                "needle_indices": json.dumps(list(d.needle_indices)),
            }
            for d in analysis.duplicates
        ),
    }
