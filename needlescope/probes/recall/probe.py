"""The recall probe: N k-digit numbers in a haystack, to be listed in order as JSON.

needlescope's templates hide distinct values, placed over the regions laid end to end
(``even`` / ``random``); the ``seed`` placement and the ``recall-seed`` template reproduce the
recall seed's experiment (``needle_ranges``; values that may repeat).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from needlescope.config import SweepConfig
from needlescope.errors import LengthError
from needlescope.grading.recall import ErrorAnalysis, grade_recall_batch
from needlescope.grid import Cell, ModelFields, filler_identity, model_fields
from needlescope.haystack import (
    Filler,
    as_is_files,
    counted_needles,
    insert_at,
    insert_needles,
    parse_regions,
    place_needles,
    provisional_positions,
    ranges_outside,
    seed_positions,
    uncovered_parts,
)
from needlescope.probes.base import (
    BuildTools,
    Context,
    Grade,
    GradedReplies,
    NeedleResult,
    Rendered,
    render_again,
)
from needlescope.probes.build import default_build
from needlescope.probes.recall.entry import RecallProbe
from needlescope.probes.templates import RECALL_TEMPLATES, SEED_TEMPLATES
from needlescope.provenance import canonical_json

NAME = "recall"
FITS_FILLER = True


@dataclass(frozen=True)
class Needles:
    values: tuple[int, ...]
    fractions: tuple[float, ...]


def _params(probe: RecallProbe) -> str:
    params: dict[str, Any] = {"digits": probe.digits, "snap": probe.snap}
    # Only settings away from their defaults join the id: older cells keep theirs.
    if probe.length_budget != "prompt":
        params["length_budget"] = probe.length_budget
    if probe.jitter:
        params["jitter"] = probe.jitter
    return canonical_json(params)


def expand(config: SweepConfig, probe: RecallProbe) -> Iterator[Cell]:
    """Cells in grid order (model, length, needle count, filler, placement, region, prompt,
    repeat); a corpus used as it is (fit: none) gives a cell per file instead of per length,
    with length 0 ("as it is": the cells table stores the length measured)."""
    fitted = [f for f in probe.fillers if not config.filler_spec(f).as_is]
    as_is = [f for f in probe.fillers if config.filler_spec(f).as_is]
    counts = probe.needle_counts or [0]  # 0: every region gives its own counts
    for model in config.tested_models():
        fields = model_fields(model)
        for length, count, filler in itertools.product(probe.lengths or [], counts, fitted):
            spec = filler_identity(config.filler_spec(filler))
            yield from _variants(config, probe, fields, filler, spec, length, count, None)
        for filler in as_is:
            directory = config.filler_spec(filler)
            for path in as_is_files(directory.path):  # type: ignore[arg-type]
                spec = filler_identity(directory.model_copy(update={"path": path}))
                for count in counts:
                    yield from _variants(config, probe, fields, filler, spec, 0, count, path.name)


def _variants(
    config: SweepConfig,
    probe: RecallProbe,
    fields: ModelFields,
    filler: str,
    filler_spec: str,
    length: int,
    count: int,
    file: str | None,
) -> Iterator[Cell]:
    params = _params(probe)
    if file is not None:
        params = canonical_json({**json.loads(params), "file": file})
    for placement, region, prompt, repeat in itertools.product(
        probe.placements, probe.regions, probe.prompts, range(probe.repeats)
    ):
        counted = counted_needles(region) if placement == "seed" else None
        yield Cell(
            **fields,
            probe=NAME,
            probe_params=params,
            filler=filler,
            filler_spec=filler_spec,
            placement=placement,
            region=region,
            prompt_version=prompt,
            length=length,
            length_unit=probe.length_unit,
            needle_count=count if counted is None else counted,
            repeat=repeat,
            seed=config.seed,
        )


def seed_exact(cell: Cell) -> bool:
    """A seed template: the seed's values (repeats allowed) go with it."""
    return cell.prompt_version in SEED_TEMPLATES


def draw_needles(cell: Cell) -> Needles:
    """Distinct k-digit values and their positions from the cell's seed (same for every model)."""
    digits = int(cell.params()["digits"])
    rng = random.Random(cell.rng_seed)
    values = tuple(rng.sample(range(10 ** (digits - 1), 10**digits), cell.needle_count))
    regions = parse_regions(cell.region)
    fractions = place_needles(cell.needle_count, regions, cell.placement, rng)  # type: ignore[arg-type]
    return Needles(values=values, fractions=tuple(fractions))


def seed_needles(cell: Cell, haystack_chars: int) -> tuple[tuple[int, ...], list[int]]:
    """The seed's placement (``needle_ranges``): values and their character positions. In a
    haystack the ranges do not fit, the provisional positions a fit's search measures (the
    built cell is checked by :func:`build`)."""
    rng = random.Random(cell.rng_seed)
    jitter = float(cell.params().get("jitter", 0.0))
    if uncovered_parts(cell.region, haystack_chars):
        positions = provisional_positions(cell.region, cell.needle_count, haystack_chars)
    else:
        positions = seed_positions(cell.region, cell.needle_count, haystack_chars, jitter, rng)
    digits = int(cell.params()["digits"])
    low, high = 10 ** (digits - 1), 10**digits - 1
    if seed_exact(cell):  # uniform draws that may repeat, as the seed's
        values = tuple(rng.randint(low, high) for _ in positions)
    else:
        values = tuple(rng.sample(range(low, high + 1), len(positions)))
    return values, positions


def snap_mode(cell: Cell, filler_kind: str) -> str:
    snap = str(cell.params()["snap"])
    if snap != "auto":
        return snap
    # The seed inserts raw into the `a|` pattern; glued to a word, a number reads as a typo.
    return "char" if filler_kind == "pattern" else "word"


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The prompt around ``filler_chars`` characters of filler."""
    haystack = filler.text(filler_chars)
    if cell.placement == "seed":
        values, positions = seed_needles(cell, len(haystack))
        inserted = insert_at(haystack, [str(v) for v in values], positions)
        size = max(len(haystack), 1)
        needles = Needles(values, tuple(p / size for p in positions))
    else:
        needles = draw_needles(cell)
        inserted = insert_needles(
            haystack,
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
            g.parse_ok,
            g.parse_error,
            g.accuracy,
            g.answered,
            {
                "edit_distance": g.edit_distance,
                "correct": g.correct,
                "missing": g.missing,
                "extra": g.extra,
                "wrong": g.wrong,
                "uncounted": g.uncounted,
            },
        )
        for g in batch.grades
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
    if result.answered is None:  # not counted: no per-needle results
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


_fitted = default_build(render, answer_budget, fits_filler=FITS_FILLER)


async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    """The default build; a cell placed by the seed's ranges is refused when, at the size the
    fit found, a part of its ranges covers no character of the haystack."""
    context = await _fitted(cell, filler, filler_kind, tools)
    if cell.placement == "seed" and (parts := uncovered_parts(cell.region, context.filler_chars)):
        raise LengthError(ranges_outside(parts, context.filler_chars))
    return context


rebuild = render_again(render)
