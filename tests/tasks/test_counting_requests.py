"""Counting requests of the sweep's ContextBuilder on the Anthropic and Gemini fakes (whole
counts only): a first build starts each cell from a reference fixed by the grid, a second
build over a warehouse checks each stored fit with one count, and a changed tokenizer falls
back to a fresh fit. Every fit is checked exact with whole counts (not logged as requests)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.providers.base import Message, Provider
from needlescope.providers.registry import create_provider
from needlescope.tasks.contexts import Built, ContextBuilder
from needlescope.warehouse.store import Warehouse
from tests.fitting.test_piece_count import Counter
from tests.fitting.test_piece_count import tokens as piece_tokens
from tests.support.anthropic_server import FakeAnthropicServer
from tests.support.gemini_server import FakeGeminiServer

KINDS = ("anthropic", "gemini")


def config_for(kind: str, base_url: str, count_haystack: bool | None = None) -> SweepConfig:
    haystack = "" if count_haystack is None else f"\n    count_haystack: {count_haystack}"
    return parse_config(
        yaml.safe_load(
            f"""
name: counting
seed: 4
models:
  - name: m
    provider: {kind}
    base_url: {base_url}
    model: fake-model
    api_key_env: NS_TEST_COUNT_KEY{haystack}
probes:
  - probe: recall
    lengths: [1500]
    length_unit: tokens
    needle_counts: [1, 4]
    fillers: [prose-en]
    repeats: 3
