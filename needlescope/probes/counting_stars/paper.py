"""The Counting-Stars repository's construction: its fixed counts and its splicing loop.

Star i = 0 … M−1 goes in with k = i × (j // M), j the haystack's length (pieces split on single
spaces in English, characters in Chinese). Chinese: at character ``k + j // M + len(star) × i``
of the text as it is by then. English: with W the text split on single spaces and w the pieces
of the star, the text becomes ``" ".join(W[:a]) + star + " ".join(W[a:])`` for
``a = w × i + k + j // M``. The loop is kept as it is, drift included: an English star of w
pieces adds w − 2 (its first and last join the words beside it), so each lands two words
later than the one before and the last ones pile up at the end; Chinese stars are placed by
the current star's length, so a later one can land inside an earlier star line.
"""

from __future__ import annotations

from collections.abc import Sequence

from needlescope.probes.counting_stars.counts import COUNTS, MISTAKEN


def paper_counts(m: int) -> tuple[list[int], list[int]]:
    """The first M of the repository's counts, and of its reasoning variant's mistaken ones."""
    if not 1 <= m <= len(COUNTS):
        raise ValueError(f"the paper's counts hold {len(COUNTS)} stars, not {m}")
    return list(COUNTS[:m]), list(MISTAKEN[:m])


def splice(text: str, stars: Sequence[str], language: str) -> tuple[str, tuple[int, ...]]:
    """The text with the stars in, and each star's first character's offset in it."""
    if language == "zh":
        return _splice_chars(text, stars)
    return _splice_pieces(text, stars)


def _shift(offsets: list[int], at: int, by: int) -> None:
    for index, offset in enumerate(offsets):
        if offset >= at:
            offsets[index] = offset + by


def _splice_chars(text: str, stars: Sequence[str]) -> tuple[str, tuple[int, ...]]:
    j, m = len(text), len(stars)
    step = j // m if m else 0
    offsets: list[int] = []
    for i, star in enumerate(stars):
        at = min(i * step + step + len(star) * i, len(text))  # a slice stops at the end
        text = text[:at] + star + text[at:]
        _shift(offsets, at, len(star))
        offsets.append(at)
    return text, tuple(offsets)


def _splice_pieces(text: str, stars: Sequence[str]) -> tuple[str, tuple[int, ...]]:
    """The English loop on a list of pieces: joining and splitting the whole text again for
    every star, as the repository does, gives the same text M times more slowly."""
    pieces = text.split(" ")
    j, m = len(pieces), len(stars)
    step = j // m if m else 0
    offsets: list[int] = []
    for i, star in enumerate(stars):
        parts = star.split(" ")
        at = min(len(parts) * i + i * step + step, len(pieces))  # a slice stops at the end
        offset = sum(map(len, pieces[:at])) + max(at - 1, 0)
        # The star's first piece joins the one before it, its last the one after it; between
        # two pieces it takes the place of the space that separated them.
        between = 0 < at < len(pieces)
        start, end = max(at - 1, 0), min(at + 1, len(pieces))
        if at > 0:
            parts[0] = pieces[at - 1] + parts[0]
        if at < len(pieces):
            parts[-1] = parts[-1] + pieces[at]
        pieces[start:end] = parts
        _shift(offsets, offset, len(star) - between)
        offsets.append(offset)
    return " ".join(pieces), tuple(offsets)
