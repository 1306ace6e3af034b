from __future__ import annotations

import asyncio
import itertools
import math
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from needlescope.fitting._search import Fit, fit_to_length, measure_text
from needlescope.haystack._fillers import NoiseFiller, PatternFiller, SyntheticProseFiller
from needlescope.haystack._insert import insert_needles, parse_regions, place_needles

PROSE_EN = SyntheticProseFiller("en", 0)
PROSE_ZH = SyntheticProseFiller("zh", 0)
SHARED_CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"

# --- regions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("whole", ((0.0, 1.0),)),
        ("head", ((0.0, 1 / 3),)),
        ("middle", ((1 / 3, 2 / 3),)),
        ("tail", ((2 / 3, 1.0),)),
        ("head,tail", ((0.0, 1 / 3), (2 / 3, 1.0))),
        ("0-0.1,0.45-0.55,0.9-1", ((0.0, 0.1), (0.45, 0.55), (0.9, 1.0))),
        (" 0 - .5 , 0.5-1 ", ((0.0, 0.5), (0.5, 1.0))),
    ],
)
def test_parse_regions(spec: str, expected: tuple[tuple[float, float], ...]) -> None:
    assert parse_regions(spec) == expected


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("", "''"),
        ("top", "'top'"),
        ("0.5-0.2", "'0.5-0.2'"),
        ("0-1.5", "'0-1.5'"),
        ("0.3-0.3", "'0.3-0.3'"),
        ("-0.1-0.2", "'-0.1-0.2'"),
        ("0-0.5,0.4-0.6", "'0.4-0.6'"),
        ("tail,head", "'head'"),
        ("head,,tail", "'head,,tail'"),
    ],
)
def test_parse_regions_errors_name_the_bad_part(spec: str, named: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_regions(spec)
    assert named in str(error.value)
    assert "\n" not in str(error.value)


@st.composite
def region_sets(draw: st.DrawFn) -> tuple[tuple[float, float], ...]:
    cuts = draw(st.lists(st.integers(0, 1000), min_size=2, max_size=8, unique=True))
    cuts.sort()
    pairs = list(zip(cuts[::2], cuts[1::2], strict=False))
    return tuple((a / 1000, b / 1000) for a, b in pairs)


# --- placement --------------------------------------------------------------------------------


def inside(fraction: float, regions: tuple[tuple[float, float], ...]) -> bool:
    return any(a - 1e-12 <= fraction <= b + 1e-12 for a, b in regions)


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 500),
    regions=region_sets(),
    placement=st.sampled_from(["even", "random"]),
    seed=st.integers(0, 10**6),
)
def test_place_needles_sorted_inside_regions(
    count: int, regions: tuple[tuple[float, float], ...], placement: str, seed: int
) -> None:
    fractions = place_needles(count, regions, placement, random.Random(seed))  # type: ignore[arg-type]
    assert len(fractions) == count
    assert fractions == sorted(fractions)
    assert all(0.0 <= f <= 1.0 and inside(f, regions) for f in fractions)
    again = place_needles(count, regions, placement, random.Random(seed))  # type: ignore[arg-type]
    assert again == fractions


@settings(max_examples=100, deadline=None)
@given(count=st.integers(2, 1000))
def test_even_whole_includes_both_ends_evenly(count: int) -> None:
    fractions = place_needles(count, parse_regions("whole"), "even", random.Random(0))
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    gaps = [b - a for a, b in itertools.pairwise(fractions)]
    assert max(gaps) - min(gaps) < 1e-9


@settings(max_examples=100, deadline=None)
@given(regions=region_sets(), count=st.integers(2, 300))
def test_even_spans_the_union_from_first_start_to_last_end(
    regions: tuple[tuple[float, float], ...], count: int
) -> None:
    fractions = place_needles(count, regions, "even", random.Random(0))
    assert fractions[0] == regions[0][0] and fractions[-1] == regions[-1][1]


def test_even_single_needle_goes_to_the_middle_of_the_union() -> None:
    rng = random.Random(0)
    assert place_needles(1, "whole", "even", rng) == [0.5]
    assert place_needles(1, "head", "even", rng) == [pytest.approx(1 / 6)]
    assert place_needles(1, "0.2-0.3,0.5-0.8", "even", rng) == [pytest.approx(0.6)]


