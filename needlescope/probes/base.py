"""What every probe provides: grid cells, a prompt for a cell, and a grade for an answer.

A probe is a small module of pure functions. The sweep fits ``render`` to the cell's length
by searching over ``filler_chars`` (unless the probe sizes itself, like goto), sends the
prompt, and stores ``grade``'s result; per-needle results feed the ``needle_outcomes`` table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from needlescope.cells import Cell
from needlescope.fillers import Filler
from needlescope.providers.base import Message


@dataclass(frozen=True)
class Rendered:
    """One cell's prompt around ``filler_chars`` characters of filler."""

    prompt_text: str
    haystack_text: str
    expected: Any  # JSON-able: what the grader needs (recall: the needle values in order)
    fractions: tuple[float, ...] = ()  # where each needle sits, as a fraction of the haystack
    offsets: tuple[int, ...] = ()  # character offset of each needle in the haystack
    facts: Mapping[str, Any] = field(default_factory=dict)  # JSON-able, probe-specific
    # The messages sent, when the prompt is more than one user message (U-NIAH's three);
    # ``prompt_text`` then holds their contents for reading and searching.
    messages: tuple[Message, ...] = ()


def joined(messages: tuple[Message, ...]) -> str:
    """The ``prompt_text`` of a prompt of several messages: their contents, a blank line apart."""
    return "\n\n".join(m.content for m in messages)


def prompt_sha256(rendered: Rendered) -> str:
    """Of the one message's text; of every message, role and content, when there are more."""
    if not rendered.messages:
        return hashlib.sha256(rendered.prompt_text.encode()).hexdigest()
    wire = [{"role": m.role, "content": m.content} for m in rendered.messages]
    return hashlib.sha256(json.dumps(wire, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class Context:
    """A built prompt, with everything needed to grade the answer and to rebuild it exactly."""

    cell: Cell
    rendered: Rendered
    filler_chars: int
    prompt_length: int
    max_tokens: int

    @property
    def prompt_text(self) -> str:
        return self.rendered.prompt_text

    @property
    def haystack_text(self) -> str:
        return self.rendered.haystack_text

    @property
    def expected(self) -> Any:
        return self.rendered.expected

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.rendered.messages or (Message("user", self.prompt_text),)

    @property
    def prompt_bytes(self) -> int:
        """The whole prompt's UTF-8 bytes (what names the recall seed's tables)."""
        return sum(len(m.content.encode()) for m in self.messages)

    @property
    def prompt_sha256(self) -> str:
        return prompt_sha256(self.rendered)


@dataclass(frozen=True)
class NeedleResult:
    """One needle of one answer: found or not, and how (a row of ``needle_outcomes``)."""

    needle_index: int  # 1-based, in context order
    expected: int | None  # the needle's value when it is a number
    in_lcs: bool  # found (recall: matched by the LCS anchors)
    outcome: str  # recall: correct | misorder | missing; others: correct | missing | …


@dataclass(frozen=True)
class Grade:
    parse_ok: bool | None  # None: neither an answer nor a parse failure (recall's empty reply)
    parse_error: str | None
    accuracy: float | None  # 0–100; None when the answer could not be read
    answered: Any = None  # JSON-able: what the answer said, as the grader read it
    figures: Mapping[str, Any] = field(default_factory=dict)  # extra scalar columns (recall)
    detail: Mapping[str, Any] = field(default_factory=dict)  # JSON-able, probe-specific
    needles: tuple[NeedleResult, ...] = ()
    # Rows for probe-specific analysis tables (recall: hallucinations, duplicates), by table.
    tables: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)


class Probe(Protocol):
    """The module-level functions of a probe (see probes/recall.py for the reference one)."""

    NAME: str
    # False when the probe sizes its own context (goto: n lines) instead of fitting filler.
    FITS_FILLER: bool

    def expand(self, config: Any, probe: Any) -> Iterator[Cell]: ...

    def render(
        self, cell: Cell, filler: Filler, filler_kind: str, filler_chars: int
    ) -> Rendered: ...

    def answer_budget(self, cell: Cell, max_tokens: int | None) -> int: ...

    def grade(self, expected: Any, facts: Mapping[str, Any], response: str) -> Grade: ...
