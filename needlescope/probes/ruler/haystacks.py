"""RULER's haystacks: sentence lists that needles or statements go into, and their joining."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

# A sentence ends after . ? or ! (and closing quotes or brackets) before a space. RULER splits
# its essays with NLTK's punkt, whose model is a download this machine cannot make; on essay
# prose the two differ mainly after abbreviations ("Mr. Smith"), which punkt does not split.
_SENTENCE_END = re.compile(r"[.?!][\"'”’)\]]*(?= )")


@functools.lru_cache(maxsize=4)
def essay_words(essay: str) -> tuple[str, ...]:
    """RULER's essay haystack: the text's words (its whitespace collapsed), the unit it fits."""
    return tuple(essay.split())


def essay_text(essay: str, words: int) -> str:
    """The first ``words`` words, one space apart, the essay repeated as often as it takes."""
    pool = essay_words(essay)
    if words and not pool:
        raise ValueError("the essay haystack has no words")
    repeats = -(-words // len(pool)) if pool else 0
    return " ".join((pool * repeats)[:words])


def split_sentences(text: str) -> list[str]:
    """Sentences of a text whose words are one space apart (they join back with spaces)."""
    text = text.strip()
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        sentences.append(text[start : match.end()])
        start = match.end() + 1
    if start < len(text):
        sentences.append(text[start:])
    return sentences


def insertion_points(count: int, depths: Sequence[int]) -> list[int]:
    """RULER's index for each depth (a percentage) in a list of ``count`` sentences."""
    return [int(count * (depth / 100)) for depth in depths]


def interleave(
    sentences: Sequence[str], inserts: Sequence[str], points: Sequence[int]
) -> list[str]:
    """The sentences with each insert placed before the sentence at its (sorted) point."""
    pieces: list[str] = []
    done = 0
    for insert, point in zip(inserts, points, strict=True):
        pieces.extend(sentences[done:point])
        pieces.append(insert)
        done = point
    pieces.extend(sentences[done:])
    return pieces


def grouped(sentences: Sequence[str], inserts: Sequence[str], points: Sequence[int]) -> str:
    """RULER's essay joining: the runs of sentences between inserts, each joined by spaces,
    alternate with the inserts, all joined by spaces (an empty run leaves a double space)."""
    bounds = [0, *points, len(sentences)]
    parts: list[str] = []
    for i in range(1, len(bounds)):
        parts.append(" ".join(sentences[bounds[i - 1] : bounds[i]]))
        if i - 1 < len(inserts):
            parts.append(inserts[i - 1])
    return " ".join(parts)
