"""Token-exact fitting through a provider that counts whole prompts only (Anthropic, Gemini,
an OpenAI-wire server's tokenizer endpoint): each cell starts from its reference's fit
(``needlescope.fitting._whole``), so most cells cost the count (or two) that proves their fit.

A cell's reference is fixed by the grid (the config's cells in grid order), so its fit does not
depend on which cells this run builds or in what order; a reference the run does not build
itself is fitted too (once per run: fits are shared, concurrent askers wait for one search).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from needlescope.errors import LengthError
from needlescope.fitting import CHARS_PER_TOKEN, Starts, WholeFit, fit_from, references
from needlescope.grid import Cell
from needlescope.probes.base import Rendered

Render = Callable[[int], Rendered]
# A size's whole prompt in tokens (counted once per text: the builder remembers counts).
MeasureAt = Callable[[Render, int], Awaitable[int]]


@dataclass
class WholeFitter:
    """Per sweep: every cell's fit, shared by the cells that start from it."""

    grid: Callable[[], list[Cell]]  # the config's cells in grid order (asked once)
    render_of: Callable[[Cell], Render]
    starts_of: Callable[[Cell], Starts]  # where the cell's filler's words begin
    _refs: dict[str, Cell | None] | None = None
    _fits: dict[tuple[str, str], asyncio.Task[WholeFit]] = field(default_factory=dict)
    fits: int = 0  # searches run, for the benchmark
    counted: int = 0  # sizes they counted

    def reference(self, cell: Cell) -> Cell | None:
        if self._refs is None:
            self._refs = references(self.grid())
        return self._refs.get(cell.cell_id)

    async def fit(self, model: str, cell: Cell, render: Render, measure: MeasureAt) -> WholeFit:
        """``cell``'s fit (``render``: its prompt at a filler size)."""
        key = (model, cell.cell_id)
        task = self._fits.get(key)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = asyncio.ensure_future(self._search(model, cell, render, measure))
            self._fits[key] = task
        # Shielded: a cell cancelled while it waits leaves the search to the others.
        return await asyncio.shield(task)

    async def _search(self, model: str, cell: Cell, render: Render, measure: MeasureAt) -> WholeFit:
        target = cell.length

        async def at(n: int) -> int:
            return await measure(render, n)

        ref_cell = self.reference(cell)
        ref = None
        if ref_cell is not None:
            try:
                ref = await self.fit(model, ref_cell, self.render_of(ref_cell), measure)
            except LengthError:  # e.g. its instructions alone are too long: fit this alone
                ref = None
        self.fits += 1
        starts = self.starts_of(cell)
        if ref is None:
            start, slope = target * CHARS_PER_TOKEN, 1 / CHARS_PER_TOKEN
            found = await fit_from(at, target, start, slope, starts=starts)
        else:
            # The reference's size counted with this cell's prompt: how many tokens it differs
            # by, from which the filler's word starts (or the slope) say where to go.
            here = await at(ref.n_filler_chars)
            known = {ref.n_filler_chars: here}
            found = await fit_from(
                at, target, ref.n_filler_chars, ref.slope, known, starts, ref.per_word
            )
        self.counted += found.counts
        return found
