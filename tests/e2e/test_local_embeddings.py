"""Embeddings from the bundled SmolLM2 GGUF (mean-pooled by llama.cpp): nothing is downloaded."""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from needlescope.errors import NeedlescopeError, ProviderError
from needlescope.probes.rag import retrieval
from needlescope.providers.local import LocalProvider, LocalServer

pytestmark = pytest.mark.e2e

QUESTION = "What colour is the lighthouse on Marrow Point painted?"
MATCHING = "The lighthouse on Marrow Point is painted a deep cobalt blue."
UNRELATED = "The committee met on Tuesday to discuss next year's budget."


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(ctx_per_slot=512, embedding=True) as srv:
        yield srv


@asynccontextmanager
async def connect(server: LocalServer) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(server=server)
    try:
        yield provider
    finally:
        await provider.aclose()


def model_width(server: LocalServer) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{server.url}/v1/models", timeout=10) as resp:
        return int(json.loads(resp.read())["data"][0]["meta"]["n_embd"])


async def test_vectors_have_the_models_width_and_unit_length(server):
    async with connect(server) as provider:
        vectors = await provider.embed([QUESTION, MATCHING, UNRELATED])
    width = model_width(server)
    assert width == 576  # SmolLM2-135M's hidden size
    assert [len(v) for v in vectors] == [width] * 3
    for vector in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-4)


async def test_question_is_closer_to_the_matching_sentence(server):
    async with connect(server) as provider:
        question, matching, unrelated = await provider.embed([QUESTION, MATCHING, UNRELATED])
    # Measured: about 0.89 against 0.77.
    assert retrieval.cosine(question, matching) > retrieval.cosine(question, unrelated) + 0.05
    assert retrieval.rank(question, [unrelated, matching]) == [1, 0]


async def test_batches_keep_the_order_and_the_vectors(server):
    texts = [
        f"Sentence number {word} about the harbour."
        for word in ("one", "two", "three", "four", "five")
    ]
    async with connect(server) as provider:
        together = await provider.embed(texts, batch_size=16)
        in_pairs = await provider.embed(texts, batch_size=2)
        alone = [(await provider.embed([t]))[0] for t in texts]
    for a, b, c in zip(together, in_pairs, alone, strict=True):
        assert retrieval.cosine(a, b) > 0.9999 and retrieval.cosine(a, c) > 0.9999
    assert retrieval.cosine(together[0], together[1]) < 0.9999  # different texts, different vectors


async def test_empty_text_is_a_provider_error(server):
    async with connect(server) as provider:
        with pytest.raises(ProviderError, match="empty"):
            await provider.embed([""])


async def test_a_chat_server_refuses_to_embed():
    with LocalServer(ctx_per_slot=256) as chat:
        async with connect(chat) as provider:
            with pytest.raises(NeedlescopeError, match="embedding=True"):
                await provider.embed([QUESTION])
