"""The ``variable_tracking`` probe: RULER's ``vt`` (ruler/variable_tracking.py). Its worked
example is fitted to 500 tokens on its own: its units are in the cell's ``facts``
(``fewshot_units``), which rebuilding the prompt needs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any

from needlescope.config import SweepConfig
from needlescope.errors import MissingFacts
from needlescope.grid import Cell
from needlescope.haystack import Filler
from needlescope.probes.base import BuildTools, Context, Rendered, grade_each
from needlescope.probes.ruler import common as ruler
from needlescope.probes.ruler import variable_tracking as vt
from needlescope.probes.ruler.entry import VariableTrackingProbe
from needlescope.probes.ruler.prompt import RulerPrompt

NAME = "variable_tracking"
FITS_FILLER = False
HAYSTACK = ruler.own_haystack("ruler-vt-noise")


def expand(config: SweepConfig, probe: VariableTrackingProbe) -> Iterator[Cell]:
    spec = vt.VtSpec(probe.num_chains, probe.num_hops, probe.fewshot)
    variants = [(asdict(spec), spec.num_hops + 1, HAYSTACK)]
    yield from ruler.ruler_cells(config, probe, NAME, variants)


def spec_of(cell: Cell) -> vt.VtSpec:
    params = cell.params()
    return vt.VtSpec(int(params["num_chains"]), int(params["num_hops"]), bool(params["fewshot"]))


def _rendered(cell: Cell, units: int, fewshot_units: int | None) -> Rendered:
    prompt = vt.build(
        spec_of(cell),
        cell.rng_seed,
        units,
        fewshot_units=fewshot_units,
        version=cell.prompt_version,
    )
    return rendered(cell, prompt)


def rendered(cell: Cell, prompt: RulerPrompt) -> Rendered:
    return ruler.rendered(cell, prompt, located=True)


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """Without its worked example's size (``rebuild`` reads it from the facts), a prompt only
    for a cell with ``fewshot: false``."""
    if spec_of(cell).fewshot:
        raise MissingFacts("a vt prompt with its worked example needs facts.fewshot_units")
    return _rendered(cell, filler_chars, None)


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    return ruler.family_budget("variable_tracking", cell, max_tokens)


async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    spec = spec_of(cell)
    budget = cell.params()["length_budget"]

    async def fit(count: ruler.CountTokens) -> Any:
        return await vt.fit(
            spec,
            cell.rng_seed,
            cell.length,
            count,
            length_budget=budget,
            version=cell.prompt_version,
        )

    return await ruler.build_fitted(
        cell, tools, fit, answer_budget(cell, tools.max_tokens), rendered
    )


def rebuild(
    cell: Cell, filler: Filler, filler_kind: str, filler_chars: int, facts: Mapping[str, Any]
) -> Rendered:
    fewshot_units = facts.get("fewshot_units")
    if spec_of(cell).fewshot and not isinstance(fewshot_units, int):
        raise MissingFacts("the cell's facts lack fewshot_units (its worked example's size)")
    return _rendered(cell, filler_chars, fewshot_units if spec_of(cell).fewshot else None)


grade = ruler.grade
grade_batch = grade_each(grade)
