"""The rag probe: a cases haystack chunked, embedded and retrieved into the prompt (U-NIAH's RAG).

``build`` fits the haystack of the cell's cases *twin* (``facts["pair_id"]``), cuts it into
overlapping chunks, ranks them by cosine similarity to the question and puts the chosen ones in
the prompt (``topk``, ``half`` or ``full``; best first, or least relevant first with
``reverse``). Grading is the cases probe's, so LLM and RAG answers compare cell by cell.
``chunking: uniah`` is U-NIAH's RAG instead (haystack/chunking.py, cl100k tokens).

Design: docs/design/probes.md#rag
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from needlescope.config import SweepConfig
from needlescope.errors import ConfigError, LengthError, MissingFacts
from needlescope.fitting import fit_to_length, tokens
from needlescope.grid import Cell, filler_identity, model_fields
from needlescope.haystack import Filler, chunking
from needlescope.probes.base import (
    BuildTools,
    Context,
    Embed,
    Measure,
    MeasureMessages,
    Rendered,
    grade_each,
)
from needlescope.probes.build import measure_rendered
from needlescope.probes.cases import probe as cases
from needlescope.probes.cases import uniah
from needlescope.probes.rag.entry import RagProbe
from needlescope.probes.rag.retrieval import (
    Chunk,
    Mode,
    arrange,
    chunk_text,
    passage,
    passages_text,
    rank,
    retrieval_record,
    select,
)
from needlescope.probes.templates import RAG_TEMPLATES, UNIAH_RAG
from needlescope.provenance import canonical_json

NAME = "rag"
# The sweep cannot fit ``render`` to a length: retrieval needs embeddings, so ``build`` sizes it.
FITS_FILLER = False


# The embedder when the probe names none: the bundled SmolLM2 GGUF, mean-pooled.
DEFAULT_EMBEDDER: dict[str, Any] = {"provider": "local", "model": None, "pooling": "mean"}
_RAG_KEYS = ("mode", "chunk_size", "chunk_overlap", "top_k", "reverse", "embedder", "chunking")


def prompt_version(language: str) -> str:
    return f"rag-{language}-v1"


# --- grid and cells ---------------------------------------------------------------------------


def embedder_identity(config: SweepConfig, probe: RagProbe) -> dict[str, Any]:
    if probe.embedder is None:
        return dict(DEFAULT_EMBEDDER)
    return {"model": config.model(probe.embedder).identity(), "pooling": "mean"}


def expand(config: SweepConfig, probe: RagProbe) -> Iterator[Cell]:
    if probe.chunk_overlap >= probe.chunk_size:
        raise ConfigError(
            f"probe rag: chunk_overlap ({probe.chunk_overlap}) must be smaller than "
            f"chunk_size ({probe.chunk_size})"
        )
    loaded = cases.load_cases(probe.cases_file, probe.cases)
    embedder = embedder_identity(config, probe)
    axes = itertools.product(
        config.tested_models(),
        loaded.values(),
        probe.lengths,
        cases.probe_depths(probe),
        probe.fillers,
        probe.context_modes,
        range(probe.repeats),
    )
    budget = cases.budget_params(probe)
    # Only settings away from their defaults join the id: older cells keep theirs.
    split = {"chunking": probe.chunking} if probe.chunking != "windows" else {}
    for model, case, length, depth, filler, mode, repeat in axes:
        params = {
            **case.params(probe.answer_buffer),
            **budget,
            "mode": mode,
            "chunk_size": probe.chunk_size,
            "chunk_overlap": probe.chunk_overlap,
            "top_k": probe.top_k if mode == "topk" else None,
            "reverse": probe.reverse,
            "embedder": embedder,
            **split,
        }
        for prompt in probe.prompts or [prompt_version(case.language)]:
            yield Cell(
                **model_fields(model),
                probe=NAME,
                probe_params=canonical_json(params),
                filler=filler,
                filler_spec=filler_identity(config.filler_spec(filler)),
                placement=cases.PLACEMENT,
                region=cases.REGION,
                prompt_version=prompt,
                length=length,
                length_unit=probe.length_unit,
                needle_count=len(case.needles),
                repeat=repeat,
                seed=config.seed,
                depth=depth,
            )


def cases_twin(cell: Cell) -> Cell:
    """The cases cell with this cell's case, length, depth, filler and repeat: same haystack."""
    params = {k: v for k, v in cell.params().items() if k not in _RAG_KEYS}
    return replace(
        cell,
        probe=cases.NAME,
        probe_params=canonical_json(params),
        prompt_version=cases.prompt_version(str(params["language"])),
    )


def _prompt(cell: Cell, case: cases.Case, shown: Sequence[Chunk]) -> str:
    if cell.prompt_version == UNIAH_RAG:
        picked = [uniah.Picked(i, c.text) for i, c in enumerate(shown)]
        mode: Mode = cell.params()["mode"] if cell.params().get("chunking") == "uniah" else "topk"
        return uniah.rag_prompt(uniah.join_context(picked, mode, False), case.question)
    template = RAG_TEMPLATES[cell.prompt_version]
    return template.render(passages=passages_text(shown), question=case.question)


