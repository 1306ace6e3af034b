"""Retrieval's pure parts: chunks of a haystack, their ranking by cosine similarity to the
question, the chunks chosen for a prompt and where each needle went (probes/rag.py builds
the prompt around them)."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from needlescope.probes.base import Embed

Mode = Literal["topk", "half", "full"]


@dataclass(frozen=True)
class Chunk:
    index: int
    start: int  # character offsets in the haystack: text == haystack[start:end]
    end: int
    text: str


def chunk_text(text: str, size: int, overlap: int) -> list[Chunk]:
    """Windows of ``size`` characters, each starting ``size - overlap`` after the previous one;
    the last one ends at the end of the text. Together they cover every character."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be in [0, {size}), got {overlap}")
    chunks: list[Chunk] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        chunks.append(Chunk(len(chunks), start, end, text[start:end]))
        if end == len(text):
            break
        start += size - overlap
    return chunks


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is all zeros (or not finite)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different widths: {len(a)} and {len(b)}")
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if not norm or not math.isfinite(norm):
        return 0.0
    value = math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm
    return value if math.isfinite(value) else 0.0


def rank(question_vector: Sequence[float], chunk_vectors: Sequence[Sequence[float]]) -> list[int]:
    """Chunk indices, most similar to the question first; ties keep text order."""
    scores = [cosine(question_vector, v) for v in chunk_vectors]
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def select(
    ranking: Sequence[int],
    sizes: Mapping[int, int],
    mode: Mode,
    *,
    top_k: int,
    budget: int,
) -> list[int]:
    """Chunks in rank order while their ``sizes`` fit in ``budget`` (the length left for them):
    at most ``top_k`` of them in ``topk`` mode. Stops at the first chunk that does not fit."""
    if mode not in ("topk", "half", "full"):
        raise ValueError(f"context mode must be topk, half or full, got {mode!r}")
    limit = top_k if mode == "topk" else len(ranking)
    chosen: list[int] = []
    used = 0
    for index in ranking[:limit]:
        if used + sizes[index] > budget:
            break
        chosen.append(index)
        used += sizes[index]
    return chosen


def arrange(selected: Sequence[int], reverse: bool) -> list[int]:
    """Prompt order: best first, or least relevant first so the best sits next to the question."""
    return list(reversed(selected)) if reverse else list(selected)


def retrieval_record(
    needle_spans: Sequence[tuple[int, int]],
    chunks: Sequence[Chunk],
    ranking: Sequence[int],
    selected: Sequence[int],
) -> list[dict[str, Any]]:
    """Per needle (1-based): the best-ranked chunk holding all of it (else part of it), that
    chunk's 1-based rank, whether a chosen chunk holds all of it (``retrieved``) and whether only
    part of it made it into the prompt (``partial``)."""
    position = {index: place for place, index in enumerate(ranking, start=1)}
    chosen = set(selected)
    records = []
    for needle, (start, end) in enumerate(needle_spans, start=1):
        whole = [c for c in chunks if c.start <= start and end <= c.end]
        touching = [c for c in chunks if c.start < end and start < c.end]
        holding = whole or touching
        best = min(holding, key=lambda c: (position.get(c.index, math.inf), c.index), default=None)
        retrieved = any(c.index in chosen for c in whole)
        records.append(
            {
                "needle": needle,
                "chunk": None if best is None else best.index,
                "rank": None if best is None else position.get(best.index),
                "retrieved": retrieved,
                "partial": not retrieved and any(c.index in chosen for c in touching),
            }
        )
    return records


def passages_text(chunks: Sequence[Chunk]) -> str:
    return "\n\n".join(passage(number, c) for number, c in enumerate(chunks, start=1))


def passage(number: int, chunk: Chunk) -> str:
    return f"[{number}] {chunk.text.strip()}"


def memoize(embed: Embed, max_items: int = 4096) -> Embed:
    """``embed`` with a cache of recent texts: cells sharing a haystack embed its chunks once."""
    store: OrderedDict[str, list[float]] = OrderedDict()

    async def cached(texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in store))
        if missing:
            vectors = await embed(missing)
            if len(vectors) != len(missing):
                raise ValueError(f"embedder returned {len(vectors)} vectors for {len(missing)}")
            store.update(zip(missing, vectors, strict=True))
        result = []
        for text in texts:
            store.move_to_end(text)
            result.append(store[text])
        while len(store) > max_items:
            store.popitem(last=False)
        return result

    return cached
