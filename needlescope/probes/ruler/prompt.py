"""A built RULER prompt, and the messages that carry it with its answer prefix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from needlescope.providers.base import Message

AnswerPrefixMode = Literal["prefill", "append"]
ANSWER_PREFIX_MODES: tuple[AnswerPrefixMode, ...] = ("prefill", "append")


@dataclass(frozen=True)
class RulerPrompt:
    """One cell's prompt around ``units`` haystack units (sentences, words or list entries).

    ``body`` is the user's text up to the question; ``body + answer_prefix`` is RULER's input,
    the text its length is measured on. ``expected`` are the strings the answer must contain,
    ``distractors`` the planted strings it should not (other keys' values, other chains' names).
    """

    body: str
    answer_prefix: str
    context: str
    expected: tuple[str, ...]
    units: int
    distractors: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)  # JSON-able, family-specific

    @property
    def text(self) -> str:
        return self.body + self.answer_prefix


def prompt_messages(prompt: RulerPrompt, mode: AnswerPrefixMode) -> tuple[Message, ...]:
    """``prefill``: the answer prefix opens the assistant's turn, for the model to continue;
    ``append``: it ends the user's message, for APIs that cannot continue a turn.

    A prefill is stripped: RULER's prefixes begin with the space that joins them to the
    question, and Anthropic rejects an assistant turn that ends in whitespace (vt's does).
    """
    if mode == "prefill":
        return (Message("user", prompt.body), Message("assistant", prompt.answer_prefix.strip()))
    if mode == "append":
        return (Message("user", prompt.text),)
    raise ValueError(f"answer_prefix_mode must be prefill or append, not {mode!r}")
