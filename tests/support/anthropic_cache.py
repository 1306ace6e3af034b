"""Anthropic's prompt caching as the fake Messages API plays it.

A ``cache_control: {"type": "ephemeral", "ttl": "5m" | "1h"}`` on a tool, system block or
message block is a breakpoint (at most 4; 1-hour ones before 5-minute ones): the prompt up to
and including it (model, tools, system, messages) is hashed and cached when it holds at least
the minimum (1024 tokens, 2048 for a Haiku). A request reads the longest live entry at a
breakpoint or up to 20 blocks before one, and writes every breakpoint past it; a read renews
the entry's lifetime. Tokens are the fake's (words, + 3 per message and for the system; tools
cost none), so input + written + read tokens is the prompt's whole count. A request looks the
cache up before it runs and its writes land after (``lookup`` then ``commit``): a request
reads only what requests that finished before it began wrote.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tests.support.anthropic_server import _text, count_input_tokens

TTLS = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
LOOKBACK = 20  # blocks before a breakpoint where a hit is looked for


def minimum_tokens(model: str) -> int:
    """The shortest prefix the model caches: 2048 tokens for a Haiku, else 1024."""
    return 2048 if "haiku" in model.lower() else 1024


@dataclass(frozen=True)
class Block:
    key: str  # the prompt's hash up to and including this block
    tokens: int  # the prompt's tokens up to and including this block
    ttl_s: float | None  # its breakpoint's lifetime; None: not a breakpoint


@dataclass(frozen=True)
class Lookup:
    """What one request reads from the cache and will write to it."""

    total: int  # the prompt's tokens
    read: int  # tokens read from the cache
    read_key: str | None
    writes: tuple[tuple[str, float], ...]  # (key, lifetime) of each entry to write
    written_5m: int
    written_1h: int
    marked: bool  # it has a breakpoint long enough to cache

    def usage(self) -> dict[str, Any]:
        written = self.written_5m + self.written_1h
        return {
            "input_tokens": max(0, self.total - self.read - written),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": self.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.written_5m,
                "ephemeral_1h_input_tokens": self.written_1h,
            },
        }


@dataclass
class Entry:
    ttl_s: float
    expires_at: float


class PromptCache:
    """One organisation's cache; ``hits`` and ``misses`` count requests with a breakpoint long
    enough to cache, ``writes`` the entries written."""

    def __init__(self, minimum: Callable[[str], int] = minimum_tokens) -> None:
        self.minimum = minimum
        self.entries: dict[str, Entry] = {}
        self.hits = 0
        self.misses = 0
        self.writes = 0

    def lookup(self, body: dict[str, Any], now: float, words: Callable[[str], int]) -> Lookup:
        blocks = prompt_blocks(body, words)
        least = self.minimum(str(body.get("model")))
        marks = [i for i, b in enumerate(blocks) if b.ttl_s is not None and b.tokens >= least]
        hit = self._longest_hit(blocks, marks, least, now)
        read = blocks[hit].tokens if hit is not None else 0
        writes: list[tuple[str, float]] = []
        written = {300.0: 0, 3600.0: 0}
        done = read
        for i in marks:
            block = blocks[i]
            if (hit is not None and i <= hit) or block.ttl_s is None:
                continue
            writes.append((block.key, block.ttl_s))
            written[block.ttl_s] += block.tokens - done
            done = block.tokens
        return Lookup(
            total=count_input_tokens(body, words),
            read=read,
            read_key=blocks[hit].key if hit is not None else None,
            writes=tuple(writes),
            written_5m=written[300.0],
            written_1h=written[3600.0],
            marked=bool(marks),
        )

    def commit(self, lookup: Lookup, now: float) -> None:
        """The request has run: its read entry lives on, its writes become readable."""
        if lookup.read_key is not None and lookup.read_key in self.entries:
            entry = self.entries[lookup.read_key]
            entry.expires_at = max(entry.expires_at, now + entry.ttl_s)
        for key, ttl_s in lookup.writes:
            self.entries[key] = Entry(ttl_s, now + ttl_s)
            self.writes += 1
        if lookup.marked:
            self.hits += lookup.read > 0
            self.misses += lookup.read == 0

    def _longest_hit(
        self, blocks: list[Block], marks: list[int], least: int, now: float
    ) -> int | None:
        best: int | None = None
        for mark in marks:
            for i in range(mark, max(mark - LOOKBACK, -1), -1):
                if blocks[i].tokens < least:
                    break
                entry = self.entries.get(blocks[i].key)
                if entry is not None and entry.expires_at > now:
                    best = i if best is None else max(best, i)
                    break
        return best


def prompt_blocks(body: dict[str, Any], words: Callable[[str], int]) -> list[Block]:
    """Every block of the prompt in the cache's order: tools, system, then messages."""
    digest = hashlib.sha256(json.dumps(body.get("model")).encode())
    tokens = 0
    blocks: list[Block] = []
    for section, overhead, part in _parts(body):
        if overhead:
            tokens += overhead
            digest.update(f"\x00{section}".encode())
        bare = {k: v for k, v in part.items() if k != "cache_control"}
        digest.update(json.dumps(bare, sort_keys=True).encode())
        tokens += 0 if section == "tools" else words(_text([part]))
        blocks.append(Block(digest.copy().hexdigest(), tokens, _ttl(part.get("cache_control"))))
    return blocks


def cache_problem(body: dict[str, Any]) -> str | None:
    """The API's 400 message for the body's cache_control markers, or None."""
    marks = [
        (path, part["cache_control"]) for path, part in _paths(body) if "cache_control" in part
    ]
    for path, control in marks:
        if not isinstance(control, dict) or control.get("type") != "ephemeral":
            return f"{path}.cache_control.type: Input should be 'ephemeral'"
        if control.get("ttl", "5m") not in TTLS:
            return f"{path}.cache_control.ephemeral.ttl: Input should be '5m' or '1h'"
    if len(marks) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}."
        )
    ttls = [control.get("ttl", "5m") for _, control in marks]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        return "cache_control: a ttl='1h' block may not come after a ttl='5m' block"
    return None


def _ttl(control: Any) -> float | None:
    return TTLS.get(control.get("ttl", "5m")) if isinstance(control, dict) else None


def _content(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _parts(body: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(section, tokens the section adds before this part, part) of the prompt, in order."""
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            yield "tools", 0, tool
    if body.get("system"):
        for i, block in enumerate(_content(body["system"])):
            yield "system", 3 if i == 0 else 0, block
    for message in body.get("messages") or ():
        for i, block in enumerate(_content(message.get("content"))):
            yield str(message.get("role")), 3 if i == 0 else 0, block


def _paths(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path as the API's errors name it, part) of every tool and content block."""
    for i, tool in enumerate(body.get("tools") or ()):
        if isinstance(tool, dict):
            yield f"tools.{i}", tool
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(_content(system)):
            yield f"system.{i}", block
    for m, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for i, block in enumerate(_content(content)):
                yield f"messages.{m}.content.{i}", block
