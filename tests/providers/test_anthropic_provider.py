"""AnthropicProvider against a local fake speaking the Messages API wire format."""

from __future__ import annotations

import asyncio
import email.utils
import os
import pickle
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from needlescope.errors import ProviderError
from needlescope.providers import base
from needlescope.providers.anthropic import AnthropicProvider, _retry_after
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.registry import create_provider, get_factory
from tests.support import anthropic_server as fake

KEY = "sk-ant-test-SECRET-0123456789abcdef"
ASK = ChatRequest(messages=(Message("user", "What is the magic number?"),), max_tokens=20)
THINK = {"type": "enabled", "budget_tokens": 2048}


@pytest.fixture
def server() -> Iterator[fake.FakeAnthropicServer]:
    with fake.FakeAnthropicServer(lambda body: "The magic number is 42", api_key=KEY) as srv:
        yield srv


@asynccontextmanager
async def client(srv: fake.FakeAnthropicServer, **kwargs: Any) -> AsyncIterator[AnthropicProvider]:
    kwargs = {
        "name": "fake",
        "base_url": srv.base_url,
        "model": "claude-test",
        "api_key": KEY,
    } | kwargs
    provider = AnthropicProvider(**kwargs)
    try:
        yield provider
    finally:
        await provider.aclose()


async def fail(srv: fake.FakeAnthropicServer, *faults: Any, **kwargs: Any) -> ProviderError:
    srv.add_faults(*faults)
    async with client(srv, **kwargs) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    return info.value


# --- success -----------------------------------------------------------------------------------


async def test_success_parses_reply_and_sends_the_request(server):
    request = ChatRequest(
        messages=(Message("system", "Be brief."), Message("user", "What is the magic number?")),
        max_tokens=50,
        temperature=0.0,
        extra={"top_k": 5},
    )
    async with client(server) as p:
        reply = await p.complete(request)
    assert reply.text == "The magic number is 42"
    assert reply.finish_reason == "stop"
    assert reply.prompt_tokens == (2 + 3) + (5 + 3)  # the fake counts words + 3 per message
    assert reply.completion_tokens == 5
    assert reply.reasoning_tokens is None
    assert reply.model_version == "claude-test"
    assert 0 < reply.latency_s < 5
    assert server.last_path == "/v1/messages"
    assert server.last_body == {
        "model": "claude-test",
        "max_tokens": 50,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "What is the magic number?"}],
        "temperature": 0.0,
        "top_k": 5,
    }
    assert server.last_headers["x-api-key"] == KEY
    assert server.last_headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in server.last_headers
    assert server.requests == 1


async def test_system_messages_are_joined_into_the_system_field(server):
    messages = (
        Message("system", "Rule one."),
        Message("user", "Hello there."),
        Message("system", "Rule two."),
        Message("assistant", "Hi."),
        Message("user", "Answer?"),
    )
    async with client(server) as p:
        await p.complete(ChatRequest(messages=messages))
    assert server.last_body["system"] == "Rule one.\n\nRule two."
    assert [m["role"] for m in server.last_body["messages"]] == ["user", "assistant", "user"]
    async with client(server) as p:
        await p.complete(ASK)
    assert "system" not in server.last_body


async def test_defaults_and_length_finish(server):
    async with client(server) as p:
        await p.complete(ChatRequest(messages=ASK.messages))
        assert server.last_body["max_tokens"] == 1024  # the API requires one
        assert "temperature" not in server.last_body
        reply = await p.complete(ChatRequest(messages=ASK.messages, max_tokens=2))
    assert (reply.text, reply.finish_reason, reply.completion_tokens) == ("The magic", "length", 2)


async def test_a_stop_sequence_is_a_stop(server):
    request = ChatRequest(messages=ASK.messages, extra={"stop_sequences": [" is"]})
    async with client(server) as p:
        reply = await p.complete(request)
    assert (reply.text, reply.finish_reason) == ("The magic number", "stop")


async def test_thinking_blocks_are_left_out_of_the_text(server):
    request = ChatRequest(
        messages=ASK.messages, max_tokens=20, temperature=0.0, extra={"thinking": THINK}
    )
    async with client(server) as p:
        reply = await p.complete(request)
    assert reply.text == "The magic number is 42"
    assert reply.finish_reason == "stop"
    thinking_words = len(fake.THINKING_TEXT.split())
    assert reply.completion_tokens == thinking_words + 5  # thinking counts as output
    # the thinking's share, from usage.output_tokens_details.thinking_tokens
    assert reply.reasoning_tokens == thinking_words and reply.reasoned
    body = server.last_body
    assert body["thinking"] == THINK  # passed through verbatim
    assert body["max_tokens"] == 20 + 2048  # the answer's budget plus the thinking budget
    assert "temperature" not in body  # the API refuses temperature 0 with thinking