def test_even_over_several_intervals_maps_the_concatenated_length_back() -> None:
    fractions = place_needles(5, parse_regions("0-0.1,0.45-0.55,0.9-1"), "even", random.Random(0))
    assert fractions == pytest.approx([0.0, 0.075, 0.5, 0.925, 1.0])


def test_forty_needles_like_the_seed() -> None:
    fractions = place_needles(40, "whole", "even", random.Random(1))
    assert len(fractions) == 40 and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions[1] == pytest.approx(1 / 39)


def test_random_placement_is_uniform_enough() -> None:
    fractions = place_needles(20_000, "0-0.25,0.75-1", "random", random.Random(3))
    assert sum(f < 0.5 for f in fractions) == pytest.approx(10_000, rel=0.05)
    assert all(f <= 0.25 or f >= 0.75 for f in fractions)


def test_place_needles_errors() -> None:
    with pytest.raises(ValueError, match="negative"):
        place_needles(-1, "whole", "even", random.Random(0))
    with pytest.raises(ValueError, match="placement"):
        place_needles(3, "whole", "spiral", random.Random(0))  # type: ignore[arg-type]
    assert place_needles(0, "whole", "even", random.Random(0)) == []


# --- insertion --------------------------------------------------------------------------------

needle_lists = st.lists(st.integers(10, 10**15).map(str), min_size=0, max_size=40)
SNAPS = ("char", "word", "sentence")


def remove_spans(text: str, spans: tuple[tuple[int, int], ...]) -> str:
    kept = []
    done = 0
    for start, end in spans:
        kept.append(text[done:start])
        done = end
    kept.append(text[done:])
    return "".join(kept)


def filler_positions(spans: tuple[tuple[int, int], ...]) -> list[int]:
    """Where in the filler each needle went: its span start minus everything inserted before."""
    inserted = 0
    positions = []
    for start, end in spans:
        positions.append(start - inserted)
        inserted += end - start
    return positions


fillers = st.sampled_from(
    [PROSE_EN, PROSE_ZH, NoiseFiller(1), PatternFiller(), PatternFiller("The end. ")]
)


@settings(max_examples=300, deadline=None)
@given(
    filler=fillers,
    size=st.integers(0, 20_000),
    needles=needle_lists,
    data=st.data(),
    snap=st.sampled_from(SNAPS),
)
def test_inserted_needles_in_order_and_filler_unchanged(
    filler: PatternFiller, size: int, needles: list[str], data: st.DataObject, snap: str
) -> None:
    fractions = sorted(
        data.draw(st.lists(st.floats(0, 1), min_size=len(needles), max_size=len(needles)))
    )
    text = filler.text(size)
    result = insert_needles(text, needles, fractions, snap)  # type: ignore[arg-type]
    assert len(result.offsets) == len(needles) == len(result.spans)
    for needle, offset, (start, end) in zip(needles, result.offsets, result.spans, strict=True):
        assert result.text[offset : offset + len(needle)] == needle
        assert start <= offset and offset + len(needle) <= end
        assert result.text[start:end].strip(" ") == needle
    assert list(result.offsets) == sorted(result.offsets)
    assert remove_spans(result.text, result.spans) == text
    assert len(result.text) == len(text) + sum(e - s for s, e in result.spans)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=300), needles=needle_lists, data=st.data(), snap=st.sampled_from(SNAPS)
)
def test_insertion_on_arbitrary_text(
    text: str, needles: list[str], data: st.DataObject, snap: str
) -> None:
    fractions = sorted(
        data.draw(st.lists(st.floats(0, 1), min_size=len(needles), max_size=len(needles)))
    )
    result = insert_needles(text, needles, fractions, snap)  # type: ignore[arg-type]
    assert remove_spans(result.text, result.spans) == text
    for needle, offset in zip(needles, result.offsets, strict=True):
        assert result.text[offset : offset + len(needle)] == needle


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 5000), fractions=st.lists(st.floats(0, 1), max_size=20))
def test_char_snap_inserts_exactly_at_the_fraction(size: int, fractions: list[float]) -> None:
    fractions.sort()
    text = PatternFiller().text(size)
    needles = [str(1000 + i) for i in range(len(fractions))]
    result = insert_needles(text, needles, fractions, "char")
    assert filler_positions(result.spans) == [round(f * size) for f in fractions]
    assert all(end - start == 4 for start, end in result.spans)


