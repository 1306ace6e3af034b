"""RULER's niah: presets, draws, haystacks, depths, determinism and fitting to a budget."""

from __future__ import annotations

import random
import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import LengthError
from needlescope.fitting import tokens
from needlescope.probes.ruler import niah
from needlescope.probes.ruler.haystacks import split_sentences
from needlescope.probes.ruler.templates import DEPTHS, NOISE

ESSAY = " ".join(
    f"Sentence {i} talks about the {w} of things. Is it {w}? Yes!"
    for i, w in enumerate(["weather", "harvest", "river", "market", "garden"] * 8)
)


def words(text: str) -> int:
    return len(text.split())


def test_rulers_eight_presets() -> None:
    p = niah.PRESETS
    assert list(p) == [
        "niah_single_1",
        "niah_single_2",
        "niah_single_3",
        "niah_multikey_1",
        "niah_multikey_2",
        "niah_multikey_3",
        "niah_multivalue",
        "niah_multiquery",
    ]
    assert p["niah_single_1"] == niah.NiahSpec("noise", "words", "numbers", 1, 1, 1)
    assert p["niah_single_2"] == niah.NiahSpec("essay", "words", "numbers", 1, 1, 1)
    assert p["niah_single_3"] == niah.NiahSpec("essay", "words", "uuids", 1, 1, 1)
    assert p["niah_multikey_1"] == niah.NiahSpec("essay", "words", "numbers", 4, 1, 1)
    assert p["niah_multikey_2"] == niah.NiahSpec("needle", "words", "numbers", 1, 1, 1)
    assert p["niah_multikey_3"] == niah.NiahSpec("needle", "uuids", "uuids", 1, 1, 1)
    assert p["niah_multivalue"] == niah.NiahSpec("essay", "words", "numbers", 1, 4, 1)
    assert p["niah_multiquery"] == niah.NiahSpec("essay", "words", "numbers", 1, 1, 4)
    assert p["niah_multiquery"].planted_keys == 4
    with pytest.raises(KeyError, match="no niah preset 'niah_single_9'"):
        niah.preset("niah_single_9")


def test_bad_specs_are_named() -> None:
    with pytest.raises(ValueError, match="type_haystack must be one of noise, essay, needle"):
        niah.NiahSpec("grass")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="type_needle_v must be one of words, numbers, uuids"):
        niah.NiahSpec(type_needle_v="emoji")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_needle_q must be at least 1"):
        niah.NiahSpec(num_needle_q=0)
    with pytest.raises(ValueError, match="41 needles"):
        niah.NiahSpec(num_needle_k=41)


def test_value_kinds() -> None:
    prompt = niah.build(niah.NiahSpec("noise", "uuids", "numbers", 3, 2, 2), seed=2, units=5)
    needles = prompt.facts["needles"]
    assert len(needles) == 6
    for needle in needles:
        assert uuid.UUID(needle["key"]).version == 4
        assert re.fullmatch(r"[1-9]\d{6}", needle["value"])
    words_prompt = niah.build(niah.NiahSpec("noise", "words", "words"), seed=2, units=1)
    (needle,) = words_prompt.facts["needles"]
    assert re.fullmatch(r"[^-]+(-[^-]+)+", needle["key"])
    # A single value asked: RULER's singular prompt names "word", the needle "words".
    assert "A special magic word is hidden" in words_prompt.body
    assert f"One of the special magic words for {needle['key']} is:" in words_prompt.context


def test_multikey_distractors_and_question() -> None:
    prompt = niah.build(niah.preset("niah_multikey_1"), seed=8, units=200, essay=ESSAY)
    needles = prompt.facts["needles"]
    asked = [n for n in needles if n["asked"]]
    assert len(needles) == 4 and len(asked) == 1
    assert prompt.expected == (asked[0]["value"],)
    assert set(prompt.distractors) == {n["value"] for n in needles if not n["asked"]}
    assert prompt.facts["query"] == asked[0]["key"]
    for needle in needles:
        assert f"One of the special magic numbers for {needle['key']} is: {needle['value']}." in (
            prompt.context
        )


def test_multivalue_expects_every_value_of_the_key() -> None:
    prompt = niah.build(niah.preset("niah_multivalue"), seed=8, units=100, essay=ESSAY)
    needles = prompt.facts["needles"]
    assert {n["key"] for n in needles} == {prompt.facts["query"]}
    assert sorted(prompt.expected) == sorted(n["value"] for n in needles)
    assert prompt.distractors == ()
    assert "Some special magic numbers are hidden" in prompt.body


def test_needle_haystack_is_other_keys() -> None:
    spec = niah.preset("niah_multikey_3")
    prompt = niah.build(spec, seed=4, units=30)
    lines = prompt.context.split("\n")
    assert len(lines) == 31
    keys = [
        re.fullmatch(r"One of the special magic uuids for (\S+) is: (\S+)\.", line)
        for line in lines
    ]
    assert all(keys)
    asked = prompt.facts["query"]
    assert [m.group(1) for m in keys if m].count(asked) == 1  # type: ignore[union-attr]
    assert len(prompt.distractors) == 30
    # More units keep the first distractors: the haystack is drawn apart from the needles.
    longer = niah.build(spec, seed=4, units=40)
    assert longer.distractors[:30] == prompt.distractors
    assert longer.expected == prompt.expected