async def test_explicit_max_tokens_and_temperature_in_extra_win(server):
    extra = {"thinking": THINK, "max_tokens": 4000, "temperature": 1}
    async with client(server) as p:
        await p.complete(
            ChatRequest(messages=ASK.messages, max_tokens=20, temperature=0.0, extra=extra)
        )
    assert (server.last_body["max_tokens"], server.last_body["temperature"]) == (4000, 1)


async def test_adaptive_and_disabled_thinking(server):
    async with client(server) as p:
        adaptive = ChatRequest(
            messages=ASK.messages,
            max_tokens=300,
            temperature=0.0,
            extra={"thinking": {"type": "adaptive"}},
        )
        reply = await p.complete(adaptive)
        assert reply.text == "The magic number is 42"
        # adaptive thinking spends max_tokens too: the answer gets the reasoning budget beside it
        assert server.last_body["max_tokens"] == 300 + p.reasoning_budget
        assert "temperature" not in server.last_body
        disabled = ChatRequest(
            messages=ASK.messages,
            max_tokens=30,
            temperature=0.0,
            extra={"thinking": {"type": "disabled"}},
        )
        await p.complete(disabled)
        assert server.last_body["max_tokens"] == 30 and server.last_body["temperature"] == 0.0


async def test_seed_is_not_sent(server):
    async with client(server) as p:
        await p.complete(ChatRequest(messages=ASK.messages, extra={"seed": 7, "top_p": 0.9}))
    assert "seed" not in server.last_body and server.last_body["top_p"] == 0.9


async def test_cache_tokens_count_as_prompt_and_odd_replies():
    replies = iter(
        [
            {
                "model": "claude-x-1",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "The answer "},
                    {"type": "text", "text": "is 7."},
                ],
                "stop_reason": "end_turn",
                "usage": {
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 100,
                    "cache_read_input_tokens": 1000,
                    "output_tokens": 4,
                },
            },
            {"model": "claude-x-2", "content": [], "stop_reason": "max_tokens"},
            {
                "model": "claude-x-3",
                "content": [],
                "stop_reason": "refusal",
                "usage": {"input_tokens": 9, "cache_read_input_tokens": None, "output_tokens": 0},
            },
        ]
    )
    async with fake.FakeAnthropicServer(lambda body: next(replies)) as srv, client(srv) as p:
        first, second, third = [await p.complete(ASK) for _ in range(3)]
    assert (first.text, first.prompt_tokens, first.completion_tokens) == (
        "The answer is 7.",
        1110,
        4,
    )
    assert first.model_version == "claude-x-1"
    assert (first.cached_tokens, first.cache_write_tokens, first.cache_write_1h_tokens) == (
        1000,
        100,
        None,
    )
    assert (second.text, second.finish_reason, second.prompt_tokens) == ("", "length", None)
    assert (third.text, third.finish_reason, third.prompt_tokens) == ("", "refusal", 9)


async def test_base_url_with_v1_and_custom_headers(server):
    headers = {"anthropic-beta": "context-1m-2025-08-07", "Anthropic-Version": "2024-01-01"}
    async with client(server, base_url=server.base_url + "/v1/", headers=headers) as p:
        await p.complete(ASK)
    assert server.last_headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert server.last_headers["anthropic-version"] == "2024-01-01"
    assert p.base_url == server.base_url


# --- token counting ------------------------------------------------------------------------------


async def test_count_tokens_endpoints(server):
    messages = (Message("system", "Be brief."), Message("user", "What is the magic number?"))
    async with client(server) as p:
        assert await p.count_tokens("one two three") == 3 + 3
        assert server.last_path == "/v1/messages/count_tokens"
        assert server.last_body == {
            "model": "claude-test",
            "messages": [{"role": "user", "content": "one two three"}],
        }
        assert server.last_headers["x-api-key"] == KEY
        counted = await p.count_prompt_tokens(messages)
        assert server.last_body["system"] == "Be brief."
        assert "max_tokens" not in server.last_body
        reply = await p.complete(ChatRequest(messages=messages))
        assert await p.count_tokens("") == 0
        # An empty prompt's framing alone (the API refuses empty content): "." counts 1 + 3.
        assert await p.count_prompt_tokens((Message("user", ""),)) == 3
    assert counted == reply.prompt_tokens == (2 + 3) + (5 + 3)
    assert (server.count_requests, server.message_requests) == (3, 1)


