"""The latent_list probe: a latent-list program spread through a filler fitted to the length.

The program is drawn from the cell's model-free seed (``Cell.rng_seed``) with the cell's
operations, irrelevant statements and query (its ``probe_params``), so ``render`` at the
stored filler size rebuilds the prompt exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any, cast

from needlescope.config import SweepConfig
from needlescope.grid import Cell, filler_identity, model_fields
from needlescope.haystack import Filler
from needlescope.probes.base import Grade, Rendered, figures_as_detail, grade_each, render_again
from needlescope.probes.build import default_build
from needlescope.probes.latent_list.entry import LatentListProbe
from needlescope.probes.latent_list.program import GENERATOR_VERSION, Program, Query, generate
from needlescope.probes.latent_list.render import TEMPLATES, haystack, question
from needlescope.probes.latent_list.score import grade as grade_latent
from needlescope.provenance import canonical_json

NAME = "latent_list"
FITS_FILLER = True
PLACEMENT = "even"  # the statements at evenly spaced sentence boundaries
REGION = "whole"


def expand(config: SweepConfig, probe: LatentListProbe) -> Iterator[Cell]:
    axes = itertools.product(
        config.tested_models(),
        probe.lengths,
        probe.operations,
        probe.irrelevant,
        probe.queries,
        probe.fillers,
        probe.prompts,
        range(probe.repeats),
    )
    for model, length, operations, irrelevant, query, filler, prompt, repeat in axes:
        params = {
            "operations": operations,
            "irrelevant": irrelevant,
            "query": query,
            "generator": GENERATOR_VERSION,
            "answer_tokens": probe.answer_tokens,
        }
        yield Cell(
            **model_fields(model),
            probe=NAME,
            probe_params=canonical_json(params),
            filler=filler,
            filler_spec=filler_identity(config.filler_spec(filler)),
            placement=PLACEMENT,
            region=REGION,
            prompt_version=prompt,
            length=length,
            length_unit=probe.length_unit,
            needle_count=1 + operations + irrelevant,  # statements: x's creation, then the rest
            repeat=repeat,
            seed=config.seed,
        )


def program_of(cell: Cell) -> Program:
    params = cell.params()
    return generate(
        cell.rng_seed,
        int(params["operations"]),
        int(params["irrelevant"]),
        cast(Query, params["query"]),
    )


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    program = program_of(cell)
    inserted = haystack(program, filler.text(filler_chars))
    prompt = TEMPLATES[cell.prompt_version].render(
        haystack=inserted.text, question=question(program)
    )
    size = max(len(inserted.text), 1)
    return Rendered(
        prompt_text=prompt,
        haystack_text=inserted.text,
        expected=program.expected(),
        fractions=tuple(round(o / size, 6) for o in inserted.offsets),
        offsets=inserted.offsets,
        facts={
            "query": program.query,
            "index": program.index,
            "operations": len(program.states) - 1,
            "statements": [s.text for s in program.statements],
            "relevant": [s.relevant for s in program.statements],
        },
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    if max_tokens is not None:
        return max_tokens
    return int(cell.params()["answer_tokens"])


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """Exact match (score.py); how far the answer tracked the list (``consistent_with``) goes
    in ``detail``, the answers' per-probe column."""
    return figures_as_detail(grade_latent(expected, facts, response))


grade_batch = grade_each(grade)
build = default_build(render, answer_budget, fits_filler=FITS_FILLER)
rebuild = render_again(render)
