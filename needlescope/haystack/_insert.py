"""Where needles go in a haystack and how they are inserted (fitting a prompt to a length is
fitting.py)."""

from __future__ import annotations

import itertools
import random
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Region = tuple[float, float]
Regions = tuple[Region, ...]
Placement = Literal["even", "random"]
Snap = Literal["char", "word", "sentence"]
Unit = Literal["chars", "bytes"]

NAMED_REGIONS: dict[str, Region] = {
    "whole": (0.0, 1.0),
    "head": (0.0, 1 / 3),
    "middle": (1 / 3, 2 / 3),
    "tail": (2 / 3, 1.0),
}
_INTERVAL = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*-\s*(\d+(?:\.\d*)?|\.\d+)")


def parse_regions(spec: str) -> Regions:
    """``whole``, ``head``, ``middle``, ``tail`` or intervals such as ``0-0.1,0.45-0.55,0.9-1``."""
    parts = [part.strip() for part in spec.split(",")]
    if not spec.strip() or "" in parts:
        raise ValueError(f"region spec {spec!r} has an empty part")
    regions: list[Region] = []
    for part in parts:
        match = _INTERVAL.fullmatch(part)
        if part in NAMED_REGIONS:
            region = NAMED_REGIONS[part]
        elif match:
            region = (float(match.group(1)), float(match.group(2)))
            if not 0.0 <= region[0] < region[1] <= 1.0:
                raise ValueError(f"region {part!r} must satisfy 0 <= start < end <= 1")
        else:
            names = ", ".join(NAMED_REGIONS)
            raise ValueError(
                f"region {part!r} is neither a name ({names}) nor an interval like 0.2-0.4"
            )
        if regions and region[0] < regions[-1][1]:
            raise ValueError(
                f"regions must be sorted and non-overlapping: {part!r} starts before the previous"
                " one ends"
            )
        regions.append(region)
    return tuple(regions)


def place_needles(
    count: int, regions: Regions | str, placement: Placement, rng: random.Random
) -> list[float]:
    """Sorted fractions of the context for ``count`` needles inside the union of ``regions``.

    ``even`` includes both ends of the union (one needle goes to its middle); ``random`` is uniform.
    """
    if isinstance(regions, str):
        regions = parse_regions(regions)
    if count < 0:
        raise ValueError(f"needle count cannot be negative, got {count}")
    if not regions:
        raise ValueError("at least one region is needed")
    total = sum(end - start for start, end in regions)
    if placement == "even":
        if count == 1:
            return [_locate(total / 2, regions)]
        fractions = [_locate(total * i / (count - 1), regions) for i in range(count)]
        if fractions:
            fractions[0], fractions[-1] = regions[0][0], regions[-1][1]
        return fractions
    if placement == "random":
        return sorted(_locate(rng.random() * total, regions) for _ in range(count))
    raise ValueError(f"placement must be even or random, got {placement!r}")


def _locate(position: float, regions: Regions) -> float:
    """The fraction at ``position`` along the regions laid end to end."""
    covered = 0.0
    for start, end in regions:
        if position <= covered + (end - start):
            return min(end, max(start, start + position - covered))
        covered += end - start
    return regions[-1][1]


# --- insertion --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inserted:
    """A haystack with needles in it: ``offsets`` are where each needle starts in ``text``;
    ``spans`` cover each needle with the spaces added around it, so removing them gives the filler.
    """

    text: str
    offsets: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]


# Scripts written without spaces between words: no space is added next to them.
_UNSPACED = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")
# In such scripts a word boundary we can find without a dictionary is the end of a clause (，。；…).
_CJK_PUNCTUATION = "\u3001-\u3003\u300d\u300f\u3011\uff01\uff09\uff0c\uff1a\uff1b\uff1f"
_WORD_SEPARATOR = re.compile(rf"[\s{_CJK_PUNCTUATION}]")
_WORD_BOUNDARY = re.compile(rf"(?<=[\s{_CJK_PUNCTUATION}])|(?=\s)")
# A sentence ends after . ? ! (and closing quotes) followed by whitespace, after 。？！ (no space
# follows them in Chinese), or at a blank line. The boundary is where the match ends.
_SENTENCE_END = re.compile(r"[.?!][\"'”’)\]]*(?=\s|\Z)|[。？！][”’」』）】\"']*|\n[ \t]*\n")
_SEARCH_MARGIN = 8  # a window can cut a match short near its edges; trust only its inside


