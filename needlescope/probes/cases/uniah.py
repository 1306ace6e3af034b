"""U-NIAH's own terms: its prompts, its length budget and its RAG context, as its code has them.

- ``prompts: [uniah]`` (cases probe): three messages, U-NIAH's system message, the context as
  a user message, then the question with U-NIAH's suffix as a second user message.
- ``length_budget: seed``: the haystack and the needles together fill the cell's length minus
  ``final_context_length_buffer``, counted in cl100k_base tokens whatever model is tested; the
  question (and the system message) come on top. Depth 100 puts the needles at the very end.
- ``prompts: [uniah-rag]`` and ``chunking: uniah`` (rag probe): U-NIAH's RAG prompt, one user
  message, around the retrieved chunks joined as its ``prepare_context`` joins them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from needlescope.fitting import tokens
from needlescope.haystack import Filler
from needlescope.providers.base import Message

DEFAULT_BUFFER = 200  # final_context_length_buffer, in cl100k tokens

SYSTEM = (
    "You are a helpful AI bot that answers questions for a user. Keep your response short and "
    "direct"
)
QUESTION = "{question} Don't give information outside the document or repeat your findings"

# U-NIAH's RAG prompt, byte for byte: a Python triple-quoted string indented in its source, so
# every line after the first starts with four spaces ("Question: " keeps its trailing space).
RAG_PROMPT = (
    "Use the following pieces of context to answer the question at the end.\n"
    "    Keep the answer as concise as possible.\n"
    "    Don't give information outside the document or repeat your findings\n"
    "    Context:\n"
    "    {context}\n"
    "\n"
    "    Question: \n"
    "    {question}\n"
    "\n"
    "    Answer:"
)


def messages(context: str, question: str) -> tuple[Message, ...]:
    """The three messages U-NIAH sends for a context and a question."""
    return (
        Message("system", SYSTEM),
        Message("user", context),
        Message("user", QUESTION.format(question=question)),
    )


def rag_prompt(context: str, question: str) -> str:
    # str.replace, not format: a haystack may hold braces.
    return RAG_PROMPT.replace("{context}", context, 1).replace("{question}", question, 1)


# --- length_budget: seed ----------------------------------------------------------------------


def haystack_tokens(length: int, buffer: int, needles: Sequence[str]) -> int:
    """The haystack's share of ``length``: the rest goes to the buffer and the needles, each
    needle counted on its own as U-NIAH counts them. Never below zero (needles alone)."""
    return max(0, length - buffer - sum(tokens.count(n) for n in needles))


def seed_filler_chars(filler: Filler, n_tokens: int) -> int:
    """The filler characters its first ``n_tokens`` cl100k tokens cover (U-NIAH cuts the
    encoded haystack at a token count)."""
    if n_tokens <= 0:
        return 0
    size = n_tokens * 6 + 64  # a generous first guess: English runs ~4 characters a token
    while True:
        text = filler.text(size)
        if tokens.count(text) > n_tokens:
            return tokens.prefix_chars(text, n_tokens)
        size *= 2


# --- RAG context (U-NIAH's prepare_context) ---------------------------------------------------

Mode = Literal["topk", "half", "full"]


@dataclass(frozen=True)
class Picked:
    """A chunk in the context: its rank (0 = most similar) and the text used; ``cut``: the
    tokens kept of it, when it was cut to the tokens left."""

    rank: int
    text: str
    cut: int | None = None


def pick_chunks(ranked: Sequence[str], mode: Mode, *, top_k: int, available: int) -> list[Picked]:
    """The chunks of a context, most similar first. ``topk``: the ``top_k`` best whatever their
    length. ``full`` / ``half``: the best chunks while their cl100k tokens fit ``available``
    (halved for ``half``); the first one that does not fit is cut to the tokens left, and
    nothing follows it."""
    if mode == "topk":
        return [Picked(rank, text) for rank, text in enumerate(ranked[:top_k])]
    budget = available // 2 if mode == "half" else available
    picked: list[Picked] = []
    used = 0
    for rank, text in enumerate(ranked):
        encoded = tokens.encode(text)
        if used + len(encoded) <= budget:
            picked.append(Picked(rank, text))
            used += len(encoded)
            continue
        if budget - used > 0:
            left = budget - used
            picked.append(Picked(rank, tokens.decode(encoded[:left]), cut=left))
        break
    return picked


def join_context(picked: Sequence[Picked], mode: Mode, reverse: bool) -> str:
    """U-NIAH's joining: a blank line between chunks, the most similar first (``reverse``:
    last); ``full`` and ``half`` strip the whitespace around the whole, ``topk`` does not."""
    texts = [p.text for p in picked]
    if reverse:
        texts.reverse()
    if mode == "topk":
        return "\n\n".join(texts)
    return "".join(t + "\n\n" for t in texts).strip()


def template_tokens(question: str) -> int:
    """What U-NIAH takes off the length before filling it: its RAG prompt with an empty
    context, in cl100k tokens."""
    return tokens.count(rag_prompt("", question))