ASCII_END = re.compile(r"[.?!][\"'”’)\]]*\Z")
CJK_END = re.compile(r"[。？！][”’」』）】\"']*\Z")


def at_sentence_boundary(text: str, position: int) -> bool:
    if position in (0, len(text)):
        return True
    before = text[max(0, position - 20) : position]
    if CJK_END.search(before) or re.search(r"\n[ \t]*\n\Z", before):
        return True
    return bool(ASCII_END.search(before)) and text[position].isspace()


@settings(max_examples=200, deadline=None)
@given(
    filler=st.sampled_from([PROSE_EN, PROSE_ZH, NoiseFiller(5)]),
    size=st.integers(0, 50_000),
    count=st.integers(1, 60),
    seed=st.integers(0, 1000),
)
def test_sentence_snap_never_lands_mid_sentence(
    filler: SyntheticProseFiller, size: int, count: int, seed: int
) -> None:
    text = filler.text(size)
    assume(any(at_sentence_boundary(text, p) for p in range(1, len(text))))
    fractions = place_needles(count, "whole", "random", random.Random(seed))
    result = insert_needles(text, [str(10**5 + i) for i in range(count)], fractions, "sentence")
    for position in filler_positions(result.spans):
        assert at_sentence_boundary(text, position), (position, text[position - 30 : position + 30])


@settings(max_examples=100, deadline=None)
@given(size=st.integers(1000, 50_000), fraction=st.floats(0, 1))
def test_sentence_snap_moves_to_the_nearest_sentence_end(size: int, fraction: float) -> None:
    text = PROSE_EN.text(size)
    (position,) = filler_positions(insert_needles(text, ["4242"], [fraction], "sentence").spans)
    target = round(fraction * size)
    boundaries = [p for p in range(size + 1) if at_sentence_boundary(text, p)]
    assert abs(position - target) == min(abs(b - target) for b in boundaries)


@settings(max_examples=200, deadline=None)
@given(
    filler=st.sampled_from([PROSE_EN, NoiseFiller(2)]),
    size=st.integers(0, 20_000),
    fractions=st.lists(st.floats(0, 1), max_size=30),
)
def test_word_snap_never_splits_a_word(
    filler: NoiseFiller, size: int, fractions: list[float]
) -> None:
    fractions.sort()
    text = filler.text(size)
    assume(any(ch.isspace() for ch in text))
    result = insert_needles(text, [str(777 + i) for i in range(len(fractions))], fractions, "word")
    for position, (start, end) in zip(filler_positions(result.spans), result.spans, strict=True):
        if 0 < position < len(text):
            assert text[position - 1].isspace() or text[position].isspace()
        # Surrounded by spaces, never glued to a word.
        if start > 0:
            assert result.text[start - 1].isspace() or result.text[start] == " "
        if end < len(result.text):
            assert result.text[end].isspace() or result.text[end - 1] == " "


def test_word_snap_pads_with_spaces() -> None:
    result = insert_needles("alpha beta gamma", ["1234"], [0.4], "word")
    assert result.text == "alpha beta 1234 gamma" or result.text == "alpha 1234 beta gamma"
    assert result.offsets == (result.text.index("1234"),)


def test_sentence_snap_in_chinese_adds_no_spaces() -> None:
    result = insert_needles("甲乙丙。丁戊己。庚辛壬。", ["1234"], [0.6], "sentence")
    assert result.text == "甲乙丙。丁戊己。1234庚辛壬。"


def test_sentence_snap_in_english() -> None:
    text = 'He left. "Why?" she asked. They waited!'
    assert insert_needles(text, ["1234"], [0.5], "sentence").text == (
        'He left. "Why?" 1234 she asked. They waited!'
    )
    assert insert_needles(text, ["1234"], [1.0], "sentence").text == text + " 1234"
    assert insert_needles(text, ["1234"], [0.0], "sentence").text == "1234 " + text


