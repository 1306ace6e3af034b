"""The live resources of one sweep: provider clients, local model servers, fillers, measures."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine
from dataclasses import dataclass, field
from typing import Any

from needlescope.cells import Cell
from needlescope.config import BUILTIN_FILLERS, ModelConfig, SweepConfig
from needlescope.errors import LengthError, ProviderError
from needlescope.fillers import Filler, PatternFiller, WholeFileFiller, filler_from_spec
from needlescope.haystack import measure_text
from needlescope.probes.base import BuildTools, Context
from needlescope.probes.build import budget_overhead
from needlescope.probes.registry import probe_module
from needlescope.providers.base import Message, Provider
from needlescope.providers.open import open_provider
from needlescope.tasks.query import ACTIVE_PROVIDERS

CHARS_PER_TOKEN = 4  # a token-length estimate for providers with no tokenizer
COUNTS_KEPT = 4096  # token counts remembered (a batch's fitting asks a few per cell)
DEFAULT_LOCAL_CONTEXT = 8192  # SmolLM2 was trained to 8192 tokens
CONTEXT_MARGIN = 16

# The runtime of the sweep running in this process; tasks reach the live clients through it.
_CURRENT: list[SweepRuntime] = []


def current_runtime() -> SweepRuntime:
    if not _CURRENT:
        raise RuntimeError("no sweep is running in this process")
    return _CURRENT[-1]


_NO_FILLER = PatternFiller(" ")


def context_window(model: ModelConfig) -> int | None:
    if model.context_window is not None:
        return model.context_window
    return DEFAULT_LOCAL_CONTEXT if model.provider == "local" else None


def fits_context(cell: Cell, model: ModelConfig) -> bool:
    """Token-sized cells longer than the model's window (with room for the answer) are dropped.
    A cell taken as it is, or with a nominal length (the paper's haystack), cannot be told
    before it is built: its built prompt is checked then (``SweepRuntime._overflow``)."""
    window = context_window(model)
    if window is None or cell.length_unit != "tokens" or cell.as_is or cell.nominal:
        return True
    budget = probe_module(cell.probe).answer_budget(cell, model.generation.answer_tokens)
    return cell.length + budget_overhead(cell) + budget + CONTEXT_MARGIN <= window


def local_slot_size(cells: list[Cell], model: ModelConfig) -> int:
    window = context_window(model) or DEFAULT_LOCAL_CONTEXT
    token_cells = [c for c in cells if c.length_unit == "tokens" and not (c.as_is or c.nominal)]
    if len(token_cells) != len(cells) or not cells:
        return window
    need = max(
        c.length
        + budget_overhead(c)
        + probe_module(c.probe).answer_budget(c, model.generation.answer_tokens)
        for c in cells
    )
    return min(window, -(-(need + CONTEXT_MARGIN) // 256) * 256)


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
class SweepRuntime:
    config: SweepConfig
    providers: dict[str, Provider] = field(default_factory=dict)
    probe_of: dict[str, Any] = field(default_factory=dict)  # cell id -> its probe config
    estimated: set[str] = field(default_factory=set)  # models whose token lengths are estimates
    stack: contextlib.AsyncExitStack | None = None
    _fillers: dict[str, Filler] = field(default_factory=dict)
    _rubrics: dict[str, str] = field(default_factory=dict)
    _planned: dict[tuple[str, str], int | None] = field(default_factory=dict)
    _built: dict[tuple[str, str], tuple[Context, Measured]] = field(default_factory=dict)
    _counts: OrderedDict[tuple[str, str, str], int | None] = field(default_factory=OrderedDict)
    _embedders: dict[str | None, Callable[[list[str]], Awaitable[list[list[float]]]]] = field(
        default_factory=dict
    )
    _embedder_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def embedder(self, probe: Any) -> Callable[[list[str]], Awaitable[list[list[float]]]]:
        """A local llama.cpp embedding server (the probe's embedder GGUF, else SmolLM2), once."""
        name = getattr(probe, "embedder", None)
        async with self._embedder_lock:
            if name not in self._embedders:
                from needlescope.probes.rag import memoize
                from needlescope.providers.local import LocalProvider, LocalServer

                assert self.stack is not None
                path = self.config.model(name).model if name else None
                # A pooled embedding takes its whole input in one batch: room for two chunks.
                slot = max(2048, 2 * int(getattr(probe, "chunk_size", 600)) * 2 + 256)
                server = LocalServer(path, ctx_per_slot=slot, embedding=True)
                await asyncio.to_thread(self.stack.enter_context, server)
                provider = LocalProvider(name=f"embedder-{name or 'default'}", server=server)
                self.stack.push_async_callback(provider.aclose)
                self._embedders[name] = memoize(provider.embed)
        return self._embedders[name]

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

    async def _build_one(self, model: str, cell: Cell) -> tuple[Context, Measured]:
        max_tokens = self.config.model(model).generation.answer_tokens
        filler, kind = self.filler_for(cell)
        tools = BuildTools(
            measure=self.measure(model, cell.length_unit),
            measure_haystack=self.measure(model, cell.length_unit, whole_prompt=False),
            measure_messages=self.measure_messages(model, cell.length_unit),
            max_tokens=max_tokens,
            embedder=lambda: self.embedder(self.probe_of[cell.cell_id]),
        )
        context = await probe_module(cell.probe).build(cell, filler, kind, tools)
        too_long = await self._overflow(model, context)
        if too_long:
            raise LengthError(too_long)
        measured = Measured(
            haystack_length=await self.haystack_length(model, context),
            planned_tokens=await self.planned_tokens(model, context),
            length=await self.stored_length(model, context),
        )
        return context, measured

    async def _overflow(self, model: str, context: Context) -> str | None:
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

    def rubric(self, probe: Any) -> str:
        """The judge's rubric: the probe's rubric_file, else the one needlescope ships."""
        path = getattr(probe, "rubric_file", None)
        key = str(path)
        if key not in self._rubrics:
            from needlescope.judge import load_rubric

            self._rubrics[key] = load_rubric(path)
        return self._rubrics[key]

    async def haystack_length(self, model: str, context: Context) -> int | None:
        unit = context.cell.length_unit
        if unit not in ("tokens", "chars", "bytes"):
            return None
        if unit in ("chars", "bytes"):
            return measure_text(context.haystack_text, unit)  # type: ignore[arg-type]
        text = context.haystack_text
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


@contextlib.asynccontextmanager
async def open_runtime(
    config: SweepConfig,
    cells_by_model: dict[str, list[Cell]],
    helpers: Collection[str] = (),
    probe_of: dict[str, Any] | None = None,
    api_keys: dict[str, str] | None = None,
    offline: bool = False,
) -> AsyncIterator[SweepRuntime]:
    """Provider clients (and local servers) for the models under test and their helpers;
    ``offline``: prompts are only built, nothing is sent (see ``open_provider``)."""
    runtime = SweepRuntime(config, probe_of=dict(probe_of or {}))
    async with contextlib.AsyncExitStack() as stack:
        runtime.stack = stack
        for name, cells in cells_by_model.items():
            model = config.model(name)
            runtime.providers[name] = await open_provider(
                stack,
                model,
                ctx_per_slot=local_slot_size(cells, model),
                api_key=(api_keys or {}).get(name),
                offline=offline,
            )
        for name in sorted(helpers):
            model = config.model(name)
            runtime.providers[name] = await open_provider(
                stack,
                model,
                ctx_per_slot=local_slot_size([], model),
                api_key=(api_keys or {}).get(name),
            )
        ACTIVE_PROVIDERS.update(runtime.providers)
        _CURRENT.append(runtime)
        try:
            yield runtime
        finally:
            _CURRENT.remove(runtime)
            for name in runtime.providers:
                ACTIVE_PROVIDERS.pop(name, None)
