"""Building a sweep's contexts: fillers, measures and token counts, each cell's prompt fitted
and measured. Used by the build-prompts task (prepare.py); rag's embedders are in embedders.py."""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from needlescope.config import BUILTIN_FILLERS, ProbeConfig, SweepConfig
from needlescope.errors import ConfigError, LengthError, ProviderError
from needlescope.fitting import (
    CONTEXT_MARGIN,
    ProvenFit,
    RememberedFit,
    Starts,
    context_window,
    measure_text,
)
from needlescope.grid import Cell
from needlescope.haystack import Filler, PatternFiller, WholeFileFiller, filler_from_spec
from needlescope.probes.base import BuildTools, Context, Embed, Rendered, prompt_sha256
from needlescope.probes.rag.entry import RagProbe
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.providers.base import Message, Provider
from needlescope.tasks.embedders import Embedders
from needlescope.tasks.piece_fit import FitLength, PieceFitter
from needlescope.tasks.whole_fit import Render, WholeFitter
from needlescope.warehouse.store import rows

CHARS_PER_TOKEN = 4  # a token-length estimate for providers with no tokenizer
COUNTS_KEPT = 4096  # token counts remembered (a batch's fitting asks a few per cell)

_NO_FILLER = PatternFiller(" ")
_WORD_START = re.compile(r"(?:(?<=\s)|^)\S")


@dataclass(frozen=True)
class Measured:
    """A built cell's lengths as the cells table stores them (counted while it was built)."""

    haystack_length: int | None
    planned_tokens: int | None
    length: int


@dataclass
class Built:
    contexts: list[Context] = field(default_factory=list)
    # Cells whose target length cannot hold even their instructions: dropped with a note.
    unbuildable: list[tuple[Cell, str]] = field(default_factory=list)
    # Cells whose prompt could not be built, e.g. a token-counting call failed: failed cells.
    failed: list[tuple[Cell, ProviderError]] = field(default_factory=list)
    measured: dict[str, Measured] = field(default_factory=dict)  # by cell id


