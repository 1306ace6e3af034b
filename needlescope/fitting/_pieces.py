"""Token counts of long prompts from counts of their pieces, many pieces per counting request.

A provider whose tokenizer provably tokenizes the pieces of a text apart exactly as the whole
(see ``PieceCounter``) counts a batch of pieces in one request; a text's count is the sum of
its pieces' counts, and a sweep counts each distinct piece once. Pieces are cut where the
text's content says (a sentence end whose preceding ``WINDOW`` characters hash to 0 mod
``SELECT``, at a place ``fitting._PIECE_CUT`` allows), so prompts that share filler share
pieces.

Design: docs/design/fitting.md#pieces
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

SELECT = 8  # one sentence end in SELECT becomes a cut: pieces of ~8 sentences
WINDOW = 16  # characters before a sentence end that decide whether it is a cut
# A subset of fitting._PIECE_CUT's places (before a space after a non-space; before 。！？ after a
# letter or digit), chosen as sentence ends so there are few to hash.
# Only before a space followed by a letter: a piece starting with two spaces, or a space and a
# digit (split off before the rest by some pre-tokenizers), could merge into SEPARATOR. The cut
# is where each match ends (patterns without lookbehind: the engine then skips ahead fast).
_SENTENCE_CUT = re.compile(r"[.!?](?= [^\W\d_])")
_CJK_CUT = re.compile(r"[^\W_](?=[。！？])")
# Pieces sent in one request are joined by this. A piece never starts with whitespace other
# than one space followed by a non-space, nor ends with whitespace (except the last sent), so a
# blank line between two pieces is a pre-token of its own for the tokenizers PieceCounter
# admits, and each piece's tokens are those it has alone.
SEPARATOR = "\n\n"


def cuts(text: str) -> list[int]:
    """The offsets where ``text`` is cut into pieces (content-defined, see the module doc)."""
    crc = zlib.crc32
    found: list[int] = []
    places = [m.end() for m in _SENTENCE_CUT.finditer(text)]
    if "。" in text or "！" in text or "？" in text:
        places = sorted(places + [m.end() for m in _CJK_CUT.finditer(text)])
    for at in places:
        if crc(text[max(0, at - WINDOW) : at].encode("utf-8", "surrogatepass")) % SELECT == 0:
            found.append(at)
    return found


def pieces(text: str) -> list[str]:
    """``text`` cut at ``cuts``: the pieces join back to ``text``."""
    out: list[str] = []
    start = 0
    for at in cuts(text):
        out.append(text[start:at])
        start = at
    last = text[start:]
    body = last.rstrip()
    # A text's trailing whitespace is a pre-token of its own (GPT-2's \s+(?!\S) takes the
    # whole run at the end): a piece apart, so no other piece ends with whitespace and all of
    # them can share one request (see PieceCounts.fetch).
    if body and len(body) < len(last):
        out += [body, last[len(body) :]]
    else:
        out.append(last)
    return out


def separable(piece: str) -> bool:
    """Whether ``piece`` may follow ``SEPARATOR`` (or a template's newline) and keep its own
    tokens: it starts with a non-space, or with one space before a character that is neither
    a space nor a number."""
    if not piece:
        return False
    if not piece[0].isspace():
        return True
    return (
        piece[0] == " "
        and len(piece) > 1
        and not piece[1].isspace()
        and unicodedata.category(piece[1])[0] != "N"
    )


class PieceCounter(Protocol):
    """A provider's counter of separated pieces, for tokenizers where pieces provably add up.

    ``count_separated(pieces)`` returns each piece's token count (no BOS, no template) from one
    request counting ``SEPARATOR.join(pieces)``; ``framable(content)`` says whether a message's
    content may be counted by pieces (no special-token text in it, no leading whitespace);
    ``frame_tokens(roles)`` is what a prompt of messages with those roles counts beyond its
    contents' tokens (the chat template, BOS), or None when the template is not a plain frame.
    """

    async def count_separated(self, pieces: Sequence[str]) -> list[int]: ...

    def framable(self, content: str) -> bool: ...

    async def frame_tokens(self, roles: tuple[str, ...]) -> int | None: ...


class PieceCounts:
    """Piece counts remembered across texts (a sweep's cells share their filler's pieces).

    ``requests`` counts the counting requests sent; pieces are forgotten together once they
    hold more than ``cache_chars`` characters.
    """

    def __init__(
        self,
        count_separated: Callable[[Sequence[str]], Awaitable[list[int]]],
        *,
        cache_chars: int = 1 << 25,
    ) -> None:
        self._count = count_separated
        self.cache_chars = cache_chars
        self._known: dict[str, int] = {}
        self._known_chars = 0
        self.requests = 0
        self.chars_counted = 0

    def missing(self, text: str) -> list[str]:
        known = self._known
        return [p for p in pieces(text) if p not in known]

    def split(self, text: str) -> tuple[int, list[str]]:
        """The summed count of ``text``'s remembered pieces, and its other pieces (repeats
        kept: ``sum_of`` them once fetched)."""
        known = self._known
        total = 0
        lacking: list[str] = []
        for piece in pieces(text):
            count = known.get(piece)
            if count is None:
                lacking.append(piece)
            else:
                total += count
        return total, lacking

    def total(self, text: str) -> int | None:
        """The text's count from remembered pieces, or None if one is missing."""
        known = self._known
        total = 0
        for piece in pieces(text):
            count = known.get(piece)
            if count is None:
                return None
            total += count
        return total

    async def fetch(self, wanted: Iterable[str]) -> dict[str, int]:
        """The count of every piece in ``wanted``, counting those not counted yet: in one
        request, and one more for each piece ending in whitespace (only the whitespace runs
        that end texts, of which a sweep has few kinds: each is sent alone).
        The counts are returned, not only remembered: other builds may make this forget
        remembered ones meanwhile."""
        got: dict[str, int] = {}
        fresh: list[str] = []
        for piece in dict.fromkeys(wanted):
            count = self._known.get(piece)
            if count is None:
                fresh.append(piece)
            else:
                got[piece] = count
        inner = [p for p in fresh if not p[-1].isspace()]
        trailing = [p for p in fresh if p[-1].isspace()]
        batches = [inner + trailing[:1]] + [[p] for p in trailing[1:]]
        if trailing and not trailing[0].strip():  # whitespace alone would merge with SEPARATOR
            batches = [inner] + [[p] for p in trailing]
        for batch in batches:
            if not batch:
                continue
            counts = await self._count(batch)
            self.requests += 1
            if len(counts) != len(batch):
                raise ValueError(f"{len(counts)} counts for {len(batch)} pieces")
            got.update(zip(batch, counts, strict=True))
            added = sum(map(len, batch))
            self.chars_counted += added
            if self._known_chars + added > self.cache_chars:
                self._known.clear()
                self._known_chars = 0
            self._known.update(zip(batch, counts, strict=True))
            self._known_chars += added
        return got

    async def count(self, text: str) -> int:
        known, lacking = self.split(text)
        got = await self.fetch(lacking)
        return known + sum(got[p] for p in lacking)

    @staticmethod
    def countable(text: str) -> bool:
        """Whether ``text`` can be counted as the sum of its pieces (each piece separable)."""
        return separable(text)  # later pieces start at a cut: a space or 。！？, always separable
