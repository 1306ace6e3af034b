from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._file import load_config
from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.fitting._search import fit_to_length
from needlescope.grid._cells import Cell
from needlescope.haystack._fillers import Filler, PatternFiller, SyntheticProseFiller
from needlescope.haystack._insert import insert_needles
from needlescope.probes.base import Grade, Probe
from needlescope.probes.build import build_context
from needlescope.probes.counting_stars import probe as stars
from needlescope.probes.counting_stars.entry import CountingStarsProbe
from needlescope.probes.registry import expand_grid, probe_module
from tests.conftest import REPO

PROSE = {"en": SyntheticProseFiller("en", 0), "zh": SyntheticProseFiller("zh", 0)}
SENTENCE_ENDS = ".?!。？！"


def sweep(**probe: Any) -> SweepConfig:
    spec = {"probe": "counting_stars", "lengths": [2000], **probe}
    return parse_config(
        {"name": "t", "seed": 3, "models": [{"name": "m", "provider": "local"}], "probes": [spec]}
    )


def cells(**probe: Any) -> list[Cell]:
    config = sweep(**probe)
    spec = config.probes[0]
    assert isinstance(spec, CountingStarsProbe)
    return list(stars.expand(config, spec))


def one_cell(**probe: Any) -> Cell:
    return cells(**probe)[0]


def answer(values: Sequence[Any], key: str = "little_penguin") -> str:
    return json.dumps({key: list(values)}, ensure_ascii=False)


def scores(grade: Grade) -> list[float]:
    return list(grade.detail["scores"])


# --- grading: the paper's rules, worked examples ----------------------------------------------


def test_membership_not_position() -> None:
    grade = stars.grade([5, 3, 9], {}, answer([3, 5, 9]))
    assert grade.parse_ok and scores(grade) == [1, 1, 1]
    assert grade.accuracy == 100.0


def test_the_papers_example() -> None:
    grade = stars.grade([3, 5, 9], {}, answer([3, 6, 9]))
    assert scores(grade) == [1, 0, 1]
    assert grade.accuracy == pytest.approx(200 / 3)
    assert [n.outcome for n in grade.needles] == ["correct", "missing", "correct"]
    assert [n.in_lcs for n in grade.needles] == [True, False, True]
    assert [(n.needle_index, n.expected) for n in grade.needles] == [(1, 3), (2, 5), (3, 9)]
    assert grade.detail["out_of_truth"] == 1 and grade.figures["extra"] == 1


def test_duplicates_waste_the_truncated_window() -> None:
    # Truncate to M = 3 first ([3, 3, 3]), then drop duplicates ({3}): 5 and 9 come too late.
    grade = stars.grade([3, 5, 9], {}, answer([3, 3, 3, 5, 9]))
    assert scores(grade) == [1, 0, 0]
    assert grade.detail["duplicates"] == 2
    assert grade.detail["beyond_m"] == 2
    assert grade.detail["answered_count"] == 5


def test_truncation_to_m_and_out_of_truth_numbers() -> None:
    grade = stars.grade([3, 5, 9], {}, answer([1, 2, 3, 5, 9]))
    assert scores(grade) == [1, 0, 0]
    assert grade.detail["out_of_truth"] == 2
    assert grade.figures == {"correct": 1, "missing": 2, "extra": 2}
    assert grade.answered == [1, 2, 3, 5, 9]


def test_shorter_answer_and_empty_list() -> None:
    assert scores(stars.grade([3, 5, 9], {}, answer([9]))) == [0, 0, 1]
    empty = stars.grade([3, 5, 9], {}, answer([]))
    assert empty.parse_ok and empty.accuracy == 0.0


@pytest.mark.parametrize(
    "response",
    [
        '```json\n{"little_penguin": [3, 5, 9]}\n```',
        '```json\n{"little_penguin": [3, 5, 9\n```',
        '{"little_penguin": [3, 5, 9',
        "{little_penguin: [3, 5,, 9]}",
        "{'little_penguin': [3, 5, 9]}",
        'Sure! Here is the list: {"little_penguin": [3, 5, 9]} Hope it helps.',
        'Format: {"little_penguin": [x, x, x]}. Answer: {"little_penguin": [3, 5, 9]}',
        "little_penguin: [3, 5, 9]",
        '{"Little Penguin": [3, 5, 9]}',
        '{"小企鹅": [3, 5, 9]}',
        '{"小企鹅": [3，5，9]}',
        "```json\n{“小企鹅”：[3, 5, 9]}\n```",
        '{"little_penguin": [3.0, 5, 9]}',
    ],
)
def test_malformed_json_is_repaired_and_both_keys_read(response: str) -> None:
    grade = stars.grade([3, 5, 9], {}, response)
    assert grade.parse_ok, grade.parse_error
    assert grade.accuracy == 100.0


