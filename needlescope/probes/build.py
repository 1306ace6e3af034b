"""Building a cell's context: fit the probe's prompt to the cell's length, or rebuild it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType

from needlescope.cells import Cell
from needlescope.errors import LengthError
from needlescope.fillers import Filler, PaperCorpusFiller, WholeFileFiller
from needlescope.haystack import fit_to_length
from needlescope.probes.base import Context

Measure = Callable[[str], Awaitable[int]]


def budget_overhead(cell: Cell) -> int:
    """Tokens a prompt may hold beyond the cell's length: where the length is the haystack's
    own, the instructions and the needles (a generous estimate, for window checks only)."""
    if cell.params().get("length_budget") != "haystack":
        return 0
    digits = int(cell.params().get("digits", 4))
    return 160 + cell.needle_count * (digits + 2)


async def build_context(
    probe: ModuleType,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    measure: Measure,
    *,
    max_tokens: int | None = None,
    measure_haystack: Measure | None = None,
) -> Context:
    """Fit the haystack so the cell is ``cell.length`` units long: the whole prompt as sent
    (``length_budget: prompt``), or the haystack alone before its needles go in
    (``haystack``, measured by ``measure_haystack``); a cell of length 0 takes its filler as
    it is, and the Counting-Stars paper's haystack (``fit: paper``) takes the pieces or
    characters the paper gives the cell's nominal length. ``prompt_length`` is always the
    whole prompt's measured length."""
    if not probe.FITS_FILLER:
        rendered = probe.render(cell, filler, filler_kind, 0)
        return Context(
            cell,
            rendered,
            0,
            await measure(rendered.prompt_text),
            probe.answer_budget(cell, max_tokens),
        )
    if isinstance(filler, PaperCorpusFiller):  # the paper's haystack for a nominal length
        units = filler.units(cell.length)
        if units > filler.size:
            raise LengthError(
                f"{filler.name} holds {filler.size:,} {filler.unit}; a length of"
                f" {cell.length:,} needs {units:,}"
            )
        return await _measured(probe, cell, filler, filler_kind, units, measure, max_tokens)
    if cell.as_is:
        if not isinstance(filler, WholeFileFiller):
            raise LengthError(f"a cell of length 0 needs a corpus used as it is, not {filler.name}")
        return await _measured(probe, cell, filler, filler_kind, filler.size, measure, max_tokens)
    if cell.params().get("length_budget") == "haystack":
        fit = await fit_to_length(filler.text, measure_haystack or measure, cell.length)
        return await _measured(
            probe, cell, filler, filler_kind, fit.n_filler_chars, measure, max_tokens
        )
    fit = await fit_to_length(
        lambda n: probe.render(cell, filler, filler_kind, n).prompt_text, measure, cell.length
    )
    return rebuild(probe, cell, filler, filler_kind, fit.n_filler_chars, fit.measured, max_tokens)


async def _measured(
    probe: ModuleType,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    filler_chars: int,
    measure: Measure,
    max_tokens: int | None,
) -> Context:
    rendered = probe.render(cell, filler, filler_kind, filler_chars)
    length = await measure(rendered.prompt_text)
    return Context(cell, rendered, filler_chars, length, probe.answer_budget(cell, max_tokens))


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
