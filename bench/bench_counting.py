"""Counting requests per cell: fitting a grid of cells to exact token lengths through a
provider's own counter (llama.cpp's /tokenize, Anthropic's count_tokens, Gemini's countTokens).

Each run builds a recall grid of sibling cells with the sweep's ContextBuilder and counts the
counting requests its provider sends, against a baseline with piece counting off; every fitted
cell is then checked with whole-prompt counts. Each grid is built twice (a first sweep, then a
re-sweep reading the fits back). llama.cpp is the local SmolLM2 server, Anthropic and Gemini
the fakes from tests/support; ``--lengths 8000,128000`` limits the run, ``--fakes-only`` leaves
the local model out. The method and the figures: bench/README.md.

Design: docs/design/benchmarks.md#bench-counting
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL = 2.0
LENGTHS = (8_000, 128_000, 1_000_000)
NEEDLES = (1, 5, 20, 40)


def config_text(
    provider: str, base_url: str | None, length: int, repeats: int, count_haystack: bool | None
) -> str:
    where = f"\n    base_url: {base_url}\n    model: fake-model" if base_url else ""
    key = "\n    api_key_env: NS_BENCH_KEY" if base_url else ""
    if count_haystack is not None:
        key += f"\n    count_haystack: {str(count_haystack).lower()}"
    return f"""
name: counting
seed: 5
models:
  - name: m
    provider: {provider}{where}{key}
probes:
  - probe: recall
    lengths: [{length}]
    length_unit: tokens
    needle_counts: [{", ".join(map(str, NEEDLES))}]
    fillers: [prose-en]
    repeats: {repeats}
"""


SUBWORD = False  # --subword: the fakes count cl100k_base tokens instead of words


@contextlib.contextmanager
def fake_server(kind: str) -> Iterator[Any]:
    sys.path.insert(0, str(REPO))
    if kind == "anthropic":
        from tests.support.anthropic_server import FakeAnthropicServer

        server: Any = FakeAnthropicServer(context_window=10**8)
    else:
        from tests.support.gemini_server import FakeGeminiServer

        server = FakeGeminiServer()
    with server as srv:
        if SUBWORD:
            from needlescope.fitting import tokens

            srv.words = lambda text: tokens.count(text) if isinstance(text, str) else 0
        yield srv


def counting_requests(kind: str, srv: Any, provider: Any) -> int:
    if kind == "anthropic":
        return int(srv.requests - srv.message_requests)
    if kind == "gemini":
        return int(srv.count_requests)
    return int(provider.bench_counting_requests)


async def run(
    kind: str,
    length: int,
    repeats: int,
    pieces: bool,
    store: Any = None,
    count_haystack: bool | None = None,
) -> dict[str, Any]:
    """One build of the grid; with ``store`` (a Warehouse), the builder remembers the fits its
    cells rows hold, as a sweep's does (flows/sweep.py), and the built cells are stored there."""
    import os

    from needlescope.config._sweep import parse_config
    from needlescope.probes.registry import expand_grid
    from needlescope.providers.base import Message
    from needlescope.providers.registry import create_provider
    from needlescope.tasks.contexts import ContextBuilder

    os.environ.setdefault("NS_BENCH_KEY", "bench-key")
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(fake_server(kind)) if kind != "llama.cpp" else None
        provider_kind = "local" if kind == "llama.cpp" else kind
        import yaml

        config = parse_config(
            yaml.safe_load(
                config_text(provider_kind, srv and srv.base_url, length, repeats, count_haystack)
            )
        )
        model = config.models[0]
        if kind == "llama.cpp":
            from needlescope.providers.local import LocalProvider

            provider: Any = LocalProvider(name="m", ctx_per_slot=2048)
        else:
            provider = create_provider(
                kind, name="m", base_url=model.base_url, model="fake-model", api_key="bench-key"
            )
        counted = [0]
        post = provider._post

        async def counting_post(url: str, body: dict[str, Any], headers: Any = None) -> Any:
            if "tokenize" in url or "apply-template" in url:
                counted[0] += 1
            return await post(url, body, headers)

        provider._post = counting_post
        provider.bench_counting_requests = 0
        if not pieces:
            provider.piece_counter = lambda: None
        try:
            cells = expand_grid(config)
            remembered = store.remembered_fits([c.cell_id for c in cells]) if store else {}
            builder = ContextBuilder(config, {"m": provider}, remembered=remembered)
            started = time.perf_counter()
            built = await builder.build_contexts("m", cells)
            wall = time.perf_counter() - started
            provider.bench_counting_requests = counted[0]
            requests = counting_requests(kind, srv, provider)
            assert not built.failed and not built.unbuildable, (built.failed, built.unbuildable)
            exact = 0  # prompts of exactly the target length
            # Checks, with whole counts (not part of the figure).
            for context in built.contexts:
                cell = context.cell
                measured = built.measured[cell.cell_id]
                whole = await provider.count_prompt_tokens((Message("user", context.prompt_text),))
                assert whole == context.prompt_length <= cell.length, (whole, context.prompt_length)
                from needlescope.probes.registry import probe_module

                exact += whole == cell.length
                if whole < cell.length:
                    filler, fkind = builder.filler_for(cell)
                    longer = probe_module(cell.probe).render(
                        cell, filler, fkind, context.filler_chars + 1
                    )
                    over = await provider.count_prompt_tokens(
                        (Message("user", longer.prompt_text),)
                    )
                    assert over is not None and over > cell.length, (over, cell.length)
                if model.counts_haystack:
                    hay = await provider.count_tokens(context.haystack_text)
                    assert hay == measured.haystack_length, (hay, measured.haystack_length)
                else:
                    assert measured.haystack_length is None
            if store is not None:
                cell_rows = [builder.cell_row("m", c, built, "bench") for c in built.contexts]
                store.append("cells", cell_rows)
        finally:
            await provider.aclose()
    return {
        "kind": kind,
        "length": length,
        "cells": len(cells),
        "requests": requests,
        "per_cell": requests / len(cells),
        "wall_s": wall,
        "rounds": builder.pieces.rounds,
        "fits": builder.pieces.fits + builder.whole.fits,
        "recalled": len(builder.recalled),
        "exact": exact,
        "prompts": [c.prompt_sha256 for c in built.contexts],
    }


