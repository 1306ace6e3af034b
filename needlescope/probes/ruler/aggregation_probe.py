"""The ``aggregation`` probe: RULER's ``cwe`` and ``fwe`` (ruler/aggregation.py), by
``task``. cwe's frequencies follow the cell's length (6 and 1 under 4,096 tokens), as RULER's
follow its ``max_seq_length``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from needlescope.config import SweepConfig
from needlescope.grid import Cell
from needlescope.haystack import Filler
from needlescope.probes.base import BuildTools, Context, Rendered, grade_each, render_again
from needlescope.probes.ruler import aggregation as agg
from needlescope.probes.ruler import common as ruler
from needlescope.probes.ruler.entry import CWE_PARAMETERS, FWE_PARAMETERS, AggregationProbe
from needlescope.probes.ruler.prompt import RulerPrompt
from needlescope.probes.ruler.templates import Family

NAME = "aggregation"
FITS_FILLER = False
HAYSTACKS = {
    "cwe": ruler.own_haystack("ruler-cwe-words"),
    "fwe": ruler.own_haystack("ruler-fwe-coded"),
}
ANSWERS = {"fwe": 3}  # fwe asks for the vocabulary's ranks 2-4


def expand(config: SweepConfig, probe: AggregationProbe) -> Iterator[Cell]:
    names = CWE_PARAMETERS if probe.task == "cwe" else FWE_PARAMETERS
    params: dict[str, Any] = {"task": probe.task, **{n: getattr(probe, n) for n in names}}
    needles = probe.num_cw if probe.task == "cwe" else ANSWERS["fwe"]
    variants = [(params, needles, HAYSTACKS[probe.task])]
    yield from ruler.ruler_cells(config, probe, NAME, variants)


def task_of(cell: Cell) -> Family:
    return "fwe" if cell.params()["task"] == "fwe" else "cwe"


def cwe_spec(cell: Cell) -> agg.CweSpec:
    params = cell.params()
    return agg.CweSpec(*(int(params[name]) for name in CWE_PARAMETERS))


def fwe_spec(cell: Cell) -> agg.FweSpec:
    params = cell.params()
    return agg.FweSpec(
        float(params["alpha"]), int(params["vocab_size"]), int(params["coded_wordlen"])
    )


def prompt_at(cell: Cell, units: int) -> RulerPrompt:
    if task_of(cell) == "cwe":
        return agg.build_cwe(
            cwe_spec(cell), cell.rng_seed, units, cell.length, version=cell.prompt_version
        )
    return agg.build_fwe(fwe_spec(cell), cell.rng_seed, units, version=cell.prompt_version)


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The prompt with ``filler_chars`` units: cwe's distinct words, fwe's Zipf size."""
    return ruler.rendered(cell, prompt_at(cell, filler_chars))


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    return ruler.family_budget(task_of(cell), cell, max_tokens)


async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    budget = cell.params()["length_budget"]
    seed, version = cell.rng_seed, cell.prompt_version

    async def fit(count: ruler.CountTokens) -> Any:
        if task_of(cell) == "cwe":
            return await agg.fit_cwe(
                cwe_spec(cell), seed, cell.length, count, length_budget=budget, version=version
            )
        return await agg.fit_fwe(
            fwe_spec(cell), seed, cell.length, count, length_budget=budget, version=version
        )

    return await ruler.build_fitted(cell, tools, fit, answer_budget(cell, tools.max_tokens))


grade = ruler.grade
grade_batch = grade_each(grade)
rebuild = render_again(render)