async def test_count_tokens_errors(server):
    async with client(server) as p:
        server.add_faults(fake.Fault(fake.RATE_LIMIT, retry_after="0.1"))
        assert await p.count_tokens("one two") == 5  # waited out once, like complete
        assert server.count_requests == 2
        server.add_faults(fake.OVERLOADED)
        with pytest.raises(ProviderError) as info:
            await p.count_tokens("hello")
        assert info.value.kind == base.SERVER_ERROR and info.value.retryable
    async with fake.FakeAnthropicServer(context_window=5) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.count_prompt_tokens((Message("user", "far too many words here"),))
    assert info.value.kind == base.CONTEXT_TOO_LONG
    assert "prompt is too long: 8 tokens > 5 maximum" in str(info.value)


# --- errors ----------------------------------------------------------------------------------


async def test_429_retry_after_is_waited_out_once(server):
    server.add_faults(fake.Fault(fake.RATE_LIMIT, retry_after="0.3"))
    async with client(server) as p:
        start = time.perf_counter()
        reply = await p.complete(ASK)
        elapsed = time.perf_counter() - start
    assert reply.text == "The magic number is 42"
    assert elapsed >= 0.3
    assert reply.latency_s < elapsed - 0.25  # latency is the answering request's, not the wait
    assert server.requests == 2 and server.fault_counts[fake.RATE_LIMIT] == 1


async def test_429_twice_is_rate_limited(server):
    limited = fake.Fault(fake.RATE_LIMIT, retry_after="0.1")
    err = await fail(server, limited, limited)
    assert err.kind == base.RATE_LIMITED and err.retryable
    assert err.status == 429 and err.retry_after_s == pytest.approx(0.1)
    assert "429" in str(err) and "rate limit" in str(err) and "rate_limit_error" in str(err)
    assert "[req_fake" in str(err)  # the request id, for Anthropic support
    assert server.requests == 2


@pytest.mark.parametrize("retry_after", ["120", None])
async def test_429_not_waited_when_too_long_or_unknown(server, retry_after):
    err = await fail(
        server, fake.Fault(fake.RATE_LIMIT, retry_after=retry_after), max_retry_after_s=60
    )
    assert err.kind == base.RATE_LIMITED and err.retryable
    assert err.retry_after_s == (120 if retry_after else None)
    assert server.requests == 1


async def test_spent_monthly_limit_is_not_retryable(server):
    err = await fail(server, fake.SPEND_LIMIT)
    assert err.kind == base.RATE_LIMITED and not err.retryable and err.retry_after_s is None
    assert server.requests == 1


def test_retry_after_header_forms():
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= _retry_after({"retry-after": soon}) <= 30
    assert _retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert _retry_after({"retry-after": "2.5"}) == 2.5
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


@pytest.mark.parametrize(("fault", "status"), [(fake.OVERLOADED, 529), (fake.SERVER_ERROR, 500)])
async def test_overloaded_and_5xx_are_retryable_server_errors(server, fault, status):
    err = await fail(server, fault)
    assert err.kind == base.SERVER_ERROR and err.retryable and err.status == status
    assert str(err).startswith(f"HTTP {status} from {server.base_url}: ")
    assert server.requests == 1  # no retry loop in the client


async def test_prompt_too_long_is_not_retryable(server):
    err = await fail(server, fake.PROMPT_TOO_LONG)
    assert err.kind == base.CONTEXT_TOO_LONG and not err.retryable and err.status == 400
    assert "prompt is too long: 8 tokens > 200000 maximum" in str(err)
    assert len(str(err)) < 300 and "\n" not in str(err)


async def test_request_too_large_is_its_own_kind_and_final(server):
    err = await fail(server, fake.TOO_LARGE)
    assert err.kind == base.REQUEST_TOO_LARGE and not err.retryable and err.status == 413


@pytest.mark.parametrize(("fault", "status"), [(fake.UNAUTHORIZED, 401), (fake.FORBIDDEN, 403)])
async def test_401_and_403_are_auth(server, fault, status):
    err = await fail(server, fault)
    assert err.kind == base.AUTH and not err.retryable and err.status == status


async def test_auth_error_never_shows_the_key(server):
    echo = fake.Fault(fake.UNAUTHORIZED, message=f"invalid x-api-key: {KEY}")
    err = await fail(server, echo)
    assert err.kind == base.AUTH and "invalid x-api-key: ***" in str(err)
    assert KEY not in str(err) and KEY not in repr(err)


