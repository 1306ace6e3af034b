"""Fitting a RULER prompt to a token budget by its number of haystack units, as RULER does.

RULER searches for the most haystack units (noise sentences, essay words, list words) whose
prompt, measured with the model's tokenizer, stays within ``max_seq_length`` less the tokens
kept for the answer. Whole units keep RULER's structure, so the fitted prompt is the longest
within the budget, not one of exactly the budget's length: ``measured <= budget`` and one more
unit would not fit. The search extrapolates from what it has measured until it brackets the
budget, then interpolates, bisecting whenever two steps in a row land on the same side: a
handful of measurements for steady units, a small multiple of log2 of their count at worst.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from needlescope.errors import LengthError
from needlescope.probes.ruler.prompt import RulerPrompt
from needlescope.probes.ruler.templates import TOKENS_TO_GENERATE, Family

T = TypeVar("T")
LengthBudget = Literal["ruler", "prompt"]
LENGTH_BUDGETS: tuple[LengthBudget, ...] = ("ruler", "prompt")


def prompt_budget(target: int, family: Family, length_budget: LengthBudget = "ruler") -> int:
    """Tokens the prompt may hold for a cell of ``target`` tokens: under ``ruler`` the target
    is RULER's ``max_seq_length``, which counts the answer's ``tokens_to_generate`` too; under
    ``prompt`` it is the prompt's alone."""
    if length_budget == "ruler":
        budget = target - TOKENS_TO_GENERATE[family]
    elif length_budget == "prompt":
        budget = target
    else:
        raise ValueError(f"length_budget must be ruler or prompt, not {length_budget!r}")
    if budget <= 0:
        raise LengthError(
            f"a {family} cell of {target} tokens leaves no room for the prompt"
            f" ({TOKENS_TO_GENERATE[family]} are kept for the answer)"
        )
    return budget


@dataclass(frozen=True)
class Fitted(Generic[T]):
    """The longest prompt within the budget: ``units`` of haystack, ``measured`` tokens.
    ``at_limit``: the units ran out (``limit``) before the budget did."""

    prompt: T
    units: int
    measured: int
    calls: int
    at_limit: bool = False


class UnitSearch:
    """The largest n in ``minimum..limit`` with measure(build(n)) <= budget, assuming the
    measure grows with n (where it does not quite, the result still fits and n + 1 does not)."""

    def __init__(self, budget: int, minimum: int = 0, limit: int | None = None) -> None:
        if minimum < 0 or (limit is not None and limit < minimum):
            raise ValueError(f"no unit count in {minimum}..{limit}")
        self.budget, self.minimum, self.limit = budget, minimum, limit
        self.calls = 0
        self.base: tuple[int, int] | None = None  # (n, measured) at the minimum
        self.low: tuple[int, int] | None = None  # the largest n measured within the budget
        self.high: int | None = None  # the smallest n measured over it
        self.high_value: int | None = None
        self.streak = 0  # bracketed steps in a row that fit (> 0) or did not (< 0)

    def next_n(self) -> int | None:
        if self.low is None:
            return self.minimum
        n_low, value_low = self.low
        if self.high is None:
            if self.limit is not None and n_low >= self.limit:
                return None
            aim = self._extrapolate(n_low, value_low)
            return aim if self.limit is None else min(aim, self.limit)
        if self.high - n_low <= 1:
            return None
        if abs(self.streak) >= 2:
            # Interpolation keeps landing on one side (regula falsi's stall): bisect instead.
            return (n_low + self.high) // 2
        return min(self.high - 1, max(n_low + 1, self._interpolate(n_low, value_low)))

    def _extrapolate(self, n_low: int, value_low: int) -> int:
        assert self.base is not None
        n_base, value_base = self.base
        if n_low > n_base and value_low > value_base:
            per_unit = (value_low - value_base) / (n_low - n_base)
            # Aim a little past the budget, so that one step brackets it.
            return n_low + max(1, math.ceil(1.05 * (self.budget - value_low) / per_unit) + 1)
        return max(2 * n_low, n_low + 16)

    def _interpolate(self, n_low: int, value_low: int) -> int:
        assert self.high is not None and self.high_value is not None
        per_unit = (self.high_value - value_low) / (self.high - n_low)
        return n_low + round((self.budget + 0.5 - value_low) / per_unit)

    def record(self, n: int, value: int) -> bool:
        """Whether build(n) fits."""
        bracketed = self.high is not None
        fits = self._record(n, value)
        if bracketed:
            self.streak = max(self.streak, 0) + 1 if fits else min(self.streak, 0) - 1
        return fits

    def _record(self, n: int, value: int) -> bool:
        self.calls += 1
        if self.base is None:
            if value > self.budget:
                raise LengthError(
                    f"the shortest prompt ({n} haystack units) is {value} tokens,"
                    f" over the budget of {self.budget}"
                )
            self.base = (n, value)
        if value <= self.budget:
            if self.low is None or n > self.low[0]:
                self.low = (n, value)
            return True
        if self.high is None or n < self.high:
            self.high, self.high_value = n, value
        return False


def fit_units_sync(
    build: Callable[[int], T],
    measure: Callable[[T], int],
    budget: int,
    *,
    minimum: int = 0,
    limit: int | None = None,
) -> Fitted[T]:
    """The prompt ``build(n)`` with the most units n that ``measure`` keeps within ``budget``."""
    search = UnitSearch(budget, minimum, limit)
    best: T | None = None
    while (n := search.next_n()) is not None:
        built = build(n)
        if search.record(n, measure(built)) and search.low is not None and search.low[0] == n:
            best = built
    return _fitted(search, best)


async def fit_units(
    build: Callable[[int], T],
    measure: Callable[[T], Awaitable[int]],
    budget: int,
    *,
    minimum: int = 0,
    limit: int | None = None,
) -> Fitted[T]:
    """``fit_units_sync`` for a measure that asks a server (a provider's ``count_tokens``)."""
    search = UnitSearch(budget, minimum, limit)
    best: T | None = None
    while (n := search.next_n()) is not None:
        built = build(n)
        if search.record(n, await measure(built)) and search.low is not None and search.low[0] == n:
            best = built
    return _fitted(search, best)


def _fitted(search: UnitSearch, best: T | None) -> Fitted[T]:
    assert search.low is not None and best is not None
    n, value = search.low
    at_limit = search.limit is not None and n >= search.limit
    return Fitted(prompt=best, units=n, measured=value, calls=search.calls, at_limit=at_limit)


def text_measure(count_tokens: Callable[[str], int]) -> Callable[[RulerPrompt], int]:
    """Measure a prompt as RULER does: the tokens of its input, answer prefix included."""
    return lambda prompt: count_tokens(prompt.text)


def text_measure_async(
    count_tokens: Callable[[str], Awaitable[int]],
) -> Callable[[RulerPrompt], Awaitable[int]]:
    async def measure(prompt: RulerPrompt) -> int:
        return await count_tokens(prompt.text)

    return measure