def chunks_of(cell: Cell, haystack: str) -> list[Chunk]:
    """The haystack's chunks: fixed windows, or U-NIAH's recursive split (``chunking``)."""
    params = cell.params()
    size, overlap = int(params["chunk_size"]), int(params["chunk_overlap"])
    if params.get("chunking") != "uniah":
        return chunk_text(haystack, size, overlap)
    texts = chunking.split_text(haystack, size, overlap)
    starts = chunking.chunk_starts(haystack, texts, overlap)
    return [Chunk(i, s, s + len(t), t) for i, (t, s) in enumerate(zip(texts, starts, strict=True))]


def _cut(chunk: Chunk, n_tokens: int) -> Chunk:
    """The chunk's first ``n_tokens`` cl100k tokens, decoded as U-NIAH decodes them; its end is
    where the characters those tokens cover end."""
    text = tokens.decode(tokens.encode(chunk.text)[:n_tokens])
    end = chunk.start + tokens.prefix_chars(chunk.text, n_tokens)
    return Chunk(chunk.index, chunk.start, end, text)


def _span(offset: int, needle: str) -> tuple[int, int]:
    """Where the needle's words are: the spaces around a needle (U-NIAH's) are not part of it,
    and a chunk, stripped, never holds them."""
    lead = len(needle) - len(needle.lstrip())
    return offset + lead, offset + len(needle.rstrip())


def shown_chunks(
    chunks: Sequence[Chunk], order: Sequence[int], cut: Mapping[str, Any] | None
) -> list[Chunk]:
    """The chunks of the prompt, in order; the one U-NIAH's filling cut (``facts.cut``)."""
    shown = [chunks[i] for i in order]
    if cut:
        shown = [_cut(c, int(cut["tokens"])) if c.index == cut["chunk"] else c for c in shown]
    return shown


def rebuild(
    cell: Cell, filler: Filler, filler_kind: str, filler_chars: int, facts: Mapping[str, Any]
) -> Rendered:
    """The exact prompt of a built cell from its stored filler size and ``facts["order"]``
    (and ``facts["cut"]`` when U-NIAH's filling cut a chunk)."""
    order = facts.get("order")
    if not isinstance(order, list):
        raise MissingFacts("the cell's facts have no retrieval order")
    return _rebuilt(cell, filler, filler_kind, filler_chars, order, facts.get("cut") or None)


def _rebuilt(
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    filler_chars: int,
    order: Sequence[int],
    cut: Mapping[str, Any] | None,
) -> Rendered:
    twin = cases_twin(cell)
    full = cases.render(twin, filler, filler_kind, filler_chars)
    chunks = chunks_of(cell, full.haystack_text)
    return Rendered(
        prompt_text=_prompt(cell, cases.case_of(twin), shown_chunks(chunks, order, cut)),
        haystack_text=full.haystack_text,
        expected=full.expected,
        fractions=full.fractions,
        offsets=full.offsets,
        facts={**full.facts, "order": list(order), **({"cut": dict(cut)} if cut else {})},
    )


def render(cell: Cell, filler: Filler, filler_kind: str, filler_chars: int) -> Rendered:
    raise NotImplementedError(
        "a rag prompt depends on embeddings: build it with rag.build, or rebuild a stored one "
        "with rag.rebuild and its facts"
    )


@dataclass(frozen=True)
class _Selection:
    order: list[int]  # chunk indices in prompt order
    selected: list[int]  # chunk indices in rank order
    cut: dict[str, int] | None = None  # the chunk cut to fit, and the tokens kept of it


async def _windows(
    cell: Cell,
    case: cases.Case,
    chunks: Sequence[Chunk],
    ranking: Sequence[int],
    measure: Measure,
) -> _Selection:
    """needlescope's own filling, measured with the model's tokenizer (or characters)."""
    params = cell.params()
    mode: Mode = params["mode"]
    target, base = await _instructions_fit(cell, case, measure)
    # Each chunk's share of the prompt, measured for as many of the best chunks as can fit.
    blank = await measure("")
    top_k = int(params["top_k"] or len(ranking))
    sizes: dict[int, int] = {}
    used = 0
    for number, index in enumerate(ranking[: top_k if mode == "topk" else None], start=1):
        sizes[index] = max(0, await measure(passage(number, chunks[index]) + "\n\n") - blank)
        used += sizes[index]
        if used > target - base:
            break
    selected = select(ranking, sizes, mode, top_k=top_k, budget=target - base)
    # Token counts do not quite add up: drop the least relevant chunk until the prompt fits.
    while True:
        order = arrange(selected, bool(params["reverse"]))
        length = await measure(_prompt(cell, case, [chunks[i] for i in order]))
        if length <= target or not selected:
            return _Selection(order, selected)
        selected = selected[:-1]


async def _instructions_fit(cell: Cell, case: cases.Case, measure: Measure) -> tuple[int, int]:
    """(the prompt's target, its length with no chunk); LengthError when that is over it."""
    mode: Mode = cell.params()["mode"]
    target = cell.length // 2 if mode == "half" else cell.length
    base = await measure(_prompt(cell, case, []))
    if base > target:
        raise LengthError(
            f"instructions alone are {base} units, more than the {target} the {mode} mode allows"
        )
    return target, base