async def test_wrong_or_missing_key_is_auth(server):
    err = await fail(server, api_key="sk-ant-wrong-key-9876543210")
    assert err.kind == base.AUTH and "sk-ant-wrong-key-9876543210" not in str(err)
    assert "invalid x-api-key (authentication_error)" in str(err)
    err = await fail(server, api_key=None)
    assert err.kind == base.AUTH


async def test_bad_request_and_not_found(server):
    async with client(server) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ChatRequest(messages=ASK.messages, temperature=1.5))
    assert info.value.kind == base.BAD_REQUEST and info.value.status == 400
    assert not info.value.retryable and "temperature" in str(info.value)
    err = await fail(server, base_url=server.url + "/nowhere")
    assert err.kind == base.BAD_REQUEST and err.status == 404 and "HTTP 404" in str(err)


async def test_timeout(server):
    start = time.perf_counter()
    err = await fail(server, fake.Fault(fake.SLOW, delay_s=3), timeout_s=0.3)
    assert time.perf_counter() - start < 2
    assert err.kind == base.TIMEOUT and err.retryable
    assert str(err) == f"no reply from {server.base_url} within 0.3 s"


async def test_connection_refused_names_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with client(fake.FakeAnthropicServer(), base_url=url) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.CONNECTION and info.value.retryable
    assert str(info.value) == f"cannot reach {url}: connection refused"


async def test_connection_reset(server):
    err = await fail(server, fake.RESET)
    assert err.kind == base.CONNECTION and err.retryable
    assert str(err).startswith(f"cannot reach {server.base_url}: ")
    assert server.requests == 1


@pytest.mark.parametrize("fault", [fake.TRUNCATED, fake.GARBAGE])
async def test_unreadable_body_is_a_bad_response(server, fault):
    err = await fail(server, fault)
    assert err.kind == base.BAD_RESPONSE and err.retryable and err.status == 200
    assert "\n" not in str(err)


async def test_reply_without_content_is_a_bad_response():
    async with fake.FakeAnthropicServer(lambda body: {"type": "message"}) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.BAD_RESPONSE and info.value.retryable


async def test_a_200_error_envelope_is_the_error_its_type_says():
    error_body = {"type": "error", "error": {"type": "api_error", "message": "upstream failed"}}
    async with fake.FakeAnthropicServer(lambda body: error_body) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.SERVER_ERROR and "upstream failed" in str(info.value)
    assert info.value.retryable and info.value.status == 200


async def test_empty_content(server):
    err = await fail(server, fake.EMPTY_CONTENT)
    assert err.kind == base.EMPTY_RESPONSE and err.retryable
    assert "end_turn" in str(err)


EXPECTED_KIND = {
    fake.Fault(fake.RATE_LIMIT, retry_after="100"): base.RATE_LIMITED,
    fake.SPEND_LIMIT: base.RATE_LIMITED,
    fake.OVERLOADED: base.SERVER_ERROR,
    fake.SERVER_ERROR: base.SERVER_ERROR,
    fake.PROMPT_TOO_LONG: base.CONTEXT_TOO_LONG,
    fake.TOO_LARGE: base.REQUEST_TOO_LARGE,
    fake.Fault(fake.UNAUTHORIZED, message=f"bad key {KEY}"): base.AUTH,
    fake.FORBIDDEN: base.AUTH,
    fake.Fault(fake.SLOW, delay_s=1): base.TIMEOUT,
    fake.RESET: base.CONNECTION,
    fake.TRUNCATED: base.BAD_RESPONSE,
    fake.GARBAGE: base.BAD_RESPONSE,
    fake.EMPTY_CONTENT: base.EMPTY_RESPONSE,
}
NOT_RETRYABLE_THOUGH_KIND_IS = {fake.SPEND_LIMIT}


async def test_every_fault_maps_to_its_kind_and_never_shows_the_key(server):
    secret_header = {"X-Custom-Token": "hdr-SECRET-value"}
    for fault, kind in EXPECTED_KIND.items():
        err = await fail(server, fault, timeout_s=0.2, headers=secret_header)
        assert err.kind == kind
        expected_retryable = (
            kind in base.RETRYABLE_KINDS and fault not in NOT_RETRYABLE_THOUGH_KIND_IS
        )
        assert err.retryable == expected_retryable, kind
        assert server.last_headers["X-Custom-Token"] == "hdr-SECRET-value"
        for text in (
            str(err),
            repr(err),
            repr(pickle.loads(pickle.dumps(err))),
            repr(err.__cause__),
            repr(err.__context__),
        ):
            assert KEY not in text and "SECRET" not in text, (kind, text)
    assert server.requests == len(EXPECTED_KIND)
    provider = AnthropicProvider(
        name="x", base_url=server.base_url, model="m", api_key=KEY, headers=secret_header
    )
    assert "SECRET" not in repr(provider) and "SECRET" not in str(provider)


