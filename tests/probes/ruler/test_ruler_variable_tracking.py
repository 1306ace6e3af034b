"""RULER's variable tracking: chains, their order in the noise, the example, fitting."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import LengthError
from needlescope.fitting import tokens
from needlescope.probes.ruler import variable_tracking as vt
from needlescope.probes.ruler.templates import NOISE


def words(text: str) -> int:
    return len(text.split())


def test_chains_names_values_and_statements() -> None:
    chains = vt.draw_chains(3, 4, random.Random(1))
    flat = [name for names in chains.names for name in names]
    assert len(flat) == 15 == len(set(flat))
    assert all(re.fullmatch(r"[A-Z]{5}", name) for name in flat)
    assert all(10000 <= value <= 99999 for value in chains.values)
    a, b, c, d, e = chains.names[0]
    assert chains.statements(0) == [
        f"VAR {a} = {chains.values[0]}",
        f"VAR {b} = VAR {a} ",
        f"VAR {c} = VAR {b} ",
        f"VAR {d} = VAR {c} ",
        f"VAR {e} = VAR {d} ",
    ]


def test_names_stay_distinct_when_draws_repeat() -> None:
    # One letter each: 26 possible names, so 20 draws surely repeat before they are distinct.
    chains = vt.draw_chains(4, 4, random.Random(0), letters=1)
    flat = [name for names in chains.names for name in names]
    assert len(set(flat)) == 20


def test_statements_spread_in_order_through_noise() -> None:
    spec = vt.VtSpec(num_chains=2, num_hops=4, fewshot=False)
    prompt = vt.build(spec, seed=12, units=40)
    lines = prompt.context.split("\n")
    assert lines.count(NOISE) == 40
    statements = [line for line in lines if line != NOISE]
    assert len(statements) == 10
    for chain in prompt.facts["chains"]:
        mine = [s for s in statements if s.split(" ")[1] in chain]
        assert [s.split(" ")[1] for s in mine] == chain  # in the chain's order
    first = prompt.facts["chains"][0]
    assert prompt.expected == tuple(first)
    assert set(prompt.distractors) == set(prompt.facts["chains"][1])
    value = prompt.facts["values"][0]
    assert f"assigned the value {value} in the text above." in prompt.body
    assert prompt.answer_prefix.endswith(f"5 variables are assgined the value {value}, they are: ")


def test_deterministic_and_fewshot_needs_its_units() -> None:
    spec = vt.VtSpec()
    a = vt.build(spec, seed=4, units=20, fewshot_units=10)
    assert a == vt.build(spec, seed=4, units=20, fewshot_units=10)
    assert a.text != vt.build(spec, seed=5, units=20, fewshot_units=10).text
    assert a.facts["fewshot_units"] == 10
    with pytest.raises(ValueError, match="needs the example's fewshot_units"):
        vt.build(spec, seed=4, units=20)
    with pytest.raises(ValueError, match="at least 1"):
        vt.VtSpec(num_hops=0)


def test_fewshot_example_is_fitted_to_500_tokens() -> None:
    spec = vt.VtSpec()
    fitted = vt.fit_sync(spec, 3, 2000, tokens.count)
    units = fitted.prompt.facts["fewshot_units"]
    example = vt.build_fewshot(spec, 3, units)
    assert (
        tokens.count(example.text) <= 500 < tokens.count(vt.build_fewshot(spec, 3, units + 1).text)
    )
    assert fitted.prompt.body.startswith(example.text + " " + " ".join(example.expected) + "\n\n")
    assert fitted.measured == tokens.count(fitted.prompt.text) <= 2000 - 30
    assert tokens.count(vt.build(spec, 3, fitted.units + 1, fewshot_units=units).text) > 1970


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    hops=st.integers(1, 6),
    chains=st.integers(1, 3),
    target=st.integers(200, 2500),
)
def test_fit_is_the_longest_within_the_budget(
    seed: int, hops: int, chains: int, target: int
) -> None:
    spec = vt.VtSpec(num_chains=chains, num_hops=hops, fewshot=False)
    try:
        fitted = vt.fit_sync(spec, seed, target, words)
    except LengthError as error:  # the shortest prompt may already be over a small budget
        assert "over the budget" in str(error)
        assert words(vt.build(spec, seed, hops + 1).text) > target - 30
        return
    assert fitted.units >= hops + 1
    assert fitted.measured == words(fitted.prompt.text) <= target - 30
    assert words(vt.build(spec, seed, fitted.units + 1).text) > target - 30