def _uniah(
    cell: Cell, case: cases.Case, chunks: Sequence[Chunk], ranking: Sequence[int]
) -> _Selection:
    """U-NIAH's filling in cl100k tokens: the length less the prompt's own tokens."""
    params = cell.params()
    mode: Mode = params["mode"]
    available = cell.length - tokens.count(_prompt(cell, case, []))
    top_k = int(params["top_k"] or len(ranking))
    picked = uniah.pick_chunks(
        [chunks[i].text for i in ranking], mode, top_k=top_k, available=available
    )
    selected = [ranking[p.rank] for p in picked]
    cut = next(
        ({"chunk": ranking[p.rank], "tokens": p.cut} for p in picked if p.cut is not None), None
    )
    return _Selection(arrange(selected, bool(params["reverse"])), selected, cut)


async def _haystack(
    cell: Cell, filler: Filler, filler_kind: str, measure: Measure
) -> tuple[cases.Case, Rendered, int]:
    """The cell's case, and its cases twin's prompt fitted to the cell's length."""
    twin = cases_twin(cell)
    if cases.seeded(twin):
        filler_chars = cases.seed_filler_chars(twin, filler)
    else:
        fit = await fit_to_length(
            lambda n: cases.render(twin, filler, filler_kind, n).prompt_text, measure, cell.length
        )
        filler_chars = fit.n_filler_chars
    return cases.case_of(twin), cases.render(twin, filler, filler_kind, filler_chars), filler_chars


async def check(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    """What can fail of a build, without retrieving: the haystack fitted, the instructions
    measured (a build check's; the context holds no chunk and is never sent)."""
    case, full, filler_chars = await _haystack(cell, filler, filler_kind, tools.measure)
    if cell.params().get("chunking") != "uniah":
        await _instructions_fit(cell, case, tools.measure)
    unranked = Rendered(_prompt(cell, case, []), full.haystack_text, full.expected)
    return Context(cell, unranked, filler_chars, 0, answer_budget(cell, tools.max_tokens))


async def retrieve(
    cell: Cell,
    filler: Filler,
    filler_kind: str,
    embed: Embed,
    measure: Measure,
    max_tokens: int | None = None,
    measure_messages: MeasureMessages | None = None,
) -> Context:
    """Fit the cases haystack to the cell's length, retrieve chunks into a prompt of at most
    ``cell.length`` units (``measure``), and record where each needle went (``facts``)."""
    params = cell.params()
    case, full, filler_chars = await _haystack(cell, filler, filler_kind, measure)
    chunks = chunks_of(cell, full.haystack_text)
    vectors = await embed([case.question, *(c.text for c in chunks)])
    if len(vectors) != len(chunks) + 1:
        raise ValueError(f"embedder returned {len(vectors)} vectors for {len(chunks) + 1} texts")
    ranking = rank(vectors[0], vectors[1:])
    if params.get("chunking") == "uniah":
        chosen = _uniah(cell, case, chunks, ranking)
    else:
        chosen = await _windows(cell, case, chunks, ranking, measure)
    shown = shown_chunks(chunks, chosen.order, chosen.cut)
    in_prompt = {c.index: c for c in shown}
    kept = [in_prompt.get(c.index, c) for c in chunks]
    spans = [_span(o, n.text) for o, n in zip(full.offsets, case.needles, strict=True)]
    facts = {
        **full.facts,
        "mode": params["mode"],
        "reverse": bool(params["reverse"]),
        "chunks": len(chunks),
        "order": chosen.order,
        **({"cut": chosen.cut} if chosen.cut else {}),
        "selected_chars": sum(c.end - c.start for c in shown),
        "retrieval": retrieval_record(spans, kept, ranking, chosen.selected),
    }
    rendered = Rendered(
        prompt_text=_prompt(cell, case, shown),
        haystack_text=full.haystack_text,
        expected=full.expected,
        fractions=full.fractions,
        offsets=full.offsets,
        facts=facts,
    )
    length = await measure_rendered(rendered, measure, measure_messages)
    return Context(cell, rendered, filler_chars, length, answer_budget(cell, max_tokens))


async def build(cell: Cell, filler: Filler, filler_kind: str, tools: BuildTools) -> Context:
    """:func:`retrieve` with the sweep's embedder (started on first use); a check
    (``tools.checking``) embeds nothing."""
    if tools.checking:
        return await check(cell, filler, filler_kind, tools)
    if tools.embedder is None:
        raise ConfigError("a rag cell needs an embedder to retrieve its chunks")
    embed = await tools.embedder()
    return await retrieve(
        cell, filler, filler_kind, embed, tools.measure, tools.max_tokens, tools.measure_messages
    )


def answer_budget(cell: Cell, max_tokens: int | None) -> int:
    return cases.answer_budget(cell, max_tokens)


grade = cases.grade
grade_batch = grade_each(grade)
