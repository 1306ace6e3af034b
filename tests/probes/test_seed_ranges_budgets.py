"""The seed's needle ranges (``placements: [seed]``) at every length budget and unit.

Each cell is built the way a sweep builds it (``recall.build``: the fit, then the prompt) with
real measures: UTF-8 bytes, characters, and cl100k_base tokens (tiktoken, offline). The
positions expected are worked by hand from the seed's rules (docs/probes/recall.md, "Reproducing
the recall seed") on the haystack the cell holds: for bytes and characters as numbers, for tokens
as the rule applied to the size the fit found (which the test checks is the longest that fits).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from needlescope.config._sweep import parse_config
from needlescope.errors import LengthError
from needlescope.fitting import tokens
from needlescope.fitting._search import measure_text
from needlescope.grid._cells import Cell
from needlescope.haystack._fillers import PatternFiller
from needlescope.probes.base import BuildTools, Context
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_grid

LENGTH = 4000
NEEDLES = 6
DIGITS = 4
# The seed's prompt before the haystack: 326 bytes of UTF-8, 324 characters (an en dash).
PREFIX_BYTES, PREFIX_CHARS = 326, 324
URL = "http://127.0.0.1:9/v1"  # never asked: the lengths are measured here
REGIONS = ["0-1", "1500-1900", "0-0.25,0.75-1"]


def cell_of(unit: str, budget: str, region: str, jitter: float = 0.0) -> Cell:
    entry: dict[str, Any] = {
        "probe": "recall",
        "prompts": ["recall-seed"],
        "fillers": ["pattern"],
        "lengths": [LENGTH],
        "length_unit": unit,
        "length_budget": budget,
        "needle_counts": [NEEDLES],
        "regions": [region],
    }
    if jitter:
        entry["jitter"] = jitter
    config = parse_config(
        {
            "name": "ranges",
            "models": [{"name": "m", "provider": "openai", "base_url": URL, "model": "x"}],
            "probes": [entry],
        }
    )
    (cell,) = expand_grid(config)
    assert cell.placement == "seed"
    return cell


def measure_in(unit: str) -> Callable[[str], Awaitable[int]]:
    async def measure(text: str) -> int:
        if unit == "tokens":
            return tokens.count(text)
        return measure_text(text, unit)  # type: ignore[arg-type]

    return measure


async def build(cell: Cell) -> Context:
    measure = measure_in(cell.length_unit)
    tools = BuildTools(measure=measure, measure_haystack=measure)
    return await recall.build(cell, PatternFiller("a|"), "pattern", tools)


def positions_of(context: Context) -> list[int]:
    """Each needle's index in the haystack before any insertion (the seed's positions)."""
    return [offset - DIGITS * i for i, offset in enumerate(sorted(context.rendered.offsets))]


def by_rule(region: str, chars: int) -> list[int]:
    """The seed's rule for the three regions of these tests, spelled out (6 needles)."""
    if region == "0-1":  # one part [0, chars): every chars // 5, the last at the end
        step = chars // 5
        return [i * step for i in range(5)] + [chars]
    if region == "1500-1900":  # [1500, 1900): every 400 // 5 = 80
        return [1500, 1580, 1660, 1740, 1820, 1900]
    # [0, q) and [t, chars), q = int(chars × 0.25), t = int(chars × 0.75): of near equal
    # length, so 3 needles each (round(6 × L1 / (L1 + L2)) = 3), every L // 2.
    q, t = int(chars * 0.25), int(chars * 0.75)
    return [0, q // 2, q, t, t + (chars - t) // 2, chars]


# The haystacks, worked by hand. The whole prompt (`prompt`): the length minus the seed's
# prefix and the 6 × 4 digits of the needles; `a|` is one byte a character. The haystack's own
# length (`haystack`): the length itself.
HAYSTACK = {
    ("bytes", "prompt"): LENGTH - PREFIX_BYTES - NEEDLES * DIGITS,  # 3650
    ("chars", "prompt"): LENGTH - PREFIX_CHARS - NEEDLES * DIGITS,  # 3652
    ("bytes", "haystack"): LENGTH,
    ("chars", "haystack"): LENGTH,
}
WORKED = {
    ("bytes", "prompt", "0-1"): [0, 730, 1460, 2190, 2920, 3650],
    ("bytes", "prompt", "0-0.25,0.75-1"): [0, 456, 912, 2737, 3193, 3650],
    ("chars", "prompt", "0-1"): [0, 730, 1460, 2190, 2920, 3652],
    ("chars", "prompt", "0-0.25,0.75-1"): [0, 456, 913, 2739, 3195, 3652],
    ("bytes", "haystack", "0-1"): [0, 800, 1600, 2400, 3200, 4000],
    ("bytes", "haystack", "0-0.25,0.75-1"): [0, 500, 1000, 3000, 3500, 4000],
}


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize("budget", ["prompt", "haystack"])
@pytest.mark.parametrize("unit", ["bytes", "chars", "tokens"])
async def test_every_budget_and_unit_builds_the_seeds_positions(
    unit: str, budget: str, region: str
) -> None:
    cell = cell_of(unit, budget, region)
    context = await build(cell)
    measure = measure_in(unit)
    chars = context.filler_chars
    if (unit, budget) in HAYSTACK:
        assert chars == HAYSTACK[(unit, budget)]
    else:  # tokens: the longest haystack whose measure fits (checked, not assumed)
        haystack = PatternFiller("a|").text
        fitted = context.prompt_text if budget == "prompt" else haystack(chars)
        longer = recall.render(cell, PatternFiller("a|"), "pattern", chars + 1)
        over = longer.prompt_text if budget == "prompt" else haystack(chars + 1)
        assert await measure(fitted) <= LENGTH < await measure(over)
    expected = WORKED.get((unit, budget, region), by_rule(region, chars))
    assert expected == by_rule(region, chars)  # the worked numbers agree with the rule
    assert positions_of(context) == expected
    assert len(context.expected) == NEEDLES
    if budget == "prompt" and unit != "tokens":
        assert await measure(context.prompt_text) == LENGTH  # `a|` fits to the unit exactly


async def test_jitter_moves_the_needles_within_their_reach_on_the_built_haystack() -> None:
    cell = cell_of("bytes", "prompt", "0-1", jitter=0.5)
    context = await build(cell)
    assert context.filler_chars == 3650
    moved = positions_of(context)
    base = [0, 730, 1460, 2190, 2920, 3650]
    reach = int(730 * 0.5)  # the interval 3650 // 5, times the jitter
    assert moved != base
    assert 0 <= moved[0] <= reach and 3650 - reach <= moved[-1] <= 3650
    assert all(abs(m - b) <= reach for m, b in zip(moved, base, strict=True))
    again = recall.rebuild(cell, PatternFiller("a|"), "pattern", context.filler_chars, {})
    assert again.prompt_text == context.prompt_text  # the stored size rebuilds it exactly


async def test_a_range_past_the_haystack_is_refused_naming_it() -> None:
    # 4,000 bytes hold a 3,650-character haystack: 3700-3900 starts past its end.
    cell = cell_of("bytes", "prompt", "0-0.5,3700-3900")
    with pytest.raises(LengthError) as refused:
        await build(cell)
    assert str(refused.value) == (
        "needle range 3700-3900 covers no character of the 3,650-character haystack"
    )