"""
        )
    )


@contextlib.asynccontextmanager
async def fake(
    kind: str, count_haystack: bool | None = None
) -> AsyncIterator[tuple[Any, Provider, SweepConfig]]:
    server: Any = FakeAnthropicServer() if kind == "anthropic" else FakeGeminiServer()
    async with server as srv:
        config = config_for(kind, srv.base_url, count_haystack)
        provider = create_provider(
            kind, name="m", base_url=srv.base_url, model="fake-model", api_key="k"
        )
        try:
            yield srv, provider, config
        finally:
            await provider.aclose()


async def build(
    config: SweepConfig, provider: Provider, cells: list[Any], store: Warehouse | None = None
) -> tuple[ContextBuilder, Built]:
    """A build as the sweep makes it: fits remembered from ``store``'s cells rows, and the
    built cells stored there as the sweep stores them."""
    remembered = store.remembered_fits([c.cell_id for c in cells]) if store else {}
    builder = ContextBuilder(config, {"m": provider}, remembered=remembered)
    built = await builder.build_contexts("m", cells)
    assert not built.failed and not built.unbuildable
    if store is not None:
        store.append("cells", [builder.cell_row("m", c, built, "run") for c in built.contexts])
    return builder, built


async def assert_exact(srv: Any, provider: Provider, builder: ContextBuilder, built: Built) -> None:
    """Each prompt counts exactly its length, or under it with one more filler character over
    (by whole counts); the haystack's stored length is a whole count of it where the model
    counts haystacks, else None (the fake's logs are put back as they were: the checks are
    not the build's requests)."""
    logged = (srv.count_requests, list(srv.counted))
    counts_haystack = builder.config.model("m").counts_haystack
    for context in built.contexts:
        cell = context.cell
        prompt = await provider.count_prompt_tokens((Message("user", context.prompt_text),))
        assert prompt == context.prompt_length <= cell.length
        if prompt < cell.length:
            filler, kind = builder.filler_for(cell)
            longer = probe_module(cell.probe).render(cell, filler, kind, context.filler_chars + 1)
            over = await provider.count_prompt_tokens((Message("user", longer.prompt_text),))
            assert over is not None and over > cell.length
        stored = built.measured[cell.cell_id].haystack_length
        if counts_haystack:
            assert stored == await provider.count_tokens(context.haystack_text)
        else:
            assert stored is None
    srv.count_requests, srv.counted = logged


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NS_TEST_COUNT_KEY", "k")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_first_build_starts_cells_from_their_references(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake(kind) as (srv, provider, config):
        cells = expand_grid(config)
        builder, built = await build(config, provider, cells)
        assert len(srv.counted) == srv.count_requests == len(set(srv.counted))
        assert builder.whole.fits == len(cells)
        await assert_exact(srv, provider, builder, built)
        new = srv.count_requests
        # The build before: every cell searched alone, its candidates counted whole.
        monkeypatch.setattr(ContextBuilder, "_fit_length", lambda self, model, cell: None)
        srv.reset_counts()
        _, before = await build(config, provider, cells)
        assert [c.prompt_length for c in before.contexts] == [
            c.prompt_length for c in built.contexts
        ]
        # 6 cells, 2 groups of repeats: the first fitted alone, the others from it, the 4
        # repeats with the one count that shows their prompt is exactly the length; no
        # haystack counted (a hosted counter's, not asked for)
        assert new <= 2 * len(cells) and 3 * new <= srv.count_requests


@pytest.mark.parametrize("kind", KINDS)
async def test_a_model_that_asks_for_haystack_lengths_pays_one_count_a_cell(kind: str) -> None:
    requests = {}
    for count_haystack in (None, False, True):
        async with fake(kind, count_haystack) as (srv, provider, config):
            cells = expand_grid(config)
            builder, built = await build(config, provider, cells)
            requests[count_haystack] = srv.count_requests
            await assert_exact(srv, provider, builder, built)  # haystack lengths: whole counts
            stored = [built.measured[c.cell_id].haystack_length for c in cells]
            assert all(n is not None for n in stored) == bool(count_haystack)
    assert requests[None] == requests[False] == requests[True] - len(cells)


@pytest.mark.parametrize("kind", KINDS)
async def test_fits_do_not_depend_on_the_order_cells_are_built_in(kind: str) -> None:
    async with fake(kind) as (_srv, provider, config):
        cells = expand_grid(config)
        _, in_order = await build(config, provider, cells)
        _, backwards = await build(config, provider, cells[::-1])
        _, last_alone = await build(config, provider, cells[-1:])  # e.g. a rerun of one cell
        fitted = {c.cell.cell_id: c.filler_chars for c in in_order.contexts}
        assert fitted == {c.cell.cell_id: c.filler_chars for c in backwards.contexts}
        assert last_alone.contexts[0].filler_chars == fitted[cells[-1].cell_id]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_second_build_over_the_warehouse_costs_one_count_a_cell(
    kind: str, tmp_path: Path
) -> None:
    store = Warehouse(tmp_path / "wh").ensure()
    async with fake(kind) as (srv, provider, config):
        cells = expand_grid(config)
        _, first = await build(config, provider, cells, store)
        srv.reset_counts()
        builder, again = await build(config, provider, cells, store)
        assert srv.count_requests == len(cells)  # one count each, no haystack count
        prompts = [c.prompt_sha256 for c in first.contexts]
        assert [c.prompt_sha256 for c in again.contexts] == prompts
        # what it counted is the prompt it sends
        assert srv.counted == [logged_sha(c) for c in again.contexts]
        assert builder.recalled == {c.cell_id for c in cells} and not builder.refitted
        assert again.measured == first.measured
        await assert_exact(srv, provider, builder, again)


def logged_sha(context: Any) -> str:
    """The fakes' log entry for a context's prompt (one user message, no system)."""
    return hashlib.sha256(("\x00" + context.prompt_text).encode()).hexdigest()


@pytest.mark.parametrize("kind", KINDS)
async def test_a_changed_tokenizer_falls_back_to_a_fresh_exact_fit(
    kind: str, tmp_path: Path
) -> None:
    store = Warehouse(tmp_path / "wh").ensure()
    async with fake(kind) as (srv, provider, config):
        cells = expand_grid(config)
        _, first = await build(config, provider, cells, store)
        # The new tokenizer: a comma is a token of its own.
        srv.words = lambda text: len(text.split()) + text.count(",") if text else 0
        srv.reset_counts()
        builder, again = await build(config, provider, cells, store)
        assert builder.refitted == {c.cell_id for c in cells} and not builder.recalled
        assert srv.count_requests > len(cells)
        await assert_exact(srv, provider, builder, again)
        shorter = [
            a.filler_chars < f.filler_chars
            for f, a in zip(first.contexts, again.contexts, strict=True)
        ]
        assert all(shorter)
        # The new fits are stored: the build after that is back to one count a cell.
        srv.reset_counts()
        builder, third = await build(config, provider, cells, store)
        assert srv.count_requests == len(cells) and not builder.refitted
        assert [c.prompt_sha256 for c in third.contexts] == [
            c.prompt_sha256 for c in again.contexts
        ]


@pytest.mark.parametrize("kind", KINDS)
async def test_tokens_that_are_not_words_still_get_exact_fits(kind: str) -> None:
    """The guesses follow the filler's word starts; a tokenizer that cuts elsewhere (here:
    every 3 characters, and a token less where a word ends in "e") misleads them, never the
    proof."""
    async with fake(kind) as (srv, provider, config):
        srv.words = lambda text: (len(text) + 2) // 3 - text.count("e ") if text else 0
        cells = expand_grid(config)
        builder, built = await build(config, provider, cells)
        await assert_exact(srv, provider, builder, built)
        assert srv.count_requests <= 8 * len(cells)


class PieceProvider:
    """A provider that counts pieces as llama.cpp does (a GPT-2-style pre-tokenizer, one token
    per pre-token, tests/fitting/test_piece_count.py), and whole prompts too."""

    def __init__(self) -> None:
        self.counter = Counter()
        self.whole = 0

    def piece_counter(self) -> PieceProvider:
        return self

    async def count_separated(self, texts: Any) -> list[int]:
        return await self.counter.count_separated(texts)

    def framable(self, content: str) -> bool:
        return bool(content) and not content[0].isspace()

    async def frame_tokens(self, roles: tuple[str, ...]) -> int:
        return 3 * len(roles)

    async def count_tokens(self, text: str) -> int:
        self.whole += 1
        return piece_tokens(text)

    async def count_prompt_tokens(self, messages: tuple[Message, ...]) -> int:
        self.whole += 1
        return sum(3 + piece_tokens(m.content) for m in messages)


async def test_a_provider_that_counts_pieces_checks_a_remembered_fit_in_one_request(
    tmp_path: Path,
) -> None:
    store = Warehouse(tmp_path / "wh").ensure()
    provider: Any = PieceProvider()
    config = config_for("anthropic", "http://127.0.0.1:9")  # the provider is ours, not its
    cells = expand_grid(config)
    _, first = await build(config, provider, cells, store)
    assert provider.counter.requests > 0
    provider.counter.requests = provider.whole = 0
    builder, again = await build(config, provider, cells, store)
    # one request a cell: the prompt's pieces (none counted yet by this builder); no haystack
    assert (provider.counter.requests, provider.whole) == (len(cells), 0)
    assert builder.recalled == {c.cell_id for c in cells}
    assert [c.prompt_sha256 for c in again.contexts] == [c.prompt_sha256 for c in first.contexts]
    assert again.measured == first.measured
    for context in again.contexts:
        assert context.prompt_length == await provider.count_prompt_tokens(context.messages)
