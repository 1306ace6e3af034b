"""Fitting a prompt to a length in rounds: many candidate filler sizes measured per round.

For a measure that costs one request per round however many texts it counts (pieces counted
together, ``fitting/_pieces.py``), each round measures every filler size near the best guess
(``DENSE`` either side) and a few further out (``SPREAD`` × 4^k). The answer keeps
``fitting.fit_to_length``'s guarantee, measured(n) <= target < measured(n + 1), and is the
same whatever the guess: the largest n that fits with the CLEAR sizes above it all over the
target.

Design: docs/design/fitting.md#rounds
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from needlescope.errors import LengthError

DENSE = 4
SPREAD = 16
CLEAR = 16  # sizes above the answer that must all measure over the target
MAX_ROUNDS = 40


@dataclass(frozen=True)
class RoundsFit:
    n_filler_chars: int
    measured: int
    rounds: int
    sizes_measured: int


def candidates(center: float, low: int, high: int | None, reach: int) -> list[int]:
    """Sizes strictly between ``low`` and ``high`` (None: unbounded) around ``center``: every
    size within DENSE, then SPREAD × 4^k either side while within ``reach``."""
    top = high - 1 if high is not None else None
    p = round(center)
    p = max(low + 1, p if top is None else min(top, p))
    out = {p + d for d in range(-DENSE, DENSE + CLEAR + 1)}
    step = SPREAD
    while step <= reach:
        out.update((p - step, p + step))
        step *= 4
    return sorted(n for n in out if n > low and (top is None or n <= top))


async def fit_in_rounds(
    measure_many: Callable[[list[int]], Awaitable[list[int]]],
    target: int,
    guess: int,
    *,
    slope: float | None = None,
    with_empty: bool = False,
) -> RoundsFit:
    """The fit for ``target``, starting around filler size ``guess``; ``slope`` (units per
    filler character) helps where no bracket is found yet; ``with_empty`` also measures size 0
    in the first round (the instructions alone), as a fit with nothing to go on should."""
    if target < 0:
        raise ValueError(f"target length cannot be negative, got {target}")
    measured: dict[int, int] = {}
    wanted = set(candidates(guess, -1, None, max(guess, 64)))
    if with_empty:
        wanted.add(0)
    for rounds in range(1, MAX_ROUNDS + 1):
        new = sorted(n for n in wanted if n not in measured)
        if new:
            measured.update(zip(new, await measure_many(new), strict=True))
        if measured.get(0, -1) > target:
            raise LengthError(
                f"instructions alone are {measured[0]} units, more than the target length {target}"
            )
        fits = [n for n, v in measured.items() if v <= target and measured.get(n + 1, -1) > target]
        if fits:
            n = max(fits)
            above = range(n + 1, n + CLEAR + 1)
            wanted = {m for m in above if m not in measured}
            if not wanted:
                under = [m for m in above if measured[m] <= target]
                if not under:
                    return RoundsFit(n, measured[n], rounds, len(measured))
                top = max(under)
                wanted = {m for m in range(top + 1, top + CLEAR + 2) if m not in measured}
            continue
        wanted = _next(measured, target, slope)
    raise LengthError(f"no fit for {target} within {MAX_ROUNDS} rounds")  # pragma: no cover


def _next(measured: dict[int, int], target: int, slope: float | None) -> set[int]:
    above = [n for n, v in measured.items() if v > target]
    high = min(above) if above else None
    below = [n for n, v in measured.items() if v <= target and (high is None or n < high)]
    if below and high is not None:
        low = max(below)
        v_low, v_high = measured[low], measured[high]
        center = low + (target + 0.5 - v_low) * (high - low) / max(1, v_high - v_low)
        # Up to CLEAR past the high end too: the answer's clear stretch may run past it.
        return set(candidates(center, low, high + CLEAR + 1, high - low))
    ns = sorted(measured)
    secant = (measured[ns[-1]] - measured[ns[0]]) / (ns[-1] - ns[0]) if len(ns) > 1 else 0.0
    rate = secant if secant > 0 else slope
    if rate is None or rate <= 0:
        raise LengthError("the measured length does not grow with the filler")
    if high is None:  # everything measured fits: look further out
        low = max(ns)
        center = low + (target + 0.5 - measured[low]) / rate
        return set(candidates(center, low, None, max(64, round(center - low) * 2)))
    center = high - (measured[high] - target - 0.5) / rate  # nothing fits yet: look lower
    return {0, *candidates(center, -1, high, max(64, round(high - center) * 2))}
