"""``cache: auto``: prompt prefixes that runs of a sweep's cells share (the instruction, the
haystack before the first needle), marked for the provider's prompt cache where caching them
pays by the price table, and the cells ordered so a prefix's readers follow its writer.

Anthropic caches a marked prefix: writing it costs 1.25× the input price (2× for the 1-hour
cache a batch wants), reading it 0.1×, so a prefix shared by k cells pays when
(k - 1) × (1 - read) > write - 1. OpenAI caches every prefix of 1,024 tokens or more itself, at
no premium; a stable ``prompt_cache_key`` per prefix sends the cells that share it to one cache.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence

from needlescope.config import ModelConfig
from needlescope.config._models import CACHE_MULTIPLES, CACHE_PROVIDERS
from needlescope.providers.base import CachePrefix, Message

CACHING_PROVIDERS = CACHE_PROVIDERS
CHARS_PER_TOKEN = 4  # a prefix's tokens, estimated: below the minimum nothing is marked
# The most prompts one mark is shared by: a few dozen readers already pay a write back many
# times over, and the choice of runs stays linear in the cells.
REACH = 64


def minimum_tokens(model: ModelConfig) -> int:
    """The shortest prefix the provider caches: Anthropic 2,048 tokens for a Haiku, else 1,024
    (OpenAI's too)."""
    return 2048 if "haiku" in (model.model or "").lower() else 1024


def prompt_order(prompts: Sequence[Sequence[Message]]) -> list[int]:
    """The prompts' indices in the order of their text: cells sharing a prefix side by side."""
    return sorted(range(len(prompts)), key=lambda i: [(m.role, m.content) for m in prompts[i]])


def cache_marks(
    prompts: Sequence[Sequence[Message]], model: ModelConfig, *, batched: bool
) -> list[CachePrefix | None]:
    """Each prompt's shared prefix worth caching, or None. ``batched``: Anthropic's 1-hour
    cache (a batch runs its requests in any order over minutes to hours).

    The prompts in text order are cut into runs of neighbours, each run marked with the prefix
    all of its prompts share, so that the whole sweep saves the most by the price table. One
    mark per run, not the longest prefix per prompt: where needles sit at every depth of one
    text, neighbours share a staircase of prefixes, and a mark of its own for each prompt
    would have each pay the write and hardly any read."""
    order = prompt_order(prompts)
    # shared[j]: the common prefix of the j-th and (j+1)-th prompts in text order.
    shared = [_common(prompts[a], prompts[b]) for a, b in itertools.pairwise(order)]
    ttl = "1h" if batched else "5m"
    gain = _gain(model, ttl)
    least = minimum_tokens(model) * CHARS_PER_TOKEN
    # best[e]: the most the first e prompts (in text order) save; cut[e]: where its last run
    # starts. A run of k prompts sharing a prefix of n characters saves n × gain(k).
    best = [0.0] * (len(order) + 1)
    cut = list(range(len(order) + 1))
    for end in range(1, len(order) + 1):
        best[end], cut[end] = best[end - 1], end - 1
        prefix: tuple[int, int] | None = None
        for start in range(end - 2, max(-1, end - 1 - REACH), -1):
            prefix = shared[start] if prefix is None else min(prefix, shared[start])
            chars = _length(prompts[order[start]], prefix)
            if chars < least:
                break  # shorter still further back
            saving = best[start] + chars * gain(end - start)
            if saving > best[end]:
                best[end], cut[end] = saving, start
    marks: list[CachePrefix | None] = [None] * len(prompts)
    end = len(order)
    while end > 0:
        start = cut[end]
        if end - start >= 2:
            run = order[start:end]
            message, chars = min(shared[start : end - 1])
            key = _key(prompts[run[0]], message, chars)
            for index in run:
                marks[index] = CachePrefix(message, chars, key, ttl)
        end = start
    return marks


def _gain(model: ModelConfig, ttl: str) -> Callable[[int], float]:
    """What caching saves a run of k prompts, per character of the prefix they share, as a
    share of the input price: k - 1 reads instead of full input, less the write's premium."""
    if model.provider != "anthropic":
        return lambda k: float(k - 1)  # no write premium: OpenAI's reads are its saving
    defaults = CACHE_MULTIPLES["anthropic"]
    price = model.price
    read, write = defaults["cached_input_per_mtok"], defaults["cache_write_per_mtok"]
    if ttl == "1h":
        write = defaults["cache_write_1h_per_mtok"]
    if price is not None and price.input_per_mtok > 0:
        rate = price.cache_write_1h_per_mtok if ttl == "1h" else price.cache_write_per_mtok
        read = (price.cached_input_per_mtok or price.input_per_mtok) / price.input_per_mtok
        write = (rate or price.input_per_mtok) / price.input_per_mtok
    return lambda k: (k - 1) * (1 - read) - (write - 1)


def _length(prompt: Sequence[Message], prefix: tuple[int, int]) -> int:
    message, chars = prefix
    return sum(len(m.content) for m in prompt[:message]) + chars


def _key(prompt: Sequence[Message], message: int, chars: int) -> str:
    text = "".join(m.role + m.content for m in prompt[:message])
    text += prompt[message].content[:chars] if message < len(prompt) else ""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _common(a: Sequence[Message], b: Sequence[Message]) -> tuple[int, int]:
    """(message, chars): the prompts agree on every message before ``message`` and on the
    first ``chars`` characters of that one."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x.role != y.role:
            return (i, 0)
        if x.content != y.content:
            return (i, _common_chars(x.content, y.content))
    shortest = min(len(a), len(b))
    return (shortest - 1, len(a[shortest - 1].content)) if shortest else (0, 0)


def _common_chars(x: str, y: str) -> int:
    """The length of the strings' common prefix, by halving (slices compare at C speed)."""
    low, high = 0, min(len(x), len(y))
    while low < high:
        mid = (low + high + 1) // 2
        if x[:mid] == y[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