# --- concurrency, sessions, registry -----------------------------------------------------


async def test_50_concurrent_requests_all_reach_the_server_at_once():
    async with fake.FakeAnthropicServer(delay_s=0.2) as srv, client(srv, max_connections=50) as p:
        replies = await asyncio.gather(*(p.complete(ASK) for _ in range(50)))
    assert len(replies) == 50 and srv.requests == 50
    assert srv.max_in_flight >= 40


async def test_max_connections_caps_requests_in_flight():
    async with fake.FakeAnthropicServer(delay_s=0.2) as srv, client(srv, max_connections=4) as p:
        await asyncio.gather(*(p.complete(ASK) for _ in range(8)))
    assert srv.max_in_flight == 4


async def test_fault_rates_are_seeded_by_request():
    async def run() -> list[str]:
        out = []
        async with (
            fake.FakeAnthropicServer(rates={fake.OVERLOADED: 0.3}, seed=3) as srv,
            client(srv) as p,
        ):
            for i in range(40):
                try:
                    await p.complete(ChatRequest(messages=(Message("user", f"q{i}"),)))
                    out.append("ok")
                except ProviderError as e:
                    out.append(e.kind)
            assert srv.fault_counts[fake.OVERLOADED] == out.count(base.SERVER_ERROR)
        return out

    first, second = await run(), await run()
    assert first == second and 4 <= first.count(base.SERVER_ERROR) <= 20


async def test_session_is_reused_and_recreated_after_close(server):
    async with client(server) as p:
        await p.complete(ASK)
        session = p._session
        await p.complete(ASK)
        assert p._session is session
        await p.aclose()
        await p.complete(ASK)
        assert p._session is not session and not p._session.closed


def test_sync_use_with_a_threaded_server():
    with fake.FakeAnthropicServer(lambda body: "hi") as srv:

        async def go() -> str:
            async with client(srv) as p:
                return (await p.complete(ASK)).text

        assert asyncio.run(go()) == "hi" and asyncio.run(go()) == "hi"
        assert srv.requests == 2


def test_registry():
    provider = create_provider("anthropic", name="a", model="claude-test", api_key=KEY)
    assert isinstance(provider, AnthropicProvider) and isinstance(provider, base.Provider)
    assert get_factory("anthropic") is AnthropicProvider
    assert provider.base_url == "https://api.anthropic.com"
    assert KEY not in repr(provider)


def test_request_body_is_inspectable():
    provider = AnthropicProvider(name="a", model="claude-test")
    body = provider.request_body(ChatRequest(messages=(Message("user", "hi"),), max_tokens=8))
    assert body == {
        "model": "claude-test",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
    }


# --- live ------------------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY not set")
async def test_live_anthropic_api():
    provider = AnthropicProvider(
        name="live",
        model=os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5"),
        api_key=os.environ["ANTHROPIC_API_KEY"],
        timeout_s=120,
    )
    try:
        request = ChatRequest(
            messages=(
                Message("system", "Answer with the number only."),
                Message("user", "The magic number is 4817. What is the magic number?"),
            ),
            max_tokens=20,
            temperature=0.0,
        )
        reply = await provider.complete(request)
        assert "4817" in reply.text and reply.finish_reason == "stop"
        assert reply.prompt_tokens and reply.completion_tokens and reply.model_version
        counted = await provider.count_prompt_tokens(request.messages)
        assert counted is not None and abs(counted - reply.prompt_tokens) <= 8  # an estimate
        assert await provider.count_tokens("hello world") > 0
    finally:
        await provider.aclose()


async def test_cache_writes_kept_an_hour_are_read_apart():
    usage = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
        "output_tokens": 1,
    }
    body = {"model": "c", "content": [{"type": "text", "text": "7"}], "stop_reason": "end_turn"}
    server = fake.FakeAnthropicServer(lambda _: {**body, "usage": usage})
    async with server as srv, client(srv) as p:
        reply = await p.complete(ASK)
    assert (reply.prompt_tokens, reply.cache_write_tokens, reply.cache_write_1h_tokens) == (
        3005,
        3000,
        2000,
    )
