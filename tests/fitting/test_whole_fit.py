"""Whole-count fitting (needlescope/fitting/_whole.py): the proof it returns, how few counts a good
start costs, and references fixed by the grid."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import yaml

from needlescope.config._sweep import parse_config
from needlescope.errors import LengthError
from needlescope.fitting._whole import fit_from, references
from needlescope.probes.registry import expand_grid


def counter(f: Callable[[int], int]) -> tuple[Callable[[int], asyncio.Future[int]], list[int]]:
    asked: list[int] = []

    async def measure(n: int) -> int:
        asked.append(n)
        return f(n)

    return measure, asked  # type: ignore[return-value]


def words(n: int) -> int:
    """A word-counting tokenizer on filler whose words are 5 characters apart, 30 tokens of
    instructions."""
    return 30 + (n + 4) // 5


def proves(f: Callable[[int], int], n: int, target: int) -> bool:
    """Exactly the target, or under it with the next size over (no size counts the target)."""
    return f(n) == target or f(n) < target < f(n + 1)


@pytest.mark.parametrize("start", [0, 1, 300, 3_000, 4_845, 4_849, 4_850, 4_851, 9_999, 400_000])
def test_the_fit_is_exact_from_any_start(start: int) -> None:
    measure, asked = counter(words)
    found = asyncio.run(fit_from(measure, 1_000, start, 0.25))
    # sizes 4,846..4,850 count exactly 1,000: the search stops at the first it counts
    assert 4_846 <= found.n_filler_chars <= 4_850
    assert found.measured == words(found.n_filler_chars) == 1_000
    assert len(asked) == len(set(asked)) <= 30


def test_a_start_at_the_answer_costs_the_one_count_that_proves_it() -> None:
    measure, asked = counter(words)
    found = asyncio.run(fit_from(measure, 1_000, 4_850, 0.2))
    assert (found.n_filler_chars, asked) == (4_850, [4_850])


def test_one_under_the_target_checks_the_next_size() -> None:
    measure, asked = counter(words)
    found = asyncio.run(fit_from(measure, 1_000, 4_845, 0.2))  # 999 tokens; 4,846 is 1,000
    assert (found.n_filler_chars, found.measured, asked) == (4_846, 1_000, [4_845, 4_846])


def test_where_no_size_counts_the_target_the_size_under_is_proved_by_two_counts() -> None:
    def pairs(n: int) -> int:  # every word adds two tokens: odd counts never occur
        return 30 + 2 * ((n + 4) // 5)

    for start in (0, 4_000, 4_850, 9_000):
        measure, asked = counter(pairs)
        found = asyncio.run(fit_from(measure, 1_001, start, 0.4))
        assert pairs(found.n_filler_chars) == 1_000 < 1_001 < pairs(found.n_filler_chars + 1)
        assert found.n_filler_chars + 1 in asked, start


def test_a_count_that_falls_as_a_word_completes_still_gets_a_proved_fit() -> None:
    def bpe(n: int) -> int:  # one token less every time a 7-character word completes
        return 20 + n // 3 - (1 if n % 7 == 6 else 0)

    for start in (0, 1_000, 2_950, 2_960, 3_100, 90_000):
        measure, _ = counter(bpe)
        found = asyncio.run(fit_from(measure, 1_000, start, 0.3))
        assert proves(bpe, found.n_filler_chars, 1_000), start


def test_instructions_longer_than_the_target_are_a_length_error() -> None:
    measure, _ = counter(lambda n: 500 + n // 4)
    with pytest.raises(LengthError, match="instructions alone are 500"):
        asyncio.run(fit_from(measure, 400, 2_000, 0.25))


GRID = """
name: refs
seed: 1
models:
  - {name: a, provider: anthropic, model: m}
  - {name: b, provider: anthropic, model: m}
probes:
  - probe: recall
    lengths: [1000, 2000]
    length_unit: tokens
    needle_counts: [1, 5]
    fillers: [prose-en, noise]
    repeats: 3
"""


def test_each_cell_starts_from_a_cell_earlier_in_the_grid_of_its_group() -> None:
    grid = expand_grid(parse_config(yaml.safe_load(GRID)))
    refs = references(grid)
    position = {c.cell_id: i for i, c in enumerate(grid)}
    alone = [c for c in grid if refs[c.cell_id] is None]
    # one fitted alone per model, filler and length
    assert len(alone) == len({(c.model, c.filler, c.length) for c in grid}) == 8
    for cell in grid:
        ref = refs[cell.cell_id]
        if ref is None:
            continue
        assert position[ref.cell_id] < position[cell.cell_id]
        assert (ref.model, ref.filler, ref.length, ref.probe) == (
            cell.model,
            cell.filler,
            cell.length,
            cell.probe,
        )
        # the first of its needle count starts from the group's first; the others from it
        assert ref.needle_count == cell.needle_count or refs[ref.cell_id] is None
        assert refs[ref.cell_id] is None or refs[refs[ref.cell_id].cell_id] is None
    # the grid, not the order cells are built in, decides
    assert references(grid) == references(list(grid))