def test_sentence_snap_falls_back_to_word_then_char() -> None:
    assert insert_needles("alpha beta gamma", ["12"], [0.4], "sentence").text in (
        "alpha beta 12 gamma",
        "alpha 12 beta gamma",
    )
    assert insert_needles("a|a|a|a|", ["12"], [0.5], "sentence").text == "a|a|12a|a|"


def test_needles_snapping_to_one_boundary_keep_their_order() -> None:
    text = "One sentence here. Another one there."
    result = insert_needles(text, ["111", "222", "333"], [0.4, 0.45, 0.5], "sentence")
    assert result.text == "One sentence here. 111 222 333 Another one there."
    assert result.offsets == (19, 23, 27)
    same = insert_needles("abcdef", ["1", "2"], [0.5, 0.5], "char")
    assert same.text == "abc12def" and same.offsets == (3, 4)


def test_insert_needles_errors() -> None:
    with pytest.raises(ValueError, match="2 needles but 1 fractions"):
        insert_needles("text", ["1", "2"], [0.5], "char")
    with pytest.raises(ValueError, match="sorted"):
        insert_needles("text", ["1", "2"], [0.6, 0.5], "char")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        insert_needles("text", ["1"], [1.5], "char")
    with pytest.raises(ValueError, match="snap"):
        insert_needles("text", ["1"], [0.5], "paragraph")  # type: ignore[arg-type]


def test_insertion_in_shared_corpus() -> None:
    from needlescope.haystack._fillers import CorpusFiller

    directory = SHARED_CORPORA / "zh"
    if not directory.is_dir():
        pytest.skip(f"{directory} is absent")
    text = CorpusFiller(directory).text(400_000)
    fractions = place_needles(100, "whole", "even", random.Random(0))
    result = insert_needles(text, [str(1000 + i) for i in range(100)], fractions, "sentence")
    for position in filler_positions(result.spans):
        assert at_sentence_boundary(text, position)
    assert remove_spans(result.text, result.spans) == text


# --- measuring and fitting --------------------------------------------------------------------


def test_measure_text() -> None:
    assert measure_text("héllo", "chars") == 5
    assert measure_text("héllo", "bytes") == 6
    assert measure_text("你好", "bytes") == 6
    with pytest.raises(ValueError, match="unit"):
        measure_text("x", "tokens")  # type: ignore[arg-type]


def builder(
    filler: SyntheticProseFiller | NoiseFiller, head: str, snap: str = "char"
) -> Callable[[int], str]:
    needles = [str(10**6 + i) for i in range(12)]
    fractions = place_needles(len(needles), "whole", "even", random.Random(0))

    def build(n: int) -> str:
        haystack = insert_needles(filler.text(n), needles, fractions, snap).text  # type: ignore[arg-type]
        return head + haystack + "\nAnswer:"

    return build


async def chars(text: str) -> int:
    await asyncio.sleep(0)
    return len(text)


async def utf8_bytes(text: str) -> int:
    await asyncio.sleep(0)
    return len(text.encode())


WORDISH = re.compile(r"\w+|[^\w\s]")


async def word_tokens(text: str) -> int:
    """A tokenizer-like count: words in pieces of up to four characters, punctuation alone."""
    await asyncio.sleep(0)
    return sum(math.ceil(len(w) / 4) for w in WORDISH.findall(text))


async def jittery_tokens(text: str) -> int:
    """len // 3 with a deterministic jitter of up to two tokens: not even monotone."""
    await asyncio.sleep(0)
    return len(text) // 3 + (len(text) * 7919 % 5) // 2


def assert_best_fit(fit: Fit, build: Callable[[int], str], measure: Callable, target: int) -> None:
    assert fit.text == build(fit.n_filler_chars)
    assert fit.measured == asyncio.run(measure(fit.text)) <= target
    assert asyncio.run(measure(build(fit.n_filler_chars + 1))) > target


heads = st.sampled_from(["", "Find the numbers.\n", "Instructions " * 40, "找出所有数字。\n"])


@settings(max_examples=60, deadline=None)
@given(target=st.integers(0, 200_000), head=heads, seed=st.integers(0, 3))
def test_fit_chars_is_exact_in_three_calls(target: int, head: str, seed: int) -> None:
    build = builder(SyntheticProseFiller("en", seed), head)
    assume(len(build(0)) <= target)
    fit = asyncio.run(fit_to_length(build, chars, target))
    assert_best_fit(fit, build, chars, target)
    assert fit.measured == target
    assert fit.calls <= 3


