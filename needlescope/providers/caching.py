"""``cache: auto``: the longest prompt prefix at least two cells of a sweep share (the
instruction, the haystack before the first needle), marked for the provider's prompt cache
where caching it pays by the price table, and the cells ordered so its readers follow its writer.

Anthropic caches a marked prefix: writing it costs 1.25× the input price (2× for the 1-hour
cache a batch wants), reading it 0.1×, so a prefix shared by k cells pays when
(k - 1) × (1 - read) > write - 1. OpenAI caches every prefix of 1,024 tokens or more itself, at
no premium; a stable ``prompt_cache_key`` per prefix sends the cells that share it to one cache.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

from needlescope.config import ModelConfig
from needlescope.config._models import CACHE_MULTIPLES, CACHE_PROVIDERS
from needlescope.providers.base import CachePrefix, Message

CACHING_PROVIDERS = CACHE_PROVIDERS
CHARS_PER_TOKEN = 4  # a prefix's tokens, estimated: below the minimum nothing is marked
# Neighbours looked at on each side (in text order): a handful of readers already pays for a
# write, and the look stays linear in the cells.
REACH = 32


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
    cache (a batch runs its requests in any order over minutes to hours)."""
    order = prompt_order(prompts)
    # shared[j]: the common prefix of the j-th and (j+1)-th prompts in text order.
    shared = [_common(prompts[a], prompts[b]) for a, b in itertools.pairwise(order)]
    ttl = "1h" if batched else "5m"
    marks: list[CachePrefix | None] = [None] * len(prompts)
    for j, index in enumerate(order):
        prefix = next(
            (
                p
                for p in _candidates(shared, j)
                if _pays(prompts[index], p, _sharing(shared, j, p), model, ttl)
            ),
            None,
        )
        if prefix is None:
            continue
        message, chars = prefix
        text = "".join(m.role + m.content for m in prompts[index][:message])
        text += prompts[index][message].content[:chars] if message < len(prompts[index]) else ""
        key = hashlib.sha256(text.encode()).hexdigest()[:32]
        marks[index] = CachePrefix(message, chars, key, ttl)
    return marks


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


def _candidates(shared: list[tuple[int, int]], j: int) -> list[tuple[int, int]]:
    """The prefixes the j-th prompt (in text order) shares with a neighbour, longest first:
    the shorter ones are shared by more prompts."""
    found: set[tuple[int, int]] = set()
    for steps in (range(j - 1, max(-1, j - 1 - REACH), -1), range(j, min(len(shared), j + REACH))):
        least: tuple[int, int] | None = None
        for k in steps:
            least = shared[k] if least is None else min(least, shared[k])
            if least == (0, 0):
                break
            found.add(least)
    return sorted(found, reverse=True)


def _sharing(shared: list[tuple[int, int]], j: int, prefix: tuple[int, int]) -> int:
    """How many prompts around the j-th (in text order) share at least ``prefix``."""
    left = j
    while left > max(0, j - REACH) and shared[left - 1] >= prefix:
        left -= 1
    right = j
    while right < min(len(shared), j + REACH) and shared[right] >= prefix:
        right += 1
    return right - left + 1


def _pays(
    prompt: Sequence[Message], prefix: tuple[int, int], sharing: int, model: ModelConfig, ttl: str
) -> bool:
    message, chars = prefix
    length = sum(len(m.content) for m in prompt[:message]) + chars
    if length < minimum_tokens(model) * CHARS_PER_TOKEN or sharing < 2:
        return False
    if model.provider != "anthropic":
        return True  # no write premium
    defaults = CACHE_MULTIPLES["anthropic"]
    price = model.price
    read, write = defaults["cached_input_per_mtok"], defaults["cache_write_per_mtok"]
    if ttl == "1h":
        write = defaults["cache_write_1h_per_mtok"]
    if price is not None and price.input_per_mtok > 0:
        rate = price.cache_write_1h_per_mtok if ttl == "1h" else price.cache_write_per_mtok
        read = (price.cached_input_per_mtok or price.input_per_mtok) / price.input_per_mtok
        write = (rate or price.input_per_mtok) / price.input_per_mtok
    return (sharing - 1) * (1 - read) > write - 1
