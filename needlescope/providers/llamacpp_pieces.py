"""Counting many pieces of text in one llama.cpp ``/tokenize`` request (a ``PieceCounter``).

Only for a GGUF whose tokenizer is a byte-level BPE (``tokenizer.ggml.model: gpt2``) with a
pre-tokenizer from ``ADDITIVE_PRE``: there, pieces joined by ``fitting.SEPARATOR`` (a blank
line) tokenize apart exactly, and the reply's tokens (``with_pieces``) say which piece each
belongs to. ``frame_tokens`` counts the chat template's frame around the contents once per
tuple of roles; a content holding a special token's text is not counted by pieces
(``framable``).

Design: docs/design/providers.md#llamacpp-pieces
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from needlescope.errors import ProviderError
from needlescope.fitting import SEPARATOR, separable
from needlescope.provenance import read_metadata
from needlescope.providers import base
from needlescope.providers.openai import OpenAIProvider

ADDITIVE_PRE = frozenset({"gpt2", "smollm"})  # llama.cpp pre-tokenizers using GPT-2's regex
_CONTROL, _USER_DEFINED = 3, 4  # GGUF token types whose text is parsed as a special token
_MARKERS = ("Needlescopefirst", "Needlescopesecond", "Needlescopethird", "Needlescopefourth")


def additive_specials(path: str | os.PathLike[str]) -> tuple[str, ...] | None:
    """The special tokens' texts of the GGUF at ``path`` if its pieces add up, else None."""
    keys = ("tokenizer.ggml.model", "tokenizer.ggml.pre")
    meta = read_metadata(path, keys)
    if meta.get("tokenizer.ggml.model") != "gpt2" or meta.get("tokenizer.ggml.pre") not in (
        ADDITIVE_PRE
    ):
        return None
    vocab = read_metadata(path, ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"))
    tokens, types = vocab.get("tokenizer.ggml.tokens"), vocab.get("tokenizer.ggml.token_type")
    if not isinstance(tokens, list) or not isinstance(types, list):
        return None
    return tuple(t for t, k in zip(tokens, types, strict=False) if k in (_CONTROL, _USER_DEFINED))


class LlamaCppPieces:
    """A ``PieceCounter`` over a llama.cpp server's ``/tokenize`` and ``/apply-template``."""

    def __init__(self, provider: OpenAIProvider, specials: tuple[str, ...]) -> None:
        assert provider.tokenize_url is not None and provider.apply_template_url is not None
        self.provider = provider
        self.tokenize_url = provider.tokenize_url
        self.apply_template_url = provider.apply_template_url
        self.specials = tuple(s for s in specials if s)
        self._frames: dict[tuple[str, ...], int | None] = {}
        self.requests = 0  # every request sent here (tokenize and apply-template)

    def framable(self, content: str) -> bool:
        return separable(content) and not any(s in content for s in self.specials)

    async def count_separated(self, pieces: Sequence[str]) -> list[int]:
        joined = SEPARATOR.join(pieces)
        data = await self._post(self.tokenize_url, {"content": joined, "with_pieces": True})
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise self._bad("sent no 'tokens' list")
        starts: list[int] = []
        ends: list[int] = []
        at, sep = 0, len(SEPARATOR.encode())
        for piece in pieces:
            starts.append(at)
            at += len(piece.encode("utf-8", "surrogatepass"))
            ends.append(at)
            at += sep
        counts = [0] * len(pieces)
        index, start, n = 0, 0, len(pieces)
        for token in tokens:
            raw = token.get("piece") if isinstance(token, dict) else None
            end = start + (len(raw.encode()) if isinstance(raw, str) else len(raw or ()))
            while index < n and start >= ends[index]:
                index += 1
            if index < n and start >= starts[index]:
                if end > ends[index]:
                    raise self._bad("tokenized two pieces into one token")
                counts[index] += 1
            elif index < n and end > starts[index]:
                raise self._bad("tokenized a piece with the blank line before it")
            start = end
        if start != at - sep:
            raise self._bad(f"returned tokens of {start} bytes for {at - sep}")
        return counts

    async def frame_tokens(self, roles: tuple[str, ...]) -> int | None:
        if roles not in self._frames:
            self._frames[roles] = await self._frame(roles)
        return self._frames[roles]

    async def _frame(self, roles: tuple[str, ...]) -> int | None:
        if len(roles) > len(_MARKERS):
            return None
        markers = _MARKERS[: len(roles)]
        plain = await self._template(roles, markers)
        spaced = await self._template(roles, tuple(f" \n{m} \n" for m in markers))
        parts = _split(plain, markers)
        if parts is None or _split(spaced, tuple(f" \n{m} \n" for m in markers)) != parts:
            return None  # the template changes contents (trims them, or more)
        # Each content must follow a newline (a pre-token of its own before a separable text)
        # and end where a special token starts (text is split at specials before pre-tokenizing).
        if not all(p.endswith("\n") for p in parts[:-1]):
            return None
        if not all(any(p.startswith(s) for s in self.specials) for p in parts[1:]):
            return None
        body = {"content": plain, "add_special": True, "parse_special": True}
        whole = await self._post(self.tokenize_url, body)
        tokens = whole.get("tokens") if isinstance(whole, dict) else None
        if not isinstance(tokens, list):
            raise self._bad("sent no 'tokens' list")
        return len(tokens) - sum(await self.count_separated(markers))

    async def _template(self, roles: tuple[str, ...], contents: tuple[str, ...]) -> str:
        wire = [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)]
        data = await self._post(self.apply_template_url, {"messages": wire})
        prompt = data.get("prompt") if isinstance(data, dict) else None
        if not isinstance(prompt, str):
            raise self._bad("sent no 'prompt'")
        return prompt

    async def _post(self, url: str, body: dict[str, Any]) -> Any:
        self.requests += 1
        # A fresh connection each time: between a fit's rounds the client may render for longer
        # than llama.cpp keeps an idle connection open (5 s), and a request sent on a connection
        # the server has closed fails ("server disconnected").
        _, data = await self.provider._post(url, body, {"Connection": "close"})
        return data

    def _bad(self, what: str) -> ProviderError:
        return ProviderError(
            base.BAD_RESPONSE,
            f"{self.provider.name}: llama.cpp's tokenizer {what}",
            retryable=False,
        )


def _split(prompt: str, markers: tuple[str, ...]) -> list[str] | None:
    """The frame around ``markers`` (each once, in order), or None."""
    parts: list[str] = []
    rest = prompt
    for marker in markers:
        if rest.count(marker) != 1:
            return None
        head, rest = rest.split(marker)
        parts.append(head)
    return [*parts, rest]
