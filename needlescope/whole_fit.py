"""Fitting a prompt to a token length with whole-prompt counts (Anthropic's ``count_tokens``,
Gemini's ``countTokens``: tokenizers not published, so nothing proves that pieces add up), in
as few counts as a good starting point allows.

A fit is proved by two counts: ``count(n) <= target < count(n + 1)``. ``fit_from`` starts
where a sibling cell's fit says the answer is, checks it with those two counts, and gallops
outward on a miss until it brackets the target, then narrows the bracket.

Which sibling a cell starts from is fixed by the grid, never by which cell finished first
(``references``): the first cell of its group in grid order (same model, filler, length,
probe and length budget) is fitted alone; the first cell of each subgroup (the same cell but
for its repeat) starts from it; every other cell starts from its subgroup's first. A token
count can fall as a character completes a word, so several sizes may satisfy the proof and
which one a search finds depends on where it starts: with starts fixed this way, a cell's
fit is the same whatever else the run builds, in whatever order. Reruns and later sweeps do
better still: they check the size the warehouse remembers (``RememberedFit``) with one count.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from needlescope.cells import Cell
from needlescope.errors import LengthError

CHARS_PER_TOKEN = 4  # where a fit with nothing to go on starts
MAX_COUNTS = 64  # a search that needs more has a measure that does not grow with the filler


@dataclass(frozen=True)
class RememberedFit:
    """What the warehouse's latest cells row of a cell says its fit was."""

    filler_chars: int
    planned_tokens: int
    haystack_length: int | None
    prompt_sha256: str


@dataclass(frozen=True)
class WholeFit:
    n_filler_chars: int
    measured: int
    slope: float  # tokens per filler character near the answer: where siblings start
    counts: int  # sizes counted (cached counts included)


def group_key(cell: Cell) -> tuple[object, ...]:
    """Cells whose fits start from each other: same model, filler, length, probe and budget."""
    budget = cell.params().get("length_budget")
    return (cell.model, cell.filler, cell.length, cell.length_unit, cell.probe, budget)


def subgroup_key(cell: Cell) -> tuple[object, ...]:
    """The same cell but for its repeat: prompts that differ only in drawn values."""
    return (
        *group_key(cell),
        cell.probe_params,
        cell.placement,
        cell.region,
        cell.prompt_version,
        cell.needle_count,
        cell.depth,
    )


def references(grid: Iterable[Cell]) -> dict[str, Cell | None]:
    """Each grid cell's reference (by cell id): the cell whose fit its own starts from, or
    None for a group's first cell, fitted alone. A reference is always earlier in the grid
    and is itself a group's first or has one as its reference: chains are at most two long."""
    first_of_group: dict[tuple[object, ...], Cell] = {}
    first_of_subgroup: dict[tuple[object, ...], Cell] = {}
    out: dict[str, Cell | None] = {}
    for cell in grid:
        group = first_of_group.setdefault(group_key(cell), cell)
        sub = first_of_subgroup.setdefault(subgroup_key(cell), cell)
        if cell.cell_id in out:
            continue
        out[cell.cell_id] = sub if sub is not cell else (group if group is not cell else None)
    return out


async def fit_from(
    measure: Callable[[int], Awaitable[int]],
    target: int,
    start: int,
    slope: float,
    known: dict[int, int] | None = None,
) -> WholeFit:
    """The filler size n with ``measure(n) <= target < measure(n + 1)``, searched from
    ``start`` (``slope``: tokens per filler character, for the first jump).

    The start and the size after it are counted first: a sibling's answer moved by how many
    tokens this cell's prompt differs by is usually right. On a miss the search jumps by the
    tokens still missing at the measured slope, further each time it lands on the same side,
    until sizes under and over the target bracket it, then halves the bracket (interpolating
    while it spans more than a token); ``known``: sizes counted already."""
    if target < 0:
        raise ValueError(f"target length cannot be negative, got {target}")
    seen: dict[int, int] = dict(known or {})

    async def at(n: int) -> int:
        if n not in seen:
            if len(seen) >= MAX_COUNTS:
                raise LengthError("the measured length does not grow with the filler")
            seen[n] = await measure(n)
        return seen[n]

    n = max(0, start)
    if await at(n) <= target and await at(n + 1) > target:
        return WholeFit(n, seen[n], slope, len(seen))
    misses = 0
    side = 0  # +1: the last count was under the target, -1: over
    while True:
        over = [m for m, v in seen.items() if v > target]
        high = min(over) if over else None
        under = [m for m, v in seen.items() if v <= target and (high is None or m < high)]
        low = max(under) if under else None
        rate = _rate(seen) or slope
        if low is not None and high is not None:
            if high - low == 1:
                return WholeFit(low, seen[low], rate, len(seen))
            v_low, v_high = seen[low], seen[high]
            if v_high - v_low >= 2 and misses < 2:
                step = round((target + 0.5 - v_low) * (high - low) / (v_high - v_low))
            else:  # within a token, or interpolation stalls: halve
                step = (high - low) // 2
            n = min(high - 1, max(low + 1, low + step))
        elif high is None:  # every size counted fits: further out
            assert low is not None
            aim = target + 0.5 + (2**misses - 1)
            n = low + max(1, math.ceil((aim - seen[low]) / rate))
        else:  # every size counted is over
            if high == 0:
                raise LengthError(
                    f"instructions alone are {seen[0]} units, more than the target length {target}"
                )
            aim = target + 0.5 - (2**misses - 1)
            n = max(0, high - max(1, math.ceil((seen[high] - aim) / rate)))
        now = 1 if await at(n) <= target else -1
        misses = misses + 1 if now == side else 0
        side = now


def _rate(seen: dict[int, int]) -> float | None:
    """Tokens per filler character between the two sizes counted furthest apart."""
    if len(seen) < 2:
        return None
    lo, hi = min(seen), max(seen)
    if hi - lo < 32:  # a few characters apart: one token more or less is most of the rate
        return None
    rate = (seen[hi] - seen[lo]) / (hi - lo)
    return rate if rate > 0 else None


def start_from(reference: WholeFit, offset: int) -> int:
    """Where a cell starts whose prompt counts ``offset`` tokens more than the reference's at
    the reference's size: the reference's answer, moved by those tokens' worth of filler."""
    if offset == 0:
        return reference.n_filler_chars
    return max(0, reference.n_filler_chars - round(offset / max(reference.slope, 1e-6)))
