"""Counting long texts by pieces (needlescope/fitting/_pieces.py) and fitting in rounds
(needlescope/fitting/_rounds.py), against a regex pre-tokenizer whose pieces provably add up."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence

import pytest

from needlescope.errors import LengthError
from needlescope.fitting._pieces import SEPARATOR, PieceCounts, cuts, pieces, separable
from needlescope.fitting._rounds import CLEAR, fit_in_rounds
from needlescope.fitting._search import fit_to_length

# GPT-2's pre-tokenizer, ASCII letters standing in for \p{L}: one token per pre-token.
_PRE = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def tokens(text: str) -> int:
    return len(_PRE.findall(text))


def prose(n_sentences: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(n_sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        out.append(" ".join(words).capitalize() + rng.choice(".!?"))
    return " ".join(out)


class Counter:
    def __init__(self) -> None:
        self.requests = 0

    async def count_separated(self, texts: Sequence[str]) -> list[int]:
        self.requests += 1
        joined = SEPARATOR.join(texts)
        # What a llama.cpp reply says, rebuilt: each pre-token's span, attributed by offset.
        counts = [0] * len(texts)
        bounds, at = [], 0
        for t in texts:
            bounds.append((at, at + len(t)))
            at += len(t) + len(SEPARATOR)
        for m in _PRE.finditer(joined):
            for i, (lo, hi) in enumerate(bounds):
                if lo <= m.start() < hi:
                    assert m.end() <= hi, "a pre-token crosses a piece's end"
                    counts[i] += 1
        return counts


def test_pieces_join_back_and_cuts_are_content_defined():
    text = prose(400)
    parts = pieces(text)
    assert "".join(parts) == text and len(parts) > 10
    needle = " The magic number is 4821."
    at = text.index(". ", len(text) // 2) + 1
    moved = text[:at] + needle + text[at:]
    before, after = set(pieces(text)), set(pieces(moved))
    # Only the piece the needle lands in is new.
    assert len(after - before) == 1 and len(before - after) == 1
    assert all(text[c - 1] in ".!?" and text[c] == " " for c in cuts(text))


def test_sums_of_pieces_equal_whole_counts_in_one_request():
    counter = Counter()
    counts = PieceCounts(counter.count_separated)
    texts = [prose(300, seed) for seed in range(3)] + ["Short one. Done!", prose(5) + "\n"]
    for text in texts:
        assert PieceCounts.countable(text)
        assert asyncio.run(counts.count(text)) == tokens(text)
    # One each, and one more for the newline ending the last (whitespace is sent alone).
    assert counter.requests == len(texts) + 1
    asyncio.run(counts.count(prose(7) + "\n"))  # that newline is remembered
    asyncio.run(counts.count(texts[0]))
    assert counter.requests == len(texts) + 2


@pytest.mark.parametrize(
    ("piece", "ok"),
    [
        ("word", True),
        (" word", True),
        ("  word", False),
        (" 12", False),
        ("\nx", False),
        ("", False),
    ],
)
def test_separable(piece, ok):
    assert separable(piece) is ok


def recall_like(n: int, needles: int, filler: str) -> str:
    body = filler[:n]
    step = max(1, len(body) // (needles + 1))
    parts = [body[i * step : (i + 1) * step] for i in range(needles)] + [body[needles * step :]]
    inserted = "".join(p + f" Key {i} is {1000 + i}." for i, p in enumerate(parts[:-1]))
    return f"Read the text and list the keys. {inserted}{parts[-1]} List every key."


@pytest.mark.parametrize("needles", [1, 7])
def test_rounds_fit_exactly_whatever_the_guess(needles):
    filler = prose(2000)
    target = 3000
    counter = Counter()
    counts = PieceCounts(counter.count_separated)

    def f(n: int) -> int:
        return tokens(recall_like(n, needles, filler))

    async def many(ns: list[int]) -> list[int]:
        texts = [recall_like(n, needles, filler) for n in ns]
        splits = [counts.split(t) for t in texts]
        got = await counts.fetch([p for _, lacking in splits for p in lacking])
        return [known + sum(got[p] for p in lacking) for known, lacking in splits]

    async def one(text: str) -> int:
        return tokens(text)

    old = asyncio.run(fit_to_length(lambda n: recall_like(n, needles, filler), one, target))
    new = asyncio.run(fit_in_rounds(many, target, 4 * target, with_empty=True))
    n = new.n_filler_chars
    assert new.measured == f(n) <= target
    assert all(f(m) > target for m in range(n + 1, n + CLEAR + 1))
    # Needles that move with the filler make the count fall now and then (7 needles here):
    # the search may stop at a smaller size that fits too; never at a larger one.
    assert n >= old.n_filler_chars and (needles > 1 or n == old.n_filler_chars)
    # A sibling's answer as the guess: the same answer, in one round and one request.
    for guess in (old.n_filler_chars, n + 3):
        before = counter.requests
        again = asyncio.run(fit_in_rounds(many, target, guess))
        assert again.n_filler_chars == n
        if guess == n + 3:
            assert again.rounds == 1 and counter.requests - before <= 1


def test_rounds_refuse_instructions_longer_than_the_target():
    async def many(ns: list[int]) -> list[int]:
        return [50 + n for n in ns]

    with pytest.raises(LengthError, match="instructions alone are 50 units"):
        asyncio.run(fit_in_rounds(many, 10, 100, with_empty=True))
