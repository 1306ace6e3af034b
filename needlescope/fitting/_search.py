"""Fitting a prompt to a length: measuring text (characters, bytes; tokens through a
provider), a binary search over the filler's size, and a piecewise measure that counts a
long text's pieces once each."""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from needlescope.errors import LengthError

Unit = Literal["chars", "bytes"]


def measure_text(text: str, unit: Unit) -> int:
    """Length in characters or in UTF-8 bytes."""
    if unit == "chars":
        return len(text)
    if unit == "bytes":
        return len(text.encode("utf-8"))
    raise ValueError(f"unit must be chars or bytes, got {unit!r}")


# Where a regex pre-tokenizer (GPT-2's, cl100k_base's, o200k_base's, Llama 3's) always ends a
# piece, whatever follows: before a space that follows a non-space, and before , . ; : ! ? (or
# ，。、；：！？) that follow a letter or a digit. No piece of those patterns runs across such a
# place, none looks behind it, and the piece before it ends the same way at the end of a text, so
# the text before it and the text from it on tokenize apart exactly as they do together.
_PIECE_CUT = re.compile(r"(?<=\S)(?= )|(?<=[^\W_])(?=[,.;:!?，。、；：！？])")


class SplitMeasure:
    """A token count computed piece by piece, remembering every piece it has counted.

    ``count`` takes a list of pieces and returns their token counts (no BOS token, no template:
    ``overhead`` is added once per text for those). The text is cut about every ``piece_chars``
    characters, only where a regex pre-tokenizer always ends a piece (see ``_PIECE_CUT``), so the
    sum is exactly the count of the whole text for tokenizers of that kind: tiktoken's encodings
    and GPT-2-style byte-level BPEs. Not for SentencePiece tokenizers that merge across spaces or
    add a prefix space to every text.

    Each cut is the first allowed place at least ``piece_chars`` after the previous one: text
    before a change keeps its pieces, and text after a change that shifts it by a character or two
    (as the needles move between the last prompts of a fit) soon falls back into step; a longer
    shift is counted again up to the end. So a fit counts its first full-size prompt whole, the
    next one or two partly, and then a few pieces per needle. Remembered pieces are forgotten
    together once they hold more than ``cache_chars`` characters.
    """

    def __init__(
        self,
        count: Callable[[list[str]], Sequence[int]],
        *,
        overhead: int = 0,
        piece_chars: int = 2048,
        cache_chars: int = 1 << 26,
    ) -> None:
        if piece_chars < 1:
            raise ValueError(f"piece_chars must be positive, got {piece_chars}")
        self._count = count
        self.overhead = overhead
        self.piece_chars = piece_chars
        self.cache_chars = cache_chars
        self._known: dict[str, int] = {}
        self._known_chars = 0
        self.calls = 0  # texts measured
        self.chars_seen = 0  # their characters
        self.chars_counted = 0  # characters sent to ``count``: pieces not seen before
        self.pieces_counted = 0

    def pieces(self, text: str) -> list[str]:
        """``text`` cut into pieces that tokenize independently (they join back to ``text``)."""
        cuts: list[str] = []
        size, step = len(text), self.piece_chars
        search = _PIECE_CUT.search
        start = 0
        while size - start > 2 * step and (found := search(text, start + step)) is not None:
            cut = found.start()
            cuts.append(text[start:cut])
            start = cut
        if start < size or not cuts:
            cuts.append(text[start:])
        return cuts

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.chars_seen += len(text)
        pieces = self.pieces(text)
        known = self._known
        missing = list(dict.fromkeys(p for p in pieces if p not in known))
        fresh: dict[str, int] = {}
        if missing:
            counts = list(self._count(missing))
            if len(counts) != len(missing):
                raise ValueError(f"count returned {len(counts)} counts for {len(missing)} pieces")
            fresh = dict(zip(missing, counts, strict=True))
        total = self.overhead + sum(fresh[p] if p in fresh else known[p] for p in pieces)
        if fresh:
            added = sum(map(len, missing))
            self.chars_counted += added
            self.pieces_counted += len(missing)
            if self._known_chars + added > self.cache_chars:
                known.clear()
                self._known_chars = 0
            known.update(fresh)
            self._known_chars += added
        return total