def test_strings_and_booleans_are_not_counts() -> None:
    # The paper's code compares JSON values: the string "3" is not the number 3. needlescope's
    # own rule (no "scoring": "paper" in the facts) adds that true is not 1, where the paper's
    # Python has true == 1 (tests/probes/test_stars_python_equality.py).
    grade = stars.grade([1, 3, 5], {}, '{"little_penguin": ["3", true, 5]}')
    assert scores(grade) == [0, 0, 1]
    assert grade.detail["out_of_truth"] == 2
    paper = stars.grade([1, 3, 5], stars.PAPER_SCORING, '{"little_penguin": ["3", true, 5]}')
    assert scores(paper) == [1, 0, 1]
    assert paper.detail["out_of_truth"] == 1


def test_a_single_number_is_a_one_item_list() -> None:
    assert scores(stars.grade([3, 5], {}, '{"little_penguin": 5}')) == [0, 1]


@pytest.mark.parametrize(
    "response",
    [
        "",
        "I could not find any stars.",
        "The counts are [3, 5, 9].",  # a list in prose is not a bare list
        '{"penguin": [3, 5, 9]}',
        '[{"penguin": [3, 5, 9]}]',
        "{",
        "[" * 5000,
    ],
)
def test_no_list_scores_zero_as_a_parse_failure_every_star_missed(response: str) -> None:
    # needlescope's rule (the paper's notebook raises): kept in the mean, flagged, all missed.
    grade = stars.grade([3, 5, 9], {}, response)
    assert not grade.parse_ok
    assert grade.accuracy == 0.0
    assert grade.parse_error == stars.NO_LIST
    assert [(n.needle_index, n.expected, n.in_lcs, n.outcome) for n in grade.needles] == [
        (1, 3, False, "missing"),
        (2, 5, False, "missing"),
        (3, 9, False, "missing"),
    ]
    assert grade.figures == {"correct": 0, "missing": 3, "extra": 0}
    assert grade.detail["scores"] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("response", "expected_scores"),
    [
        ("[3, 5, 9]", [1, 1, 1]),
        ("  [9, 4, 3]\n\nThat is all.", [1, 0, 1]),
        ("```json\n[5, 3]\n```", [1, 1, 0]),
        ("[3, 5", [1, 1, 0]),
        ("[]", [0, 0, 0]),
    ],
)
def test_a_bare_json_list_is_read_as_the_list(response: str, expected_scores: list[int]) -> None:
    grade = stars.grade([3, 5, 9], {}, response)
    assert grade.parse_ok and grade.parse_error is None
    assert scores(grade) == expected_scores


def test_the_key_wins_over_a_bare_list() -> None:
    grade = stars.grade([3, 5, 9], {}, '[{"little_penguin": [3]}, {"other": [5, 9]}]')
    assert grade.parse_ok and scores(grade) == [1, 0, 0]


def test_echoed_format_parses_and_scores_zero() -> None:
    grade = stars.grade([3, 5, 9], {}, '{"little_penguin": [x, x, x, ...]}')
    assert grade.parse_ok and grade.accuracy == 0.0


# --- grading: the reasoning variant --------------------------------------------------------

REASONING = {"reasoning": True, "mistaken": [11, 19, 31, 39]}


@pytest.mark.parametrize(
    ("answered", "expected_scores"),
    [
        ([10, 20, 30, 40], [1, 1, 1, 1]),
        ([11, 19, 31, 39], [0.25, 0.25, 0.25, 0.25]),
        # 10 alone: 1; 20 and its mistaken 19: 0.5; only the mistaken 31: 0.25; nothing for 40.
        ([10, 19, 20, 31], [1, 0.5, 0.25, 0]),
        # The window is truncated to M before the rule applies: 30 and 40 come too late.
        ([10, 10, 19, 20, 30, 40], [1, 0.5, 0, 0]),
    ],
)
def test_reasoning_scores(answered: list[int], expected_scores: list[float]) -> None:
    grade = stars.grade([10, 20, 30, 40], REASONING, answer(answered))
    assert scores(grade) == expected_scores
    assert grade.accuracy == pytest.approx(100 * sum(expected_scores) / 4)


