"""Fitting a prompt to a token length with whole-prompt counts (Anthropic's ``count_tokens``,
Gemini's ``countTokens``: tokenizers not published, so nothing proves that pieces add up), in
as few counts as a good starting point allows.

A fit is a filler size whose prompt counts exactly the target (one count proves it), or else
the size under the target whose next one goes over (``count(n) < target < count(n + 1)``, two
counts). ``fit_from`` starts where a sibling cell's fit says, gallops outward on a miss, then
narrows the bracket; ``references`` picks the sibling by grid order, so a cell's fit is the
same whatever else the run builds. A ``RememberedFit`` is checked with one count.

Design: docs/design/fitting.md#whole
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from needlescope.errors import LengthError
from needlescope.grid import Cell

CHARS_PER_TOKEN = 4  # where a fit with nothing to go on starts
MAX_COUNTS = 64  # a search that needs more has a measure that does not grow with the filler
NEAR = 256  # tokens from the target within which guesses follow the filler's word starts
WORD_GUESSES = 3  # then the search halves what is left

# The filler sizes n in [lo, hi) whose character n begins a word (after whitespace, or first).
Starts = Callable[[int, int], list[int]]


@dataclass(frozen=True)
class RememberedFit:
    """What the warehouse's latest cells row of a cell says its fit was."""

    filler_chars: int
    planned_tokens: int
    haystack_length: int | None
    prompt_sha256: str


@dataclass(frozen=True)
class ProvenFit:
    """A fit this run has counted already (its build check): trusted without a count.
    ``stored``: it is the warehouse's remembered fit, which held; else a fresh one."""

    fit: RememberedFit
    stored: bool


@dataclass(frozen=True)
class WholeFit:
    n_filler_chars: int
    measured: int
    slope: float  # tokens per filler character near the answer: where siblings start
    counts: int  # sizes counted (cached counts included)
    per_word: float | None = None  # tokens per word start of the filler, where measured


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
    starts: Starts | None = None,
    per_word: float | None = None,
) -> WholeFit:
    """A filler size n with ``measure(n) == target`` (the first counted), else one with
    ``measure(n) < target < measure(n + 1)``, searched from ``start`` (``slope``: tokens per
    filler character, for the first jump; ``known``: sizes counted already; ``per_word``:
    tokens per word start, as a sibling's fit measured it). A sibling's answer moved by how
    many tokens this cell's prompt differs by usually is the answer; a size one under the
    target is checked with the size after it. Near the target (``NEAR`` tokens), the next size
    is where the filler's word starts (``starts``) say the missing tokens end (tokens mostly
    begin where words do). Further out, or after ``WORD_GUESSES`` such guesses, the search
    jumps by the missing tokens at the measured slope (further on each miss) until it brackets
    the target, then halves the bracket. Guesses are guesses; the counts prove the answer."""
    if target < 0:
        raise ValueError(f"target length cannot be negative, got {target}")
    seen: dict[int, int] = dict(known or {})
    ratios: dict[tuple[int, int], float | None] = {}

    async def at(n: int) -> int:
        if n not in seen:
            if len(seen) >= MAX_COUNTS:
                raise LengthError("the measured length does not grow with the filler")
            seen[n] = await measure(n)
        return seen[n]

    n = max(0, start)
    misses = 0
    side = 0  # +1: the last count was under the target, -1: over
    guesses = 0  # sizes counted on the word starts' say
    while True:
        value = await at(n)
        if value == target - 1 and await at(n + 1) == target:
            n, value = n + 1, target
        rate = _rate(seen) or slope
        per_word = (_per_word(seen, starts, ratios) if starts is not None else None) or per_word
        if value == target:  # exactly the target: nothing to prove about the size after
            return WholeFit(n, value, rate, len(seen), per_word)
        low, high = _bracket(seen, target)
        if low is not None and high is not None and high - low == 1:
            return WholeFit(low, seen[low], rate, len(seen), per_word)
        now = 1 if value <= target else -1
        misses = misses + 1 if now == side else 0
        side = now
        guess = None
        if starts is not None and guesses < WORD_GUESSES:
            guess = _by_words(seen, target, low, high, rate, starts, per_word or 1.0)
        if guess is not None and guess in seen:
            # a size under the target whose next size is not counted yet: count that
            guess = guess + 1 if seen[guess] <= target and guess + 1 not in seen else None
        if guess is None or guess in seen:
            n = _by_slope(seen, target, low, high, rate, misses)
        else:
            n, guesses = guess, guesses + 1