@dataclass(frozen=True)
class Fit:
    """The longest prompt within the target: measured <= target < measure(n_filler_chars + 1)."""

    n_filler_chars: int
    text: str
    measured: int
    calls: int


class _Search:
    """Finds n with f(n) <= target < f(n + 1) for the measured length f of build(n).

    It measures n = 0 (the instructions alone), extrapolates linearly from the units per filler
    character seen so far until it brackets the target, then interpolates inside the bracket,
    aiming further across whenever interpolation lands on the same side twice. Measurements
    needed: characters 3, UTF-8 bytes 4-6, tokens about 7 (6 with a hint), at most ~10.
    """

    def __init__(self, target: int, hint_ratio: float | None) -> None:
        if target < 0:
            raise ValueError(f"target length cannot be negative, got {target}")
        if hint_ratio is not None and not hint_ratio > 0:
            raise ValueError(f"hint_ratio must be positive, got {hint_ratio}")
        self.target = target
        self.hint_ratio = hint_ratio
        self.calls = 0
        self.base = 0
        self.low: tuple[int, int, str] | None = None  # (n, measured, text) with measured <= target
        self.high: tuple[int, int] | None = None  # (n, measured) with measured > target
        self.overshoot = 0.0
        self.streak = 0  # consecutive results at or below the target (> 0) or above it (< 0)

    def next_n(self) -> int | None:
        if self.low is None:
            return 0
        n_low, value_low, _ = self.low
        if self.high is None:
            if n_low == 0 and self.hint_ratio is not None:
                slope = self.hint_ratio
            elif n_low == 0:
                slope = 1.0
            else:
                slope = (value_low - self.base) / n_low
                if slope <= 0:
                    # A measure that is not monotone (a tokenizer merging across the seam) can
                    # read no growth over a few characters: look further before giving up.
                    if n_low > 8 * (self.target + 64):
                        raise LengthError("the measured length does not grow with the filler")
                    return 2 * n_low
            aim = self.target + 0.5 + self.overshoot
            # Each one-sided step that misses aims further past the target, to bracket it soon.
            self.overshoot = max(1.0, 2 * self.overshoot)
            return max(n_low + 1, n_low + math.ceil((aim - value_low) / slope))
        n_high, value_high = self.high
        width = n_high - n_low
        if width <= 1:
            return None
        level = self.target + 0.5
        if abs(self.streak) >= 2:
            # Interpolation keeps landing on one side (the classic regula falsi stall): aim past it.
            level += math.copysign(2 ** (abs(self.streak) - 2), self.streak)
        chars_per_unit = width / (value_high - value_low)
        step = (level - value_low) * chars_per_unit
        # Where one unit spans several characters, interpolation cannot tell them apart: keep half
        # a unit away from both ends so each call still halves what is left to search.
        margin = max(1, min(width // 4, math.ceil(chars_per_unit / 2)))
        return min(n_high - margin, max(n_low + margin, n_low + round(step)))

    def record(self, n: int, text: str, value: int) -> None:
        self.calls += 1
        if n == 0:
            if value > self.target:
                raise LengthError(
                    f"instructions alone are {value} units,"
                    f" more than the target length {self.target}"
                )
            self.base = value
        below = value <= self.target
        if self.high is not None:
            self.streak = max(self.streak, 0) + 1 if below else min(self.streak, 0) - 1
        if below:
            self.low = (n, value, text)
        else:
            self.high = (n, value)

    def result(self) -> Fit:
        assert self.low is not None
        n, value, text = self.low
        return Fit(n_filler_chars=n, text=text, measured=value, calls=self.calls)


async def fit_to_length(
    build: Callable[[int], str],
    measure: Callable[[str], Awaitable[int]],
    target: int,
    *,
    hint_ratio: float | None = None,
) -> Fit:
    """The most filler characters n whose prompt ``build(n)`` measures at most ``target``.

    ``hint_ratio`` (units per filler character, e.g. from an earlier fit) saves a measurement.
    """
    search = _Search(target, hint_ratio)
    while (n := search.next_n()) is not None:
        text = build(n)
        search.record(n, text, await measure(text))
    return search.result()