@dataclass
class ContextBuilder:
    """Builds a sweep's contexts: fillers, measures and token counts (remembered, so a retried
    build asks again only what failed), each cell's prompt fitted and measured."""

    config: SweepConfig
    providers: dict[str, Provider] = field(default_factory=dict)
    probe_of: dict[str, ProbeConfig] = field(default_factory=dict)  # cell id -> its probe config
    estimated: set[str] = field(default_factory=set)  # models whose token lengths are estimates
    embedders: Embedders | None = None  # rag's embedding servers, started on first use
    _fillers: dict[str, Filler] = field(default_factory=dict)
    _planned: dict[tuple[str, str], int | None] = field(default_factory=dict)
    _built: dict[tuple[str, str], tuple[Context, Measured]] = field(default_factory=dict)
    _counts: OrderedDict[tuple[str, str, str], int | None] = field(default_factory=OrderedDict)
    pieces: PieceFitter = field(default_factory=PieceFitter)  # token counts by pieces
    # Each cell's fit as the warehouse's latest cells row has it (by cell id): checked with one
    # count before any search (flows/sweep.py reads them, one query per run).
    remembered: dict[str, RememberedFit] = field(default_factory=dict)
    # Fits this run's build check counted (flows/build_check.py): taken without a count.
    proven: dict[str, ProvenFit] = field(default_factory=dict)
    recalled: set[str] = field(default_factory=set)  # cells whose remembered fit held
    refitted: set[str] = field(default_factory=set)  # cells whose remembered fit did not
    whole: WholeFitter = field(init=False)  # fits by whole-prompt counts

    def __post_init__(self) -> None:
        self.whole = WholeFitter(lambda: expand_grid(self.config), self.render_of, self.starts_of)

    def render_of(self, cell: Cell) -> Render:
        """``cell``'s prompt at a filler size, as its probe renders it."""
        filler, kind = self.filler_for(cell)
        render = probe_module(cell.probe).render
        return lambda n: render(cell, filler, kind, n)

    def starts_of(self, cell: Cell) -> Starts:
        """Where the words of ``cell``'s filler begin: the sizes whose next character may add a
        token (guesses for whole-count fits; ``needlescope.fitting._whole``)."""
        filler, _ = self.filler_for(cell)

        def starts(lo: int, hi: int) -> list[int]:
            lo = max(0, lo)
            if hi <= lo:
                return []
            try:
                text = filler.text(hi)
            except ValueError:  # a corpus shorter than that: no guesses
                return []
            # (the look-behind sees the character before ``lo``; ``^`` is the text's start only)
            return [m.start() for m in _WORD_START.finditer(text, lo, hi)]

        return starts

    def filler(self, name: str) -> tuple[Filler, str]:
        if name not in self.config.fillers and name not in BUILTIN_FILLERS:
            return _NO_FILLER, "none"  # probes that bring their own text (goto's lines)
        spec = self.config.filler_spec(name)
        if name not in self._fillers:
            self._fillers[name] = filler_from_spec(spec)
        return self._fillers[name], spec.kind

    def filler_for(self, cell: Cell) -> tuple[Filler, str]:
        """The cell's filler; for a corpus used as it is, the one file the cell names."""
        if not cell.as_is:
            return self.filler(cell.filler)
        spec = self.config.filler_spec(cell.filler)
        assert spec.path is not None  # validated: a corpus
        path = spec.path if spec.path.is_file() else spec.path / str(cell.params()["file"])
        key = f"{cell.filler}/{path.name}"
        if key not in self._fillers:
            self._fillers[key] = WholeFileFiller(path)
        return self._fillers[key], spec.kind

    def measure(
        self, model: str, unit: str, *, whole_prompt: bool = True
    ) -> Callable[[str], Awaitable[int]]:
        """Lengths in ``unit``: for tokens, of the prompt as sent (chat template included), or
        of the text alone (``whole_prompt=False``: a haystack's own length)."""
        if unit in ("chars", "bytes"):

            async def by_text(text: str) -> int:
                return measure_text(text, unit)  # type: ignore[arg-type]

            return by_text
        provider = self.providers[model]

        async def by_tokens(text: str) -> int:
            if whole_prompt:
                count = await self.count_prompt(model, (Message("user", text),))
            else:
                count = await self._counted(model, "text", text, provider.count_tokens(text))
            if count is None:
                # No tokenizer behind this provider: estimate, and say so in cells.length_basis.
                self.estimated.add(model)
                return math.ceil(len(text) / CHARS_PER_TOKEN)
            return count

        return by_tokens

    def measure_messages(
        self, model: str, unit: str
    ) -> Callable[[tuple[Message, ...]], Awaitable[int]]:
        """A prompt of several messages measured as sent: its tokens with the chat template,
        or the characters / bytes of its contents."""
        if unit in ("chars", "bytes"):

            async def by_text(messages: tuple[Message, ...]) -> int:
                return sum(measure_text(m.content, unit) for m in messages)  # type: ignore[arg-type,misc]

            return by_text

        async def by_tokens(messages: tuple[Message, ...]) -> int:
            count = await self.count_prompt(model, messages)
            if count is None:
                self.estimated.add(model)
                return math.ceil(sum(len(m.content) for m in messages) / CHARS_PER_TOKEN)
            return count

        return by_tokens

    async def count_prompt(self, model: str, messages: tuple[Message, ...]) -> int | None:
        key = "\x00".join(f"{m.role}\x01{m.content}" for m in messages)
        call = self.providers[model].count_prompt_tokens(messages)
        return await self._counted(model, "prompt", key, call)

    async def _counted(
        self, model: str, kind: str, text: str, call: Coroutine[Any, Any, int | None]
    ) -> int | None:
        """A token count, remembered: a build retried after a failed count asks again only for
        the counts that failed (the same texts come up, the fitting being deterministic)."""
        key = (model, kind, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
        if key in self._counts:
            call.close()
            self._counts.move_to_end(key)
            return self._counts[key]
        count = await call
        self._counts[key] = count
        if len(self._counts) > COUNTS_KEPT:
            self._counts.popitem(last=False)
        return count

    def length_basis(self, model: str, context: Context) -> str:
        """How the cell's length was measured, as the cells table states it."""
        unit = context.cell.length_unit
        if context.cell.params().get("length_budget") == "seed":
            return "cl100k_base"  # U-NIAH's unit, whatever the model's tokenizer
        if unit in ("chars", "bytes"):
            return unit
        if model in self.estimated:
            return f"estimated: {CHARS_PER_TOKEN} characters a token (no tokenizer)"
        return "tokenizer"

    def cell_row(
        self, model: str, context: Context, built: Built, run_id: str, *, keep_prompt: bool = False
    ) -> dict[str, Any]:
        """The cells table's row of a cell ``built`` holds, with the lengths measured."""
        measured = built.measured[context.cell.cell_id]
        return rows.cell_row(
            context,
            run_id,
            haystack_length=measured.haystack_length,
            planned_tokens=measured.planned_tokens,
            keep_prompt=keep_prompt,
            length_basis=self.length_basis(model, context),
            length=measured.length,
        )

    async def build_contexts(self, model: str, cells: list[Cell]) -> Built:
        """Every token count a cell needs (fitting, overflow, the cells row) is made here, so a
        count that fails fails that cell alone. A retried build reuses the cells an earlier
        attempt built (``forget`` drops them once the batch is done)."""
        built = Built()
        for cell in cells:
            key = (model, cell.cell_id)
            if key not in self._built:
                try:
                    self._built[key] = await self._build_one(model, cell)
                except LengthError as exc:
                    built.unbuildable.append((cell, str(exc)))
                    continue
                except ProviderError as exc:  # e.g. the tokenizer endpoint failed
                    built.failed.append((cell, exc))
                    continue
            context, measured = self._built[key]
            built.contexts.append(context)
            built.measured[cell.cell_id] = measured
        return built

    def forget(self, model: str, cells: list[Cell]) -> None:
        for cell in cells:
            self._built.pop((model, cell.cell_id), None)
            self._planned.pop((model, cell.cell_id), None)
            self.recalled.discard(cell.cell_id)

    async def fitted(self, model: str, cell: Cell, *, checking: bool = False) -> Context:
        """The cell's prompt fitted to its length (LengthError: it cannot be built)."""
        max_tokens = self.config.model(model).generation.answer_tokens
        filler, kind = self.filler_for(cell)
        fit_length = self._fit_length(model, cell) if cell.length_unit == "tokens" else None
        tools = BuildTools(
            measure=self.measure(model, cell.length_unit),
            measure_haystack=self.measure(model, cell.length_unit, whole_prompt=False),
            measure_messages=self.measure_messages(model, cell.length_unit),
            max_tokens=max_tokens,
            embedder=lambda: self._embedder(cell),
            fit_length=fit_length,
            checking=checking,
        )
        return await probe_module(cell.probe).build(cell, filler, kind, tools)

    async def _build_one(self, model: str, cell: Cell) -> tuple[Context, Measured]:
        context = await self.fitted(model, cell)
        too_long = await self.overflow(model, context)
        if too_long:
            raise LengthError(too_long)
        remembered = self.remembered.get(cell.cell_id)
        haystack_length = None
        if cell.cell_id in self.recalled and remembered is not None:
            haystack_length = remembered.haystack_length  # the same text, counted before
        if haystack_length is None:  # (or not counted then: maybe asked for now)
            haystack_length = await self.haystack_length(model, context)
        measured = Measured(
            haystack_length=haystack_length,
            planned_tokens=await self.planned_tokens(model, context),
            length=await self.stored_length(model, context),
        )
        return context, measured

    def _fit_length(self, model: str, cell: Cell) -> FitLength:
        """A token cell's fit: its remembered one if one count shows it still holds, else by
        pieces where the provider counts them, else by whole counts from its reference."""
        provider = self.providers[model]
        whole = partial(self.count_prompt, model)
        pieces = self.pieces.fitter(model, provider, cell.filler, whole)
        self.recalled.discard(cell.cell_id)

        async def measure_at(render: Render, n: int) -> int:
            counted = await self.pieces.measure_at(model, provider, render, n, whole)
            if counted is not None:
                return counted
            return await self.measure_messages(model, "tokens")(_messages(render(n)))

        async def fit(render: Render, target: int) -> tuple[int, int]:
            proven = self.proven.get(cell.cell_id)
            if proven is not None and prompt_sha256(render(proven.fit.filler_chars)) == (
                proven.fit.prompt_sha256
            ):
                (self.recalled if proven.stored else self.refitted).add(cell.cell_id)
                return proven.fit.filler_chars, proven.fit.planned_tokens
            remembered = self.remembered.get(cell.cell_id)
            if remembered is not None:
                n = remembered.filler_chars
                rendered = render(n)
                # The same text under the same tokenizer: the stored proof (one more filler
                # character is over the target) and haystack length hold.
                if (
                    prompt_sha256(rendered) == remembered.prompt_sha256
                    and await measure_at(lambda _: rendered, n) == remembered.planned_tokens
                    and remembered.planned_tokens <= target
                    and model not in self.estimated
                ):
                    self.recalled.add(cell.cell_id)
                    return n, remembered.planned_tokens
                self.refitted.add(cell.cell_id)
            if pieces is not None:
                return await pieces(render, target)
            found = await self.whole.fit(model, cell, render, measure_at)
            return found.n_filler_chars, found.measured

        return fit

    async def _embedder(self, cell: Cell) -> Embed:
        probe = self.probe_of.get(cell.cell_id)
        if self.embedders is None or not isinstance(probe, RagProbe):
            raise ConfigError(f"cell {cell.label} retrieves chunks, and this build has no embedder")
        return await self.embedders.get(probe)

    async def overflow(self, model: str, context: Context) -> str | None:
        """Why a self-sized prompt (goto's n lines, the paper's haystack for a nominal length)
        cannot fit the model's window, if it can't."""
        window = context_window(self.config.model(model))
        cell = context.cell
        if window is None or (cell.length_unit != "lines" and not cell.nominal):
            return None  # token lengths were checked before building (fits_context)
        tokens = await self.planned_tokens(model, context)
        if tokens is None or tokens + context.max_tokens + CONTEXT_MARGIN <= window:
            return None
        return f"its prompt is {tokens} tokens, more than the {window}-token window allows"

    async def haystack_length(self, model: str, context: Context) -> int | None:
        unit = context.cell.length_unit
        if unit not in ("tokens", "chars", "bytes"):
            return None
        if unit in ("chars", "bytes"):
            return measure_text(context.haystack_text, unit)  # type: ignore[arg-type]
        if not self.config.model(model).counts_haystack:
            return None
        text = context.haystack_text
        counted = await self.pieces.count_text(model, self.providers[model], text)
        if counted is not None:
            return counted
        return await self._counted(model, "text", text, self.providers[model].count_tokens(text))

    async def stored_length(self, model: str, context: Context) -> int:
        """The cells table's length: the cell's own, or for a haystack taken as it is, the
        length measured (of the haystack before its needles, or of the whole prompt)."""
        cell = context.cell
        if not cell.as_is:
            return cell.length
        if cell.params().get("length_budget") != "haystack":
            return context.prompt_length
        filler, _ = self.filler_for(cell)
        measure = self.measure(model, cell.length_unit, whole_prompt=False)
        return await measure(filler.text(context.filler_chars))

    async def planned_tokens(self, model: str, context: Context) -> int | None:
        if context.cell.length_unit == "tokens":
            return context.prompt_length
        key = (model, context.cell.cell_id)
        if key not in self._planned:  # asked by the overflow check, then by the cells row
            self._planned[key] = await self.count_prompt(model, context.messages)
        return self._planned[key]


def _messages(rendered: Rendered) -> tuple[Message, ...]:
    return rendered.messages or (Message("user", rendered.prompt_text),)
