"""The ``niah`` probe: RULER's needle variants (ruler/niah.py) as a needlescope probe.

An essay haystack's text is the cell's filler (RULER: Paul Graham's essays), taken as
``ESSAY_CHARS_PER_TOKEN`` characters a token of the cell's length (the essay repeats when that
is short), so the text a cell is fitted from is fixed by the cell alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from needlescope.config import SweepConfig
from needlescope.grid import Cell, filler_identity
from needlescope.haystack import Filler
from needlescope.probes.base import BuildTools, Context, Rendered, grade_each, render_again
from needlescope.probes.ruler import common as ruler
from needlescope.probes.ruler import niah
from needlescope.probes.ruler.entry import NiahProbe
from needlescope.probes.ruler.prompt import RulerPrompt

NAME = "niah"
FITS_FILLER = False
ESSAY_CHARS_PER_TOKEN = 8
FIELDS = tuple(niah.NiahSpec.__dataclass_fields__)


def expand(config: SweepConfig, probe: NiahProbe) -> Iterator[Cell]:
    variants = []
    for preset, spec in probe.specs():
        params: dict[str, Any] = {**({"preset": preset} if preset else {}), **asdict(spec)}
        if spec.type_haystack == "essay":
            for name in probe.fillers:
                identity = filler_identity(config.filler_spec(name))
                variants.append((params, spec.needle_count, (name, identity)))
        else:
            haystack = ruler.own_haystack(f"ruler-{spec.type_haystack}")
            variants.append((params, spec.needle_count, haystack))
    yield from ruler.ruler_cells(config, probe, NAME, variants)


def spec_of(cell: Cell) -> niah.NiahSpec:
    params = cell.params()
    return niah.NiahSpec(**{name: params[name] for name in FIELDS})


def essay_of(cell: Cell, filler: Filler, spec: niah.NiahSpec) -> str | None:
    if spec.type_haystack != "essay":
        return None
    return filler.text(ESSAY_CHARS_PER_TOKEN * cell.length)


def depth_facts(prompt: RulerPrompt) -> dict[str, Any]:
    """``needle_depth``: the depth (%) of the needle holding the first expected value (the
    depth × length heatmap's row; not ``depth``, which the cells view reads as a needle case's
    depth); ``asked_depths``: of every asked value's needle, in expected order."""
    needles = prompt.facts.get("needles") or []
    depth_of = {n["value"]: n["depth"] for n in needles if n.get("asked")}
    depths = [depth_of.get(value) for value in prompt.expected]
    return {"needle_depth": depths[0] if depths else None, "asked_depths": depths}


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    """The prompt around ``filler_chars`` haystack units (the cells row's ``filler_chars``)."""
    spec = spec_of(cell)
    prompt = niah.build(
        spec,
        cell.rng_seed,
        filler_chars,
        essay=essay_of(cell, filler, spec),
        version=cell.prompt_version,
    )
    return rendered(cell, prompt)


def rendered(cell: Cell, prompt: RulerPrompt) -> Rendered:
    return ruler.rendered(cell, prompt, depth_facts(prompt), located=True)


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    return ruler.family_budget("niah", cell, max_tokens)


async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    spec = spec_of(cell)
    essay = essay_of(cell, filler, spec)
    budget = cell.params()["length_budget"]

    async def fit(count: ruler.CountTokens) -> Any:
        return await niah.fit(
            spec,
            cell.rng_seed,
            cell.length,
            count,
            essay=essay,
            length_budget=budget,
            version=cell.prompt_version,
        )

    return await ruler.build_fitted(
        cell, tools, fit, answer_budget(cell, tools.max_tokens), rendered
    )


rebuild = render_again(render)


grade = ruler.grade
grade_batch = grade_each(grade)
