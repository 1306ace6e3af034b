"""The recall probe: N distinct k-digit numbers in a haystack, to be listed in order as JSON."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from needlescope.cells import Cell, canonical_json, filler_identity, model_fields
from needlescope.config import RecallProbe, SweepConfig
from needlescope.fillers import Filler
from needlescope.grading import ErrorAnalysis, analyze_errors, grade_recall
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


def grade(expected: Sequence[int], facts: Mapping[str, Any], response: str) -> Grade:
    result = grade_recall(expected, response)
    figures = result.figures()
    base = {
        "parse_ok": figures.pop("parse_ok"),
        "parse_error": figures.pop("parse_error"),
        "accuracy": figures.pop("accuracy"),
    }
    if result.answered is None:
        return Grade(**base, figures=figures)
    analysis = analyze_errors(expected, result.answered)
    return Grade(
        **base,
        answered=list(result.answered),
        figures=figures,
        needles=tuple(
            NeedleResult(o.needle_index, int(o.expected), o.in_lcs, o.outcome)
            for o in analysis.needles
        ),
        tables=error_tables(analysis),
    )


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
