"""The recall probe: N distinct k-digit numbers in a haystack, to be listed in order as JSON."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from needlescope.cells import Cell
from needlescope.fillers import Filler
from needlescope.haystack import fit_to_length, insert_needles, parse_regions, place_needles
from needlescope.probes.templates import RECALL_TEMPLATES
from needlescope.providers.base import Message

Measure = Callable[[str], Awaitable[int]]


@dataclass(frozen=True)
class Needles:
    values: tuple[int, ...]
    fractions: tuple[float, ...]


@dataclass(frozen=True)
class RecallContext:
    """One cell's prompt, with everything needed to grade the answer and to rebuild it exactly."""

    cell: Cell
    prompt_text: str
    haystack_text: str
    expected: tuple[int, ...]
    fractions: tuple[float, ...]
    offsets: tuple[int, ...]
    filler_chars: int
    prompt_length: int
    max_tokens: int

    @property
    def messages(self) -> tuple[Message, ...]:
        return (Message("user", self.prompt_text),)

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.prompt_text.encode()).hexdigest()


def draw_needles(cell: Cell) -> Needles:
    """Distinct k-digit values and their positions from the cell's seed (same for every model)."""
    digits = int(cell.params()["digits"])
    rng = random.Random(cell.rng_seed)
    values = tuple(rng.sample(range(10 ** (digits - 1), 10**digits), cell.needle_count))
    fractions = place_needles(cell.needle_count, parse_regions(cell.region), cell.placement, rng)  # type: ignore[arg-type]
    return Needles(values=values, fractions=tuple(fractions))


def snap_mode(cell: Cell, filler_kind: str) -> str:
    snap = str(cell.params()["snap"])
    if snap != "auto":
        return snap
    # The seed inserts raw into the `a|` pattern; glued to a word, a number reads as a typo.
    return "char" if filler_kind == "pattern" else "word"


def render(
    cell: Cell, filler: Filler, filler_kind: str, filler_chars: int
) -> tuple[str, str, tuple[int, ...]]:
    """The prompt text around ``filler_chars`` characters of filler: (prompt, haystack, offsets)."""
    needles = draw_needles(cell)
    inserted = insert_needles(
        filler.text(filler_chars),
        [str(v) for v in needles.values],
        needles.fractions,
        snap_mode(cell, filler_kind),  # type: ignore[arg-type]
    )
    template = RECALL_TEMPLATES[cell.prompt_version]
    digits = int(cell.params()["digits"])
    prompt = template.render(digits=digits, haystack=inserted.text)
    return prompt, inserted.text, tuple(inserted.offsets)


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    """Room for the answer: each `"i": value,` entry costs about digits + 8 tokens."""
    if max_tokens is not None:
        return max_tokens
    digits = int(cell.params()["digits"])
    return cell.needle_count * (digits + 8) + 32


async def build_context(
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    measure: Measure,
    *,
    max_tokens: int | None = None,
) -> RecallContext:
    """Fit the haystack so the whole prompt, as sent, is ``cell.length`` units long."""
    fit = await fit_to_length(
        lambda n: render(cell, filler, filler_kind, n)[0], measure, cell.length
    )
    return rebuild(cell, filler, filler_kind, fit.n_filler_chars, fit.measured, max_tokens)


def rebuild(
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    filler_chars: int,
    prompt_length: int,
    max_tokens: int | None = None,
) -> RecallContext:
    """The exact prompt of a cell from its stored filler size: no tokenizer needed."""
    prompt, haystack, offsets = render(cell, filler, filler_kind, filler_chars)
    needles = draw_needles(cell)
    return RecallContext(
        cell=cell,
        prompt_text=prompt,
        haystack_text=haystack,
        expected=needles.values,
        fractions=needles.fractions,
        offsets=offsets,
        filler_chars=filler_chars,
        prompt_length=prompt_length,
        max_tokens=answer_budget(cell, max_tokens),
    )


def expected_json(values: tuple[int, ...]) -> str:
    """The expected answer in the seed's own format: {"1": v1, "2": v2, …}."""
    return json.dumps({str(i + 1): v for i, v in enumerate(values)})
