"""Recursive character splitting, as U-NIAH chunks its RAG documents.

U-NIAH uses LangChain's ``RecursiveCharacterTextSplitter(chunk_size, chunk_overlap,
add_start_index=True)`` with its defaults; this is the same algorithm, written here so that
needlescope needs no LangChain: split at the first separator of ``"\\n\\n"``, ``"\\n"``,
``" "``, ``""`` that occurs, merge the pieces into chunks of at most ``chunk_size`` characters
overlapping by up to ``chunk_overlap``, split a piece too long with the next separators, strip
every chunk and find its start in the text.

Design: docs/design/haystack.md#chunking
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SEPARATORS = ("\n\n", "\n", " ", "")


def _split_keeping_separator(text: str, separator: str) -> list[str]:
    if not separator:
        return list(text)
    parts = re.split(f"({re.escape(separator)})", text)
    pieces = [parts[0]] + [parts[i] + parts[i + 1] for i in range(1, len(parts) - 1, 2)]
    return [p for p in pieces if p]


def _merge(pieces: Sequence[str], size: int, overlap: int) -> list[str]:
    chunks: list[str] = []
    current: list[str] = []
    total = 0
    for piece in pieces:
        if total + len(piece) > size and current:
            joined = "".join(current).strip()
            if joined:
                chunks.append(joined)
            while total > overlap or (total + len(piece) > size and total > 0):
                total -= len(current[0])
                current = current[1:]
        current.append(piece)
        total += len(piece)
    joined = "".join(current).strip()
    if joined:
        chunks.append(joined)
    return chunks


def _split(text: str, separators: Sequence[str], size: int, overlap: int) -> list[str]:
    separator, rest = separators[-1], tuple[str, ...]()
    for index, candidate in enumerate(separators):
        if candidate == "":
            separator = candidate
            break
        if candidate in text:
            separator, rest = candidate, tuple(separators[index + 1 :])
            break
    chunks: list[str] = []
    short: list[str] = []
    for piece in _split_keeping_separator(text, separator):
        if len(piece) < size:
            short.append(piece)
            continue
        if short:
            chunks += _merge(short, size, overlap)
            short = []
        chunks += _split(piece, rest, size, overlap) if rest else [piece]
    if short:
        chunks += _merge(short, size, overlap)
    return chunks


def split_text(text: str, size: int, overlap: int) -> list[str]:
    """``text`` in chunks of at most ``size`` characters (a longer one only when no separator
    splits it), overlapping by up to ``overlap`` characters."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    if not 0 <= overlap <= size:
        raise ValueError(f"chunk overlap must be in [0, {size}], got {overlap}")
    return _split(text, SEPARATORS, size, overlap)


def chunk_starts(text: str, chunks: Sequence[str], overlap: int) -> list[int]:
    """Each chunk's character offset in ``text`` (LangChain's ``start_index``)."""
    starts: list[int] = []
    index, previous = 0, 0
    for chunk in chunks:
        index = text.find(chunk, max(0, index + previous - overlap))
        starts.append(index)
        previous = len(chunk)
    return starts