def test_reasoning_outcomes_and_detail() -> None:
    grade = stars.grade([10, 20, 30, 40], REASONING, answer([10, 19, 20, 31]))
    assert grade.accuracy == 43.75
    assert [n.outcome for n in grade.needles] == ["correct", "partial", "mistaken", "missing"]
    assert [n.in_lcs for n in grade.needles] == [True, False, False, False]
    assert grade.detail["mistaken_answered"] == 2
    assert grade.detail["out_of_truth"] == 0
    assert grade.figures == {"correct": 1, "missing": 1, "extra": 0}


def test_mistaken_counts_only_matter_in_the_reasoning_variant() -> None:
    plain = stars.grade([10, 20], {"reasoning": False, "mistaken": [11, 19]}, answer([11, 20]))
    assert scores(plain) == [0, 1]


# --- grading: properties ------------------------------------------------------------------

TRUTH = [3, 7, 10, 13, 18, 24, 27, 30]
# needlescope's own rule and the paper's (true == 1), each plain and in the reasoning variant.
FACTS = [
    {**scoring, **variant}
    for scoring in ({}, stars.PAPER_SCORING)
    for variant in ({}, {"reasoning": True, "mistaken": [t + 1 for t in TRUTH]})
]


@settings(max_examples=300, deadline=None)
@given(response=st.text())
def test_grade_never_raises_on_any_text(response: str) -> None:
    for facts in FACTS:
        grade = stars.grade(TRUTH, facts, response)
        assert grade.accuracy is not None and 0.0 <= grade.accuracy <= 100.0
        assert grade.parse_ok or grade.accuracy == 0.0
        assert len(grade.needles) == len(TRUTH)
        json.dumps(grade.answered)


FRAGMENTS = [*'{}[]":,，：“”0123456789.-eE ', "little_penguin", "小企鹅", "```json", "NaN", "true"]


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_grade_never_raises_on_json_like_debris(pieces: list[str]) -> None:
    for facts in FACTS:
        grade = stars.grade(TRUTH, facts, "".join(pieces))
        assert grade.accuracy is not None and 0.0 <= grade.accuracy <= 100.0
        json.dumps(grade.answered, allow_nan=False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.integers(0, 40) | json_values, max_size=20),
    cut=st.integers(0, 200),
    key=st.sampled_from(stars.KEYS),
)
def test_accuracy_is_a_share_of_the_stars(items: list[Any], cut: int, key: str) -> None:
    text = json.dumps({key: items}, ensure_ascii=False)
    grade = stars.grade(TRUTH, {}, text[:cut] if cut < len(text) else text)
    if grade.parse_ok:
        assert grade.accuracy is not None and 0.0 <= grade.accuracy <= 100.0
        assert len(grade.needles) == len(TRUTH)
        assert grade.accuracy == pytest.approx(100 * sum(n.in_lcs for n in grade.needles) / 8)


@given(st.permutations(TRUTH))
def test_any_order_of_the_truth_scores_full(order: list[int]) -> None:
    assert stars.grade(TRUTH, {}, answer(order)).accuracy == 100.0


# --- the grid -------------------------------------------------------------------------------


def test_preset_32_32_gives_32_lengths_and_32_stars() -> None:
    grid = cells(preset="32-32", lengths=None, max_length=128000, orders=["ordered", "shuffled"])
    assert len(grid) == 32 * 2
    assert sorted({c.length for c in grid})[:2] == [4000, 8000]
    assert max(c.length for c in grid) == 128000
    assert {c.needle_count for c in grid} == {32}
    assert {(c.placement, c.region, c.probe) for c in grid} == {("even", "whole", stars.NAME)}


def test_grid_axes_params_and_prompt_versions() -> None:
    grid = cells(
        stars=8,
        lengths=[1000, 2000],
        languages=["en", "zh"],
        orders=["ordered", "shuffled"],
        fillers=["prose-en", "prose-zh"],
        repeats=2,
    )
    # Prose of the other language is left out: en pairs with prose-en, zh with prose-zh.
    assert len(grid) == 2 * 2 * 2 * 2
    assert {(c.params()["language"], c.filler) for c in grid} == {
        ("en", "prose-en"),
        ("zh", "prose-zh"),
    }
    assert {c.prompt_version for c in grid} == {"stars-en-v1", "stars-zh-v1"}
    assert grid[0].params() == {
        "stars": 8,
        "order": "ordered",
        "language": "en",
        "reasoning": False,
    }
    assert len({c.cell_id for c in grid}) == len(grid)