def baseline(kind: str, length: int, repeats: int) -> dict[str, Any]:
    """The build as it was: every candidate prompt counted whole by ``fit_to_length``."""
    from needlescope.tasks.contexts import ContextBuilder

    fit_length = ContextBuilder._fit_length
    ContextBuilder._fit_length = lambda self, model, cell: None  # type: ignore[assignment,method-assign,return-value]
    try:
        return asyncio.run(run(kind, length, repeats, pieces=False))
    finally:
        ContextBuilder._fit_length = fit_length  # type: ignore[method-assign]


def main() -> int:
    import tempfile

    from needlescope.warehouse.store import Warehouse

    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--kinds", default="llama.cpp,anthropic,gemini")
    parser.add_argument(
        "--fakes-only",
        action="store_true",
        help="only the Anthropic and Gemini fakes (no local model: leaves the CPU alone)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--subword",
        action="store_true",
        help="the fakes count cl100k_base tokens (a subword tokenizer) instead of words",
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the whole-prompt builds (slow at 1M)"
    )
    args = parser.parse_args()
    global SUBWORD
    SUBWORD = args.subword
    kinds = ["anthropic", "gemini"] if args.fakes_only else args.kinds.split(",")
    rows: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
    for length in map(int, args.lengths.split(",")):
        repeats = args.repeats
        for kind in kinds:
            with tempfile.TemporaryDirectory() as root:
                store = Warehouse(Path(root)).ensure()
                new = asyncio.run(run(kind, length, repeats, pieces=True, store=store))
                again = asyncio.run(run(kind, length, repeats, pieces=True, store=store))
            assert again["prompts"] == new["prompts"], "a re-sweep sent other prompts"
            with_haystacks = ""
            if kind in ("anthropic", "gemini"):  # haystacks not counted unless asked for
                asked = asyncio.run(run(kind, length, repeats, pieces=True, count_haystack=True))
                assert asked["prompts"] == new["prompts"]
                with_haystacks = f"; {asked['per_cell']:.2f} with count_haystack: true"
            old = None if args.no_baseline else baseline(kind, length, repeats)
            rows.append((new, again, old or new))
            base = "not run" if old is None else f"{old['per_cell']:.2f}"
            base_s = "" if old is None else f" (baseline {old['wall_s']:.1f} s)"
            print(
                f"counting requests per cell, {kind} at {length:,} tokens ({new['cells']} cells):"
                f" first sweep {new['per_cell']:.2f}{with_haystacks},"
                f" re-sweep {again['per_cell']:.2f}"
                f" ({new['exact']} of {new['cells']} prompts exactly the length)"
                f" ({again['recalled']} fits recalled) (goal <= {GOAL:g}; baseline {base});"
                f" {new['fits']} searches; build {new['wall_s']:.1f} s{base_s},"
                f" re-sweep {again['wall_s']:.1f} s",
                flush=True,
            )
    worst = max(rows, key=lambda r: r[0]["per_cell"])
    worst_again = max(rows, key=lambda r: r[1]["per_cell"])
    baseline_of_worst = "not run" if args.no_baseline else f"{worst[2]['per_cell']:.2f}"
    print(
        f"TARGET counting requests per cell (worst provider x length; first sweep:"
        f" {worst[0]['kind']} at {worst[0]['length']:,}; re-sweep: {worst_again[1]['kind']} at"
        f" {worst_again[1]['length']:,}): first sweep {worst[0]['per_cell']:.2f},"
        f" re-sweep {worst_again[1]['per_cell']:.2f} | goal <= {GOAL:g}"
        f" | baseline {baseline_of_worst}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
