"""Building a cell's context: fit the probe's prompt to the cell's length, or rebuild it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType

from needlescope.cells import Cell
from needlescope.errors import LengthError
from needlescope.fillers import Filler, PaperCorpusFiller, WholeFileFiller
from needlescope.haystack import fit_to_length
from needlescope.probes.base import Context, Rendered
from needlescope.providers.base import Message

Measure = Callable[[str], Awaitable[int]]
MeasureMessages = Callable[[tuple[Message, ...]], Awaitable[int]]


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
    probe: ModuleType,
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    measure: Measure,
    *,
    max_tokens: int | None = None,
    measure_haystack: Measure | None = None,
    measure_messages: MeasureMessages | None = None,
) -> Context:
    """Fit the haystack so the cell is ``cell.length`` units long: the whole prompt as sent
    (``length_budget: prompt``), the haystack alone before its needles go in (``haystack``,
    measured by ``measure_haystack``), or U-NIAH's haystack and needles in cl100k tokens
    (``seed``, the probe's ``seed_filler_chars``); a cell of length 0 takes its filler as it
    is, and the Counting-Stars paper's haystack (``fit: paper``) takes the pieces or characters
    the paper gives the cell's nominal length. ``prompt_length`` is always the whole prompt's
    measured length."""
    measured = _Measured(probe, cell, filler, filler_kind, measure, measure_messages, max_tokens)
    if not probe.FITS_FILLER:
        return await measured(0)
    if isinstance(filler, PaperCorpusFiller):  # the paper's haystack for a nominal length
        units = filler.units(cell.length)
        if units > filler.size:
            raise LengthError(
                f"{filler.name} holds {filler.size:,} {filler.unit}; a length of"
                f" {cell.length:,} needs {units:,}"
            )
        return await measured(units)
    if cell.as_is:
        if not isinstance(filler, WholeFileFiller):
            raise LengthError(f"a cell of length 0 needs a corpus used as it is, not {filler.name}")
        return await measured(filler.size)
    budget = cell.params().get("length_budget")
    if budget == "haystack":
        fit = await fit_to_length(filler.text, measure_haystack or measure, cell.length)
        return await measured(fit.n_filler_chars)
    if budget == "seed":
        return await measured(probe.seed_filler_chars(cell, filler))
    if measure_messages is None:
        fit = await fit_to_length(
            lambda n: probe.render(cell, filler, filler_kind, n).prompt_text, measure, cell.length
        )
    else:
        # A prompt of several messages is measured as sent; its text is the search's key.
        built: dict[str, Rendered] = {}

        def build(n: int) -> str:
            rendered = probe.render(cell, filler, filler_kind, n)
            built[rendered.prompt_text] = rendered
            return rendered.prompt_text

        async def measure_built(text: str) -> int:
            return await measure_rendered(built[text], measure, measure_messages)

        fit = await fit_to_length(build, measure_built, cell.length)
    return rebuild(probe, cell, filler, filler_kind, fit.n_filler_chars, fit.measured, max_tokens)


class _Measured:
    """A cell's context at a given filler size, its whole prompt measured."""

    def __init__(
        self,
        probe: ModuleType,
        cell: Cell,
        filler: Filler,
        filler_kind: str,
        measure: Measure,
        measure_messages: MeasureMessages | None,
        max_tokens: int | None,
    ) -> None:
        self.args = (probe, cell, filler, filler_kind)
        self.measure, self.measure_messages = measure, measure_messages
        self.max_tokens = max_tokens

    async def __call__(self, filler_chars: int) -> Context:
        probe, cell, filler, filler_kind = self.args
        rendered = probe.render(cell, filler, filler_kind, filler_chars)
        length = await measure_rendered(rendered, self.measure, self.measure_messages)
        budget = probe.answer_budget(cell, self.max_tokens)
        return Context(cell, rendered, filler_chars, length, budget)


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
