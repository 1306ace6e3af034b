"""RULER's aggregation tasks: cwe's word lists, fwe's Zipf text, and fitting both."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import LengthError
from needlescope.fitting import tokens
from needlescope.probes.ruler import aggregation as ag
from needlescope.probes.ruler.words import common_vocabulary


def words(text: str) -> int:
    return len(text.split())


def listed(context: str) -> list[str]:
    return [w for _, w in re.findall(r"(\d+)\. (\S+)", context)]


def test_cwe_frequencies_by_length() -> None:
    spec = ag.CweSpec()
    long = ag.build_cwe(spec, seed=1, units=50, target=8192)
    counts = Counter(listed(long.context))
    assert len(counts) == 50
    assert sorted(counts.values()) == [3] * 40 + [30] * 10
    assert set(long.expected) == {w for w, c in counts.items() if c == 30}
    short = ag.build_cwe(spec, seed=1, units=50, target=4095)
    assert sorted(Counter(listed(short.context)).values()) == [1] * 40 + [6] * 10
    assert long.facts["common_repeats"] == 30 and short.facts["common_repeats"] == 6


def test_cwe_words_come_from_the_vocabulary_and_stay_with_units() -> None:
    spec = ag.CweSpec()
    small = ag.build_cwe(spec, seed=2, units=20, target=2000)
    large = ag.build_cwe(spec, seed=2, units=200, target=2000)
    assert small.expected == large.expected  # the common words do not change with the units
    assert set(listed(large.context)) <= set(common_vocabulary())
    assert small == ag.build_cwe(spec, seed=2, units=20, target=2000)
    assert small.text != ag.build_cwe(spec, seed=3, units=20, target=2000).text


def test_cwe_without_examples_keeps_rulers_leading_newline() -> None:
    prompt = ag.build_cwe(ag.CweSpec(num_fewshot=0), seed=2, units=12, target=2000)
    assert prompt.body.startswith("\nBelow is a numbered list of words.")
    assert prompt.body.count("Below is a numbered list") == 1


def test_cwe_fit_and_vocabulary_limit() -> None:
    spec = ag.CweSpec()
    fitted = ag.fit_cwe_sync(spec, 4, 3000, tokens.count)
    assert fitted.measured == tokens.count(fitted.prompt.text) <= 3000 - 120
    assert tokens.count(ag.build_cwe(spec, 4, fitted.units + 1, 3000).text) > 2880
    size = len(common_vocabulary())
    with pytest.raises(LengthError, match=f"vocabulary holds {size:,} words"):
        ag.build_cwe(spec, 4, size + 1, 3000)
    with pytest.raises(LengthError, match="short of a 400,000-token cell"):
        ag.fit_cwe_sync(spec, 4, 400_000, words)


def test_zeta_and_zipf_counts() -> None:
    assert ag.zeta(2.0) == pytest.approx(math.pi**2 / 6, rel=1e-15)
    assert ag.zeta(4.0) == pytest.approx(math.pi**4 / 90, rel=1e-15)
    assert ag.zeta(3.0) == pytest.approx(1.2020569031595942, rel=1e-15)
    # 1000 words at alpha 2: 1000 / 1.6449 / k² → 607, 151, 67, 37, 24, ...
    assert ag.zipf_counts(1000, 6, 2.0) == [607, 151, 67, 37, 24, 16]
    with pytest.raises(ValueError, match="zeta diverges"):
        ag.zeta(1.0)


def test_fwe_text_follows_the_zipf_counts() -> None:
    spec = ag.FweSpec()
    prompt = ag.build_fwe(spec, seed=5, units=1000)
    vocabulary = ag.draw_vocabulary(spec, 5)
    assert len(vocabulary) == 2000 == len(set(vocabulary))
    assert vocabulary[0] == "..."
    assert all(re.fullmatch(r"[a-z]{6}", w) for w in vocabulary[1:])
    counts = Counter(prompt.context.split(" "))
    expected = ag.zipf_counts(1000, 2000, 2.0)
    assert counts == Counter({w: c for w, c in zip(vocabulary, expected, strict=True) if c})
    assert prompt.expected == tuple(vocabulary[1:4])
    assert [counts[w] for w in prompt.expected] == [151, 67, 37]
    assert prompt == ag.build_fwe(spec, seed=5, units=1000)


def test_fwe_spec_checks() -> None:
    with pytest.raises(ValueError, match="alpha must be above 1"):
        ag.FweSpec(alpha=1.0)
    with pytest.raises(ValueError, match="at least 4 words"):
        ag.FweSpec(vocab_size=3)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32), target=st.integers(300, 4000), alpha=st.floats(1.5, 3.0))
def test_fwe_fit_is_the_longest_within_the_budget(seed: int, target: int, alpha: float) -> None:
    spec = ag.FweSpec(alpha=alpha)
    fitted = ag.fit_fwe_sync(spec, seed, target, words)
    assert fitted.measured == words(fitted.prompt.text) <= target - 50
    assert words(ag.build_fwe(spec, seed, fitted.units + 1).text) > target - 50


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), target=st.integers(700, 6000))
def test_cwe_fit_is_the_longest_within_the_budget(seed: int, target: int) -> None:
    spec = ag.CweSpec()
    fitted = ag.fit_cwe_sync(spec, seed, target, words)
    assert fitted.measured == words(fitted.prompt.text) <= target - 120
    assert words(ag.build_cwe(spec, seed, fitted.units + 1, target).text) > target - 120