def _bracket(seen: dict[int, int], target: int) -> tuple[int | None, int | None]:
    """(low, high): the smallest size counted over the target, and the largest under it below
    that one; between them lies a size whose next one goes over (either may be None)."""
    over = [m for m, v in seen.items() if v > target]
    high = min(over) if over else None
    under = [m for m, v in seen.items() if v <= target and (high is None or m < high)]
    return (max(under) if under else None), high


def _by_slope(
    seen: dict[int, int], target: int, low: int | None, high: int | None, rate: float, misses: int
) -> int:
    """The next size to count (never one counted): inside the bracket, by interpolation or
    halving; outside it, a jump by the missing tokens at ``rate``, longer after each miss."""
    if low is not None and high is not None:
        v_low, v_high = seen[low], seen[high]
        if v_high - v_low >= 2 and misses < 2:
            step = round((target + 0.5 - v_low) * (high - low) / (v_high - v_low))
        else:  # within a token, or interpolation stalls: halve
            step = (high - low) // 2
        return min(high - 1, max(low + 1, low + step))
    if high is None:  # every size counted fits: further out
        assert low is not None
        aim = target + 0.5 + (2**misses - 1)
        return low + max(1, math.ceil((aim - seen[low]) / rate))
    if high == 0:  # every size counted is over, the instructions alone too
        raise LengthError(
            f"instructions alone are {seen[0]} units, more than the target length {target}"
        )
    aim = target + 0.5 - (2**misses - 1)
    return max(0, high - max(1, math.ceil((seen[high] - aim) / rate)))


def _by_words(
    seen: dict[int, int],
    target: int,
    low: int | None,
    high: int | None,
    rate: float,
    starts: Starts,
    per_word: float,
) -> int | None:
    """The size whose next character begins the word that takes the count over the target,
    counting word starts from the counted size nearest the target (None: too far)."""
    ends = []
    if low is not None:
        ends.append((target - seen[low], low, 1))
    if high is not None:
        ends.append((seen[high] - target - 1, high, -1))
    tokens, size, direction = min(ends)
    if tokens > NEAR:
        return None
    k = round(tokens / per_word)
    reach = max(64, 2 * math.ceil((k + 2) / rate))
    if direction > 0:
        found = starts(size, size + reach)
        return found[k] if len(found) > k else None
    found = starts(max(0, size - reach), size)
    return found[-1 - k] if len(found) > k else None


def _per_word(
    seen: dict[int, int], starts: Starts, ratios: dict[tuple[int, int], float | None]
) -> float | None:
    """Tokens per word start between the two sizes counted furthest apart (None: too close)."""
    first, last = min(seen), max(seen)
    if (first, last) not in ratios:
        words = len(starts(first, last)) if last - first >= 256 else 0
        ratio = (seen[last] - seen[first]) / words if words else 0.0
        ratios[(first, last)] = ratio if ratio > 0 else None
    return ratios[(first, last)]


def _rate(seen: dict[int, int]) -> float | None:
    """Tokens per filler character between the two sizes counted furthest apart."""
    if len(seen) < 2:
        return None
    lo, hi = min(seen), max(seen)
    if hi - lo < 32:  # a few characters apart: one token more or less is most of the rate
        return None
    rate = (seen[hi] - seen[lo]) / (hi - lo)
    return rate if rate > 0 else None