def test_language_without_its_prose_keeps_the_fillers_it_was_given() -> None:
    grid = cells(languages=["zh"], fillers=["prose-en"])
    assert [c.filler for c in grid] == ["prose-en"]


def test_reasoning_variant_has_its_own_prompts() -> None:
    grid = cells(reasoning=True, languages=["en", "zh"], fillers=["prose-en", "prose-zh"])
    assert {c.prompt_version for c in grid} == {"stars-reasoning-en-v1", "stars-reasoning-zh-v1"}
    assert all(c.prompt_version in stars.TEMPLATES for c in grid)


def _ids_digest(cells: list[Cell]) -> str:
    return hashlib.sha256(" ".join(c.cell_id for c in cells).encode()).hexdigest()


ID_GRID = {
    "name": "ids",
    "seed": 5,
    "models": [{"name": "m", "provider": "local"}],
    "probes": [
        {
            "probe": "counting_stars",
            "stars": 8,
            "steps": 2,
            "max_length": 2000,
            "languages": ["en", "zh"],
            "orders": ["ordered", "shuffled"],
            "fillers": ["prose-en", "prose-zh"],
            "repeats": 2,
        },
        {
            "probe": "counting_stars",
            "preset": "16-32",
            "max_length": 64000,
            "reasoning": True,
            "languages": ["zh"],
            "fillers": ["prose-zh", "noise"],
        },
    ],
}


def test_cell_ids_of_configs_written_before_prompts_and_counts_are_kept() -> None:
    # Digests of the cell ids these configs had before `prompts` and `counts` existed.
    grid = expand_grid(parse_config(ID_GRID))
    assert len(grid) == 80
    assert _ids_digest(grid) == "ae27a44b7ef6b5068926e1d1ae6ceb7b474f0ef2c7a50b5600f448e5a24634c9"
    shipped = expand_grid(load_config(REPO / "configs" / "counting_stars.yaml"))
    assert [c.cell_id for c in shipped][:2] == ["f374c24745e84c45", "8cfe4c5feb1e038c"]
    assert _ids_digest(shipped)[:16] == "d1e0a89730d694a7"


def test_probe_is_registered_and_follows_the_protocol() -> None:
    module = probe_module("counting_stars")
    assert module is stars
    probe: Probe = stars
    assert probe.NAME == "counting_stars" and probe.FITS_FILLER


# --- rendering ------------------------------------------------------------------------------


def star_text(cell: Cell, count: int, wrong: int | None = None) -> str:
    return stars.TEMPLATES[cell.prompt_version].star.format(count=count, wrong=wrong)


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("reasoning", [False, True])
def test_every_star_once_in_order_at_a_sentence_boundary(language: str, reasoning: bool) -> None:
    cell = one_cell(
        stars=16, languages=[language], fillers=[f"prose-{language}"], reasoning=reasoning
    )
    filler = PROSE[language]
    rendered = stars.render(cell, filler, "prose", 6000)
    hay = rendered.haystack_text
    assert len(rendered.expected) == len(rendered.offsets) == len(rendered.fractions) == 16
    wrongs = rendered.facts.get("mistaken", [None] * 16)
    for offset, count, wrong in zip(rendered.offsets, rendered.expected, wrongs, strict=True):
        sentence = star_text(cell, count, wrong)
        assert hay.count(sentence) == 1
        assert hay.startswith(sentence, offset)
        before = hay[:offset].rstrip()
        assert not before or before[-1] in SENTENCE_ENDS or offset == len(hay) - len(sentence)
    assert hay.count("★") == 16 * (2 if reasoning else 1)
    assert list(rendered.offsets) == sorted(rendered.offsets)
    assert rendered.prompt_text.startswith(hay)
    assert "little_penguin" in rendered.prompt_text or "小企鹅" in rendered.prompt_text


def test_stars_split_the_haystack_into_equal_parts() -> None:
    rendered = stars.render(one_cell(stars=8), PROSE["en"], "prose", 20000)
    for i, fraction in enumerate(rendered.fractions):
        assert fraction == pytest.approx((i + 1) / 8, abs=0.02)
    assert rendered.fractions[-1] == 1.0