@pytest.mark.parametrize("name", ["niah_single_1", "niah_multikey_2"])
def test_depths_place_needles_in_sentence_lists(name: str) -> None:
    units = 39
    prompt = niah.build(niah.preset(name), seed=21, units=units)
    (needle,) = [n for n in prompt.facts["needles"]]
    assert needle["depth"] in DEPTHS
    lines = prompt.context.split("\n")
    index = next(
        i for i, line in enumerate(lines) if needle["value"] in line and needle["key"] in line
    )
    assert index == int(units * (needle["depth"] / 100))


def test_essay_needles_go_between_sentences_at_their_depths() -> None:
    prompt = niah.build(niah.preset("niah_multikey_1"), seed=3, units=150, essay=ESSAY)
    essay_words = ESSAY.split()[:150]
    sentences = split_sentences(" ".join(essay_words))
    depths = [n["depth"] for n in prompt.facts["needles"]]
    assert depths == sorted(depths) and all(d in DEPTHS for d in depths)
    assert prompt.facts["sentences"] == len(sentences)
    # Removing the needles gives the essay's first 150 words back.
    text = prompt.context
    for n in prompt.facts["needles"]:
        text = text.replace(
            f"One of the special magic numbers for {n['key']} is: {n['value']}.", ""
        )
    assert text.split() == essay_words
    # Each needle follows exactly int(len(sentences) × depth / 100) whole sentences.
    for n in prompt.facts["needles"]:
        needle = f"One of the special magic numbers for {n['key']} is: {n['value']}."
        before = prompt.context[: prompt.context.index(needle)]
        for other in prompt.facts["needles"]:
            before = before.replace(
                f"One of the special magic numbers for {other['key']} is: {other['value']}.", ""
            )
        assert (
            before.split() == " ".join(sentences[: int(len(sentences) * n["depth"] / 100)]).split()
        )


def test_essay_repeats_when_short_and_needs_a_text() -> None:
    short = "One sentence only."
    prompt = niah.build(niah.preset("niah_single_2"), seed=1, units=7, essay=short)
    needle = prompt.facts["needles"][0]
    text = prompt.context.replace(
        f"One of the special magic numbers for {needle['key']} is: {needle['value']}.", ""
    )
    assert text.split() == (short.split() * 3)[:7]
    with pytest.raises(ValueError, match="essay haystack needs a text"):
        niah.build(niah.preset("niah_single_2"), seed=1, units=7)


def test_split_sentences() -> None:
    assert split_sentences('He said "stop." Then? Yes! no end') == [
        'He said "stop."',
        "Then?",
        "Yes!",
        "no end",
    ]
    assert split_sentences("") == []


def test_same_seed_same_prompt_and_no_global_randomness(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden() -> uuid.UUID:
        raise AssertionError("uuid.uuid4() called")

    monkeypatch.setattr(uuid, "uuid4", forbidden)
    random.seed(1234)
    state = random.getstate()
    for name, spec in niah.PRESETS.items():
        a = niah.build(spec, seed=77, units=60, essay=ESSAY)
        b = niah.build(spec, seed=77, units=60, essay=ESSAY)
        c = niah.build(spec, seed=78, units=60, essay=ESSAY)
        assert a == b, name
        assert a.text != c.text, name
    assert random.getstate() == state


def test_needles_do_not_change_with_units() -> None:
    spec = niah.preset("niah_multikey_1")
    small = niah.build(spec, seed=6, units=40, essay=ESSAY)
    large = niah.build(spec, seed=6, units=400, essay=ESSAY)
    assert small.facts["needles"] == large.facts["needles"]
    assert small.expected == large.expected


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(sorted(niah.PRESETS)),
    seed=st.integers(0, 2**64),
    target=st.integers(260, 3000),
)
def test_fit_is_the_longest_within_the_budget(name: str, seed: int, target: int) -> None:
    spec = niah.preset(name)
    fitted = niah.fit_sync(spec, seed, target, words, essay=ESSAY)
    budget = target - 128  # length_budget: ruler keeps RULER's 128 tokens for the answer
    assert fitted.measured == words(fitted.prompt.text) <= budget
    assert words(niah.build(spec, seed, fitted.units + 1, essay=ESSAY).text) > budget
    assert fitted.prompt == niah.build(spec, seed, fitted.units, essay=ESSAY)


def test_fit_in_model_tokens_and_prompt_budget() -> None:
    spec = niah.preset("niah_single_1")
    fitted = niah.fit_sync(spec, 9, 2000, tokens.count, length_budget="prompt")
    assert fitted.measured == tokens.count(fitted.prompt.text) <= 2000
    assert tokens.count(niah.build(spec, 9, fitted.units + 1).text) > 2000
    # one noise sentence is 21 cl100k tokens: the fit stops within one of the budget
    assert 2000 - fitted.measured < tokens.count(NOISE + "\n") + 1
    assert fitted.calls <= 12


async def test_async_fit_matches_sync() -> None:
    async def count(text: str) -> int:
        return tokens.count(text)

    spec = niah.preset("niah_multikey_2")
    fitted = await niah.fit(spec, 5, 1500, count)
    assert fitted == niah.fit_sync(spec, 5, 1500, tokens.count)


def test_a_budget_too_small_is_a_length_error() -> None:
    with pytest.raises(LengthError, match="over the budget of 22"):
        niah.fit_sync(niah.preset("niah_single_1"), 1, 150, words)
    with pytest.raises(LengthError, match="leaves no room for the prompt"):
        niah.fit_sync(niah.preset("niah_single_1"), 1, 100, words)