def insert_needles(
    filler_text: str, needles: Sequence[str], fractions: Sequence[float], snap: Snap = "char"
) -> Inserted:
    """Insert ``needles`` in order at ``fractions`` of the filler, snapped to a boundary.

    ``char`` inserts at exactly round(fraction × length); ``word`` moves to the nearest word
    boundary and pads with spaces; ``sentence`` moves to the nearest sentence end (U-NIAH's rule:
    a needle never splits a sentence), falling back to ``word`` and then ``char`` when the text
    has no such boundary.
    """
    if len(needles) != len(fractions):
        raise ValueError(f"{len(needles)} needles but {len(fractions)} fractions")
    if any(not 0.0 <= f <= 1.0 for f in fractions):
        raise ValueError("needle fractions must lie in [0, 1]")
    if any(b < a for a, b in itertools.pairwise(fractions)):
        raise ValueError("needle fractions must be sorted")
    mode = _available_snap(filler_text, snap)
    length = len(filler_text)
    positions: list[int] = []
    for fraction in fractions:
        position = _snap(filler_text, round(fraction * length), mode)
        # Never before the previous needle, so needles keep their order whatever the snapping did.
        positions.append(max(position, positions[-1]) if positions else position)

    pieces: list[str] = []
    offsets: list[int] = []
    spans: list[tuple[int, int]] = []
    size = 0
    done = 0
    previous = ""
    for needle, position in zip(needles, positions, strict=True):
        pieces.append(filler_text[done:position])
        size += position - done
        if position > done:
            previous = filler_text[position - 1]
        following = filler_text[position] if position < length else ""
        padded = needle
        lead = 0
        if mode != "char" and needle:
            if _needs_space(previous) and _needs_space(needle[0]):
                padded, lead = " " + padded, 1
            if _needs_space(needle[-1]) and _needs_space(following):
                padded += " "
        pieces.append(padded)
        offsets.append(size + lead)
        spans.append((size, size + len(padded)))
        size += len(padded)
        done = position
        previous = padded[-1] if padded else previous
    pieces.append(filler_text[done:])
    return Inserted(text="".join(pieces), offsets=tuple(offsets), spans=tuple(spans))


def insert_at(text: str, needles: Sequence[str], positions: Sequence[int]) -> Inserted:
    """Insert each needle at its character index of ``text`` as it was before any insertion
    (the recall seed's way: from the last position to the first, so each lands at its own
    index). ``positions`` must be sorted; equal positions keep the needles' order."""
    if len(needles) != len(positions):
        raise ValueError(f"{len(needles)} needles but {len(positions)} positions")
    if any(b < a for a, b in itertools.pairwise(positions)):
        raise ValueError("needle positions must be sorted")
    if positions and not 0 <= positions[0] <= positions[-1] <= len(text):
        raise ValueError(f"needle positions must lie within 0..{len(text)}")
    pieces: list[str] = []
    offsets: list[int] = []
    spans: list[tuple[int, int]] = []
    size = done = 0
    for needle, position in zip(needles, positions, strict=True):
        pieces.append(text[done:position])
        size += position - done
        pieces.append(needle)
        offsets.append(size)
        spans.append((size, size + len(needle)))
        size += len(needle)
        done = position
    pieces.append(text[done:])
    return Inserted(text="".join(pieces), offsets=tuple(offsets), spans=tuple(spans))


def _needs_space(char: str) -> bool:
    return bool(char) and not char.isspace() and not _UNSPACED_CHAR.match(char)


def _available_snap(text: str, snap: Snap) -> Snap:
    if snap not in ("char", "word", "sentence"):
        raise ValueError(f"snap must be char, word or sentence, got {snap!r}")
    if snap == "sentence" and not _SENTENCE_END.search(text):
        snap = "word"
    if snap == "word" and not _WORD_SEPARATOR.search(text):
        snap = "char"
    return snap


def _snap(text: str, target: int, mode: Snap) -> int:
    if mode == "char":
        return target
    pattern = _SENTENCE_END if mode == "sentence" else _WORD_BOUNDARY
    length = len(text)
    window = 256
    while True:
        low, high = max(0, target - window), min(length, target + window)
        trusted_low = 0 if low == 0 else low + _SEARCH_MARGIN
        trusted_high = length if high == length else high - _SEARCH_MARGIN
        candidates = [m.end() for m in pattern.finditer(text, low, high)]
        candidates += [0] if low == 0 else []
        candidates += [length] if high == length else []
        candidates = [c for c in candidates if trusted_low <= c <= trusted_high]
        if candidates:
            # Ties go to the earlier boundary: U-NIAH moves a needle back to the last sentence end.
            best = min(candidates, key=lambda c: (abs(c - target), c))
            distance = abs(best - target)
            if target - distance >= trusted_low and target + distance <= trusted_high:
                return best
        window *= 4


# Every character a _SENTENCE_END match can contain (its lookahead aside).
_SENTENCE_END_CHARS = frozenset(".?!\"'”’)]。？！」』）】\n \t")


def last_sentence_end(text: str) -> int | None:
    """Where the last sentence of ``text`` ends (None when none does), reading only its tail.

    The same boundary as the last of ``_SENTENCE_END.finditer(text)``: the scan starts just after
    a character no match can contain, where a scan from the start of the text is bound to be
    searching afresh too (the pattern looks ahead, never behind).
    """
    window = 4096
    while True:
        start = max(0, len(text) - window)
        while start > 0 and text[start - 1] in _SENTENCE_END_CHARS:
            start -= 1
        last = deque(_SENTENCE_END.finditer(text, start), maxlen=1)
        if last:
            return last[0].end()
        if start == 0:
            return None
        window *= 4