def test_the_filler_itself_is_untouched_and_prefix_stable() -> None:
    cell = one_cell(stars=8)
    filler = PROSE["en"]
    small, large = (stars.render(cell, filler, "prose", n) for n in (3000, 9000))
    assert small.expected == large.expected and small.facts == large.facts
    sentences = [star_text(cell, count) for count in small.expected]
    for n, rendered in ((3000, small), (9000, large)):
        rebuilt = insert_needles(
            filler.text(n), sentences, [i / 8 for i in range(1, 9)], "sentence"
        )
        assert rebuilt.text == rendered.haystack_text
        assert rebuilt.offsets == rendered.offsets
        without = re.sub(r"Gazing upward, the little penguin counted \d+ ★\.", "", rebuilt.text)
        assert without.split() == filler.text(n).split()
    assert len(small.prompt_text) < len(large.prompt_text)


def test_ordered_counts_increase_with_irregular_gaps() -> None:
    for repeat_cell in cells(stars=32, orders=["ordered"], repeats=5):
        counts = stars.render(repeat_cell, PROSE["en"], "prose", 100).expected
        assert all(4 * i + 1 <= c <= 4 * i + 4 for i, c in enumerate(counts))
        assert counts == sorted(counts)


def test_shuffled_counts_are_the_same_kind_of_numbers_out_of_order() -> None:
    grid = cells(stars=32, orders=["shuffled"], repeats=5)
    drawn = [stars.render(c, PROSE["en"], "prose", 100).expected for c in grid]
    for counts in drawn:
        ordered = sorted(counts)
        assert all(4 * i + 1 <= c <= 4 * i + 4 for i, c in enumerate(ordered))
    assert all(counts != sorted(counts) for counts in drawn)
    assert len({tuple(c) for c in drawn}) == 5


def test_rendering_is_deterministic_and_the_same_for_every_model() -> None:
    cell = one_cell(stars=8, reasoning=True)
    other_model = dataclasses.replace(cell, model="other", model_identity='{"name":"other"}')
    first = stars.render(cell, SyntheticProseFiller("en", 0), "prose", 4000)
    again = stars.render(cell, SyntheticProseFiller("en", 0), "prose", 4000)
    assert first == again
    assert stars.render(other_model, PROSE["en"], "prose", 4000).prompt_text == first.prompt_text
    assert cell.cell_id != other_model.cell_id


def test_reasoning_mistakes_are_near_misses_never_true_counts() -> None:
    for cell in cells(stars=64, reasoning=True, orders=["ordered", "shuffled"], repeats=3):
        rendered = stars.render(cell, PROSE["en"], "prose", 100)
        counts, mistaken = rendered.expected, rendered.facts["mistaken"]
        assert len(mistaken) == len(counts) == len(set(mistaken))
        assert not set(mistaken) & set(counts)
        assert all(w >= 1 and abs(w - c) <= 2 for c, w in zip(counts, mistaken, strict=True))
        assert rendered.facts["reasoning"] is True
        perfect = stars.grade(counts, rendered.facts, answer(counts))
        assert perfect.accuracy == 100.0
        assert stars.grade(counts, rendered.facts, answer(mistaken)).accuracy == 25.0


def test_facts_name_the_variant() -> None:
    cell = one_cell(languages=["zh"], orders=["ordered"], fillers=["prose-zh"])
    facts = stars.render(cell, PROSE["zh"], "prose", 500).facts
    assert facts == {"order": "ordered", "language": "zh", "reasoning": False}


def test_tiny_and_patterned_haystacks_still_hold_every_star() -> None:
    cell = one_cell(stars=4)
    fillers: list[Filler] = [PROSE["en"], PatternFiller("a|")]
    for filler in fillers:
        for n in (0, 1, 7):
            rendered = stars.render(cell, filler, "pattern", n)
            assert rendered.haystack_text.count("★") == 4


def test_answer_budget() -> None:
    assert stars.answer_budget(one_cell(stars=32), 77) == 77
    plain = stars.answer_budget(one_cell(stars=32), None)
    assert plain >= 32 * 4 + 20
    assert stars.answer_budget(one_cell(stars=32, reasoning=True), None) > plain


async def test_the_sweep_fits_a_prompt_to_an_exact_length() -> None:
    cell = one_cell(stars=8, lengths=[3000], length_unit="chars")

    async def measure(text: str) -> int:
        return len(text)

    context = await build_context(stars, cell, PROSE["en"], "prose", measure)
    assert 2990 <= context.prompt_length == len(context.prompt_text) <= 3000
    fit = await fit_to_length(
        lambda n: stars.render(cell, PROSE["en"], "prose", n).prompt_text, measure, 3000
    )
    assert fit.n_filler_chars == context.filler_chars
