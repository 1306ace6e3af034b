"""Building a cell's context: fit the probe's prompt to the cell's length, or rebuild it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType

from needlescope.cells import Cell
from needlescope.fillers import Filler
from needlescope.haystack import fit_to_length
from needlescope.probes.base import Context

Measure = Callable[[str], Awaitable[int]]


async def build_context(
    probe: ModuleType,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    measure: Measure,
    *,
    max_tokens: int | None = None,
) -> Context:
    """Fit the haystack so the whole prompt, as sent, is ``cell.length`` units long."""
    if not probe.FITS_FILLER:
        rendered = probe.render(cell, filler, filler_kind, 0)
        return Context(
            cell,
            rendered,
            0,
            await measure(rendered.prompt_text),
            probe.answer_budget(cell, max_tokens),
        )
    fit = await fit_to_length(
        lambda n: probe.render(cell, filler, filler_kind, n).prompt_text, measure, cell.length
    )
    return rebuild(probe, cell, filler, filler_kind, fit.n_filler_chars, fit.measured, max_tokens)


def rebuild(
    probe: ModuleType,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    filler_chars: int,
    prompt_length: int,
    max_tokens: int | None = None,
) -> Context:
    """The exact prompt of a cell from its stored filler size: no tokenizer needed."""
    return Context(
        cell=cell,
        rendered=probe.render(cell, filler, filler_kind, filler_chars),
        filler_chars=filler_chars,
        prompt_length=prompt_length,
        max_tokens=probe.answer_budget(cell, max_tokens),
    )
