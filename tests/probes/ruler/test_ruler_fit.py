"""The unit search behind RULER's fitting: the longest prompt within a token budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import LengthError
from needlescope.probes.ruler.fit import fit_units, fit_units_sync, prompt_budget


def test_prompt_budget() -> None:
    assert prompt_budget(4096, "niah") == 4096 - 128
    assert prompt_budget(4096, "variable_tracking") == 4096 - 30
    assert prompt_budget(4096, "cwe") == 4096 - 120
    assert prompt_budget(4096, "fwe") == 4096 - 50
    assert prompt_budget(4096, "niah", "prompt") == 4096
    with pytest.raises(ValueError, match="length_budget must be ruler or prompt"):
        prompt_budget(4096, "niah", "haystack")  # type: ignore[arg-type]
    with pytest.raises(LengthError, match="leaves no room"):
        prompt_budget(50, "fwe")


@settings(max_examples=200, deadline=None)
@given(
    base=st.integers(0, 500),
    costs=st.lists(st.integers(0, 40), min_size=1, max_size=8),
    budget=st.integers(0, 200_000),
    minimum=st.integers(0, 20),
)
def test_largest_unit_count_within_budget(
    base: int, costs: list[int], budget: int, minimum: int
) -> None:
    """Units of uneven (cyclic) cost, some free: the search finds the exact largest n."""

    def measure(n: int) -> int:
        return base + sum(costs[i % len(costs)] for i in range(n))

    if measure(minimum) > budget:
        with pytest.raises(LengthError, match="over the budget"):
            fit_units_sync(lambda n: n, measure, budget, minimum=minimum)
        return
    if sum(costs) == 0:
        return  # nothing ever exceeds the budget: not a fit RULER's tasks can ask for
    fitted = fit_units_sync(lambda n: n, measure, budget, minimum=minimum)
    assert fitted.measured == measure(fitted.units) <= budget < measure(fitted.units + 1)
    assert fitted.prompt == fitted.units
    assert fitted.calls <= 64


def test_few_measurements_for_steady_units() -> None:
    calls = []

    def measure(n: int) -> int:
        calls.append(n)
        return 60 + 21 * n

    fitted = fit_units_sync(lambda n: n, measure, 131_072)
    assert fitted.units == (131_072 - 60) // 21
    assert fitted.calls == len(calls) <= 6


def test_a_limit_caps_the_units() -> None:
    fitted = fit_units_sync(lambda n: n, lambda n: n, 1000, limit=300)
    assert fitted.units == 300 and fitted.at_limit
    inside = fit_units_sync(lambda n: n, lambda n: n, 200, limit=300)
    assert inside.units == 200 and not inside.at_limit


async def test_async_search() -> None:
    async def measure(n: int) -> int:
        return 7 * n + 3

    fitted = await fit_units(lambda n: n, measure, 1000, minimum=2)
    assert fitted.units == 142 and fitted.measured == 997
