"""What every probe provides (the :class:`Probe` protocol) and the values that flow through it.

The sweep asks a probe for its cells (``expand``), builds each prompt (``build``), sends it and
grades the replies a batch at a time (``grade_batch``); ``rebuild`` remakes a stored prompt.
A probe writes NAME, FITS_FILLER, expand, render, answer_budget and grade; the rest default::

    grade_batch = grade_each(grade)
    build = default_build(render, answer_budget, fits_filler=FITS_FILLER)
    rebuild = render_again(render)

Design: docs/design/probes.md#base
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from needlescope.config import SweepConfig
from needlescope.grid import Cell
from needlescope.haystack import Filler
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


@dataclass(frozen=True)
class GradedReplies:
    """A batch of graded replies: a :class:`Grade` per reply (figures only: its ``needles``
    and ``tables`` may stay empty), and the rows of the per-answer tables (``needle_outcomes``,
    and a probe's own, e.g. recall's ``hallucinations``) as columns, where ``answer`` is the
    reply's position in the batch and the other columns are the table's own."""

    grades: list[Grade]
    tables: dict[str, dict[str, list[Any]]]


Measure = Callable[[str], Awaitable[int]]
MeasureMessages = Callable[[tuple[Message, ...]], Awaitable[int]]
Embed = Callable[[list[str]], Awaitable[list[list[float]]]]


@dataclass(frozen=True)
class BuildTools:
    """What building a cell's context may use besides the cell and its filler: the lengths of
    texts in the cell's unit, the model's answer budget, and (rag) an embedder."""

    measure: Measure  # the whole prompt's length as sent, for a prompt of one user message
    measure_haystack: Measure | None = None  # a text's own length (``length_budget: haystack``)
    measure_messages: MeasureMessages | None = None  # a prompt of several messages, as sent
    max_tokens: int | None = None  # the model's configured answer budget (None: the probe's)
    # Retrieval's embeddings, opened on first use (the sweep starts an embedding server).
    embedder: Callable[[], Awaitable[Embed]] | None = None
    # Fits ``render`` to a length in tokens with few counting requests: (filler chars, tokens).
    fit_length: Callable[[Callable[[int], Rendered], int], Awaitable[tuple[int, int]]] | None = None
    # A build check (flows/build_check.py): the context is only looked at, never sent, so a
    # probe may skip what cannot fail once its length is met (rag: retrieving its chunks).
    checking: bool = False


Grader = Callable[[Any, Mapping[str, Any], str], Grade]
BatchGrader = Callable[[Sequence[Any], Sequence[Mapping[str, Any]], Sequence[str]], GradedReplies]
Renderer = Callable[[Cell, Filler, str, int], Rendered]
Rebuilder = Callable[[Cell, Filler, str, int, Mapping[str, Any]], Rendered]
Budget = Callable[[Cell, int | None], int]


class Probe(Protocol):
    """A probe module: two constants and seven functions (see the module docstring)."""

    NAME: str  # the ``probe:`` of a config entry and of every cell
    # False when ``build`` sizes the context itself (goto's n lines, rag's retrieval) instead
    # of fitting ``render``'s filler to the cell's length.
    FITS_FILLER: bool

    def expand(self, config: SweepConfig, probe: Any) -> Iterator[Cell]:
        """The grid cells of one probe entry of ``config``, in grid order."""
        ...

    def render(self, cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
        """The cell's prompt around ``filler_chars`` characters of filler (deterministic)."""
        ...

    def answer_budget(self, cell: Cell, max_tokens: int | None) -> int:
        """Tokens kept for the answer: ``max_tokens`` when configured, else the probe's own."""
        ...

    def grade(self, expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
        """One reply, with its per-needle results; never raises on any string."""
        ...

    def grade_batch(
        self,
        expected: Sequence[Any],
        facts: Sequence[Mapping[str, Any]],
        responses: Sequence[str],
    ) -> GradedReplies:
        """A batch of replies (the sweep's grade task calls this); default: :func:`grade_each`."""
        ...

    async def build(
        self, cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools
    ) -> Context:
        """The cell's context, measured; default: :func:`default_build`."""
        ...

    def rebuild(
        self,
        cell: Cell,
        filler: Filler,
        filler_kind: str,
        filler_chars: int,
        facts: Mapping[str, Any],
    ) -> Rendered:
        """The exact prompt of a built cell from its stored filler size and ``facts``;
        default: :func:`render_again`."""
        ...


# --- the defaults ---------------------------------------------------------------------------


def grade_each(grade: Grader) -> BatchGrader:
    """``grade_batch`` by grading each reply: its needles and tables become the columns."""

    def grade_batch(
        expected: Sequence[Any], facts: Sequence[Mapping[str, Any]], responses: Sequence[str]
    ) -> GradedReplies:
        grades = [grade(e, f, r) for e, f, r in zip(expected, facts, responses, strict=True)]
        return GradedReplies(grades, answer_tables(grades))

    return grade_batch


def answer_tables(grades: Sequence[Grade]) -> dict[str, dict[str, list[Any]]]:
    """The per-answer tables of graded replies as columns (``GradedReplies.tables``): each
    grade's needles (``needle_outcomes``) and its own tables, ``answer`` its position."""
    rows: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for answer, graded in enumerate(grades):
        found = {"needle_outcomes": [vars(n) for n in graded.needles], **graded.tables}
        for table, table_rows in found.items():
            rows.setdefault(table, []).extend((answer, row) for row in table_rows)
    return {
        table: {
            "answer": [answer for answer, _ in found],
            **{name: [row[name] for _, row in found] for name in found[0][1]},
        }
        for table, found in rows.items()
        if found
    }


def figures_as_detail(graded: Grade) -> Grade:
    """A read answer's figures moved into ``detail``, the answers' per-probe column (for probes
    whose figures have no columns of their own: mrcr, latent_list)."""
    if not graded.parse_ok:
        return graded
    return Grade(
        parse_ok=graded.parse_ok,
        parse_error=graded.parse_error,
        accuracy=graded.accuracy,
        answered=graded.answered,
        detail={**graded.detail, **graded.figures},
    )


def render_again(render: Renderer) -> Rebuilder:
    """``rebuild`` of a probe whose prompt is its ``render`` at the stored filler size."""

    def rebuild(
        cell: Cell,
        filler: Filler,
        filler_kind: str,
        filler_chars: int,
        facts: Mapping[str, Any],
    ) -> Rendered:
        return render(cell, filler, filler_kind, filler_chars)

    return rebuild