@settings(max_examples=60, deadline=None)
@given(target=st.integers(0, 100_000), head=heads, snap=st.sampled_from(["word", "sentence"]))
def test_fit_chars_with_snapping(target: int, head: str, snap: str) -> None:
    # Snapping adds a space or moves a needle as the filler grows: the length is not even monotone.
    build = builder(PROSE_EN, head, snap)
    assume(len(build(0)) <= target)
    fit = asyncio.run(fit_to_length(build, chars, target))
    assert_best_fit(fit, build, chars, target)
    assert fit.calls <= 10


@settings(max_examples=60, deadline=None)
@given(target=st.integers(200, 200_000), head=heads, snap=st.sampled_from(SNAPS))
def test_fit_bytes_on_chinese(target: int, head: str, snap: str) -> None:
    build = builder(PROSE_ZH, head, snap)
    assume(len(build(0).encode()) <= target)
    fit = asyncio.run(fit_to_length(build, utf8_bytes, target))
    assert_best_fit(fit, build, utf8_bytes, target)
    assert fit.measured >= target - 2 or snap != "char"
    assert fit.calls <= 8


@settings(max_examples=60, deadline=None)
@given(
    target=st.integers(100, 150_000),
    head=heads,
    measure=st.sampled_from([word_tokens, jittery_tokens]),
    filler=st.sampled_from([PROSE_EN, PROSE_ZH, NoiseFiller(4)]),
    snap=st.sampled_from(SNAPS),
)
def test_fit_fake_tokens(
    target: int, head: str, measure: Callable, filler: NoiseFiller, snap: str
) -> None:
    build = builder(filler, head, snap)
    assume(asyncio.run(measure(build(0))) <= target)
    fit = asyncio.run(fit_to_length(build, measure, target))
    assert_best_fit(fit, build, measure, target)
    assert fit.calls <= 14


async def test_fit_calls_for_a_million() -> None:
    build = builder(PROSE_EN, "Find the numbers.\n")
    by_chars = await fit_to_length(build, chars, 1_000_000)
    assert by_chars.measured == 1_000_000 and by_chars.calls == 3
    by_bytes = await fit_to_length(builder(PROSE_ZH, "Find the numbers.\n"), utf8_bytes, 1_000_000)
    assert by_bytes.measured >= 999_998 and by_bytes.calls <= 6
    by_tokens = await fit_to_length(build, word_tokens, 1_000_000)
    assert by_tokens.measured == 1_000_000 and by_tokens.calls <= 10
    ratio = by_tokens.measured / by_tokens.n_filler_chars
    hinted = await fit_to_length(build, word_tokens, 1_000_000, hint_ratio=ratio)
    assert hinted.n_filler_chars == by_tokens.n_filler_chars and hinted.calls <= by_tokens.calls


async def test_fit_rejects_instructions_longer_than_the_target() -> None:
    with pytest.raises(
        ValueError, match="instructions alone are 24 units, more than the target length 10"
    ):
        await fit_to_length(lambda n: "x" * (24 + n), chars, 10)


async def test_fit_exact_target_at_zero_filler() -> None:
    fit = await fit_to_length(lambda n: "x" * (10 + n), chars, 10)
    assert fit.n_filler_chars == 0 and fit.measured == 10


async def test_fit_rejects_a_measure_that_never_grows() -> None:
    async def constant(text: str) -> int:
        return 5

    with pytest.raises(ValueError, match="does not grow"):
        await fit_to_length(lambda n: "x" * n, constant, 100)


@pytest.mark.parametrize("filler", [PROSE_EN, PROSE_ZH])
def test_fit_looks_further_when_a_jittery_measure_reads_no_growth(filler: NoiseFiller) -> None:
    # Hypothesis's find: the first step's measure reads no more than the instructions alone.
    build = builder(filler, "Instructions " * 40, "char")
    fit = asyncio.run(fit_to_length(build, jittery_tokens, 205))
    assert_best_fit(fit, build, jittery_tokens, 205)
