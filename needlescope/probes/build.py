"""Building a cell's context: fit the probe's prompt to the cell's length, or rebuild it.

``default_build`` is the ``build`` of the probes that render around filler (see base.py);
``build_context`` and ``rebuild`` are how the rest of needlescope asks any probe.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from needlescope.errors import LengthError
from needlescope.fitting import fit_to_length
from needlescope.grid import Cell
from needlescope.haystack import Filler, PaperCorpusFiller, WholeFileFiller
from needlescope.probes.base import (
    Budget,
    BuildTools,
    Context,
    Measure,
    MeasureMessages,
    Probe,
    Rendered,
    Renderer,
)

Build = Callable[[Cell, Filler, str, BuildTools], Coroutine[Any, Any, Context]]


def budget_overhead(cell: Cell) -> int:
    """Tokens a prompt may hold beyond the cell's length: where the length is the haystack's
    own, the instructions and the needles; where it is counted in cl100k tokens (U-NIAH's
    ``seed`` budget), also what another tokenizer may count more (a generous estimate, for
    window checks only)."""
    budget = cell.params().get("length_budget")
    if budget == "seed":
        return cell.length // 4 + 200
    if budget != "haystack":
        return 0
    digits = int(cell.params().get("digits", 4))
    return 160 + cell.needle_count * (digits + 2)


async def measure_rendered(
    rendered: Rendered, measure: Measure, measure_messages: MeasureMessages | None = None
) -> int:
    """The whole prompt's length: of its messages when it has several and they can be
    measured together (chat template included), else of its text."""
    if rendered.messages and measure_messages is not None:
        return await measure_messages(rendered.messages)
    return await measure(rendered.prompt_text)


async def build_context(
    probe: Probe,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    measure: Measure,
    *,
    max_tokens: int | None = None,
    measure_haystack: Measure | None = None,
    measure_messages: MeasureMessages | None = None,
) -> Context:
    """``probe.build`` with these measures (a probe that retrieves needs its ``tools``)."""
    tools = BuildTools(measure, measure_haystack, measure_messages, max_tokens)
    return await probe.build(cell, filler, filler_kind, tools)


def default_build(
    render: Renderer,
    answer_budget: Budget,
    *,
    fits_filler: bool,
    seed_filler_chars: Callable[[Cell, Filler], int] | None = None,
) -> Build:
    """A probe's ``build``: ``render`` fitted to the cell's length (``fits_filler``), or
    rendered as it is and measured; ``seed_filler_chars`` sizes ``length_budget: seed``."""

    async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
        sized = _Sized(render, answer_budget, cell, filler, filler_kind, tools)
        if not fits_filler:
            return await sized(0)
        return await fit_context(sized, seed_filler_chars)

    return build


async def fit_context(
    sized: _Sized, seed_filler_chars: Callable[[Cell, Filler], int] | None = None
) -> Context:
    """Fit the haystack so the cell is ``cell.length`` units long: the whole prompt as sent
    (``length_budget: prompt``), the haystack alone before its needles go in (``haystack``,
    measured by ``measure_haystack``), or U-NIAH's haystack and needles in cl100k tokens
    (``seed``, ``seed_filler_chars``); a cell of length 0 takes its filler as it is, and the
    Counting-Stars paper's haystack (``fit: paper``) takes the pieces or characters the paper
    gives the cell's nominal length. ``prompt_length`` is always the whole prompt's measured
    length."""
    cell, filler, tools = sized.cell, sized.filler, sized.tools
    if isinstance(filler, PaperCorpusFiller):  # the paper's haystack for a nominal length
        units = filler.units(cell.length)
        if units > filler.size:
            raise LengthError(
                f"{filler.name} holds {filler.size:,} {filler.unit}; a length of"
                f" {cell.length:,} needs {units:,}"
            )
        return await sized(units)
    if cell.as_is:
        if not isinstance(filler, WholeFileFiller):
            raise LengthError(f"a cell of length 0 needs a corpus used as it is, not {filler.name}")
        return await sized(filler.size)
    budget = cell.params().get("length_budget")
    if budget == "haystack":
        fit = await fit_to_length(filler.text, tools.measure_haystack or tools.measure, cell.length)
        return await sized(fit.n_filler_chars)
    if budget == "seed" and seed_filler_chars is not None:
        return await sized(seed_filler_chars(cell, filler))
    if tools.fit_length is not None:  # pieces counted together (tasks/piece_fit.py)
        n, measured = await tools.fit_length(sized.render_at, cell.length)
        return sized.context(sized.render_at(n), n, measured)
    if tools.measure_messages is None:
        fit = await fit_to_length(
            lambda n: sized.render_at(n).prompt_text, tools.measure, cell.length
        )
    else:
        # A prompt of several messages is measured as sent; its text is the search's key.
        built: dict[str, Rendered] = {}

        def build(n: int) -> str:
            rendered = sized.render_at(n)
            built[rendered.prompt_text] = rendered
            return rendered.prompt_text

        async def measure_built(text: str) -> int:
            return await measure_rendered(built[text], tools.measure, tools.measure_messages)

        fit = await fit_to_length(build, measure_built, cell.length)
    return sized.context(sized.render_at(fit.n_filler_chars), fit.n_filler_chars, fit.measured)


class _Sized:
    """A cell's context at a given filler size, its whole prompt measured."""

    def __init__(
        self,
        render: Renderer,
        answer_budget: Budget,
        cell: Cell,
        filler: Filler,
        filler_kind: str,
        tools: BuildTools,
    ) -> None:
        self.render, self.answer_budget = render, answer_budget
        self.cell, self.filler, self.filler_kind, self.tools = cell, filler, filler_kind, tools

    def render_at(self, filler_chars: int) -> Rendered:
        return self.render(self.cell, self.filler, self.filler_kind, filler_chars)

    def context(self, rendered: Rendered, filler_chars: int, length: int) -> Context:
        budget = self.answer_budget(self.cell, self.tools.max_tokens)
        return Context(self.cell, rendered, filler_chars, length, budget)

    async def __call__(self, filler_chars: int) -> Context:
        rendered = self.render_at(filler_chars)
        tools = self.tools
        length = await measure_rendered(rendered, tools.measure, tools.measure_messages)
        return self.context(rendered, filler_chars, length)


def rebuild(
    probe: Probe,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    filler_chars: int,
    prompt_length: int,
    max_tokens: int | None = None,
    facts: Mapping[str, Any] | None = None,
) -> Context:
    """The exact prompt of a cell from its stored filler size (and, for a probe that needs
    them, its stored ``facts``): no tokenizer needed."""
    return Context(
        cell=cell,
        rendered=probe.rebuild(cell, filler, filler_kind, filler_chars, facts or {}),
        filler_chars=filler_chars,
        prompt_length=prompt_length,
        max_tokens=probe.answer_budget(cell, max_tokens),
    )
