"""OpenAIProvider against a local fake speaking the chat-completions wire format."""

from __future__ import annotations

import asyncio
import email.utils
import pickle
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from needlescope.errors import ConfigError, ProviderError
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.openai import OpenAIProvider, _retry_after
from needlescope.providers.registry import create_provider, known_kinds
from tests.support import openai_server as fake

KEY = "sk-test-SECRET-0123456789abcdef"
ASK = ChatRequest(messages=(Message("user", "What is the magic number?"),), max_tokens=20)


@pytest.fixture
def server() -> Iterator[fake.FakeOpenAIServer]:
    with fake.FakeOpenAIServer(lambda body: "The magic number is 42", api_key=KEY) as srv:
        yield srv


@asynccontextmanager
async def client(srv: fake.FakeOpenAIServer, **kwargs: Any) -> AsyncIterator[OpenAIProvider]:
    kwargs = {
        "name": "fake",
        "base_url": srv.base_url,
        "model": "gpt-test",
        "api_key": KEY,
    } | kwargs
    provider = OpenAIProvider(**kwargs)
    try:
        yield provider
    finally:
        await provider.aclose()


async def fail(srv: fake.FakeOpenAIServer, *faults: Any, **kwargs: Any) -> ProviderError:
    srv.add_faults(*faults)
    async with client(srv, **kwargs) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    return info.value


async def test_success_parses_reply_and_sends_the_request(server):
    request = ChatRequest(
        messages=(Message("system", "Be brief."), Message("user", "What is the magic number?")),
        max_tokens=50,
        temperature=0.0,
        extra={"seed": 7},
    )
    async with client(server) as p:
        reply = await p.complete(request)
    assert reply.text == "The magic number is 42"
    assert reply.finish_reason == "stop"
    assert reply.prompt_tokens == (2 + 3) + (5 + 3)  # the fake counts words + 3 per message
    assert reply.completion_tokens == 5
    assert reply.reasoning_tokens == 0
    # The model that answered; its backend's system_fingerprint is the serving fingerprint's.
    assert reply.model_version == "gpt-test"
    assert reply.fingerprint is not None
    assert reply.fingerprint.model_version == "gpt-test"
    assert reply.fingerprint.system_fingerprint == "fp_fake"
    assert reply.fingerprint.sampling == '{"max_tokens":50,"seed":7,"temperature":0.0}'
    assert 0 < reply.latency_s < 5
    assert server.last_body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the magic number?"},
        ],
        "max_tokens": 50,
        "temperature": 0.0,
        "seed": 7,
    }
    assert server.last_headers["Authorization"] == f"Bearer {KEY}"
    assert server.requests == 1


async def test_unset_settings_are_not_sent_and_length_is_reported(server):
    async with client(server) as p:
        reply = await p.complete(ChatRequest(messages=ASK.messages, max_tokens=2))
        assert "temperature" not in server.last_body
        assert (reply.text, reply.finish_reason) == ("The magic", "length")
        await p.complete(ChatRequest(messages=ASK.messages))
        assert "max_tokens" not in server.last_body


async def test_null_content_missing_usage_and_reasoning_tokens():
    replies = iter(
        [
            {
                "model": "m-1",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": None},
                        "finish_reason": "stop",
                    }
                ],
            },
            {
                "model": "m-2",
                "choices": [{"message": {"role": "assistant"}, "finish_reason": "length"}],
                "usage": {
                    "prompt_tokens": 9,
                    "completion_tokens": 30,
                    "completion_tokens_details": {"reasoning_tokens": 25},
                },
            },
        ]
    )
    async with fake.FakeOpenAIServer(lambda body: next(replies)) as srv, client(srv) as p:
        first, second = await p.complete(ASK), await p.complete(ASK)
    assert (first.text, first.prompt_tokens, first.reasoning_tokens) == ("", None, None)
    assert first.model_version == "m-1"
    assert (second.text, second.prompt_tokens, second.reasoning_tokens) == ("", 9, 25)


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


async def test_retry_after_ms_is_honoured(server):
    server.add_faults(fake.Fault(fake.RATE_LIMIT, retry_after=None, retry_after_ms="200"))
    async with client(server) as p:
        start = time.perf_counter()
        await p.complete(ASK)
    assert time.perf_counter() - start >= 0.2
    assert server.requests == 2


async def test_429_twice_is_rate_limited(server):
    limited = fake.Fault(fake.RATE_LIMIT, retry_after="0.1")
    err = await fail(server, limited, limited)
    assert err.kind == base.RATE_LIMITED and err.retryable
    assert err.status == 429 and err.retry_after_s == pytest.approx(0.1)
    assert "429" in str(err) and "Rate limit reached" in str(err)
    assert server.requests == 2


@pytest.mark.parametrize("retry_after", ["120", None])
async def test_429_not_waited_when_too_long_or_unknown(server, retry_after):
    err = await fail(
        server, fake.Fault(fake.RATE_LIMIT, retry_after=retry_after), max_retry_after_s=60
    )
    assert err.kind == base.RATE_LIMITED and err.retryable
    assert err.retry_after_s == (120 if retry_after else None)
    assert server.requests == 1


def test_retry_after_header_forms():
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= _retry_after({"Retry-After": soon}) <= 30
    assert _retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert _retry_after({"Retry-After": "2.5"}) == 2.5
    assert _retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert _retry_after({"Retry-After": "soon"}) is None
    assert _retry_after({}) is None


@pytest.mark.parametrize(("fault", "status"), [(fake.SERVER_ERROR, 500), (fake.UNAVAILABLE, 503)])
async def test_5xx_is_a_retryable_server_error(server, fault, status):
    err = await fail(server, fault)
    assert err.kind == base.SERVER_ERROR and err.retryable and err.status == status
    assert str(err).startswith(f"HTTP {status} from {server.base_url}: ")
    assert server.requests == 1  # no retry loop in the client


async def test_context_length_is_not_retryable(server):
    err = await fail(server, fake.CONTEXT_LENGTH)
    assert err.kind == base.CONTEXT_TOO_LONG and not err.retryable and err.status == 400
    assert "maximum context length" in str(err)
    assert len(str(err)) < 300 and "\n" not in str(err)


async def test_401_is_auth_and_never_shows_the_key(server):
    err = await fail(server, fake.UNAUTHORIZED)
    assert err.kind == base.AUTH and not err.retryable and err.status == 401
    assert "Incorrect API key provided" in str(err)
    assert KEY not in str(err) and KEY not in repr(err)


async def test_wrong_key_is_auth(server):
    err = await fail(server, api_key="sk-wrong-key-9876543210")
    assert err.kind == base.AUTH and "sk-wrong-key-9876543210" not in str(err)


async def test_bad_request_and_not_found(server):
    async with client(server) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ChatRequest(messages=ASK.messages, extra={"messages": "oops"}))
    assert info.value.kind == base.BAD_REQUEST and info.value.status == 400
    assert not info.value.retryable
    err = await fail(server, base_url=server.url + "/nowhere/v1")
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
    url = f"http://127.0.0.1:{port}/v1"
    async with client(fake.FakeOpenAIServer(), base_url=url) as p:
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


async def test_reply_without_choices_is_a_bad_response():
    async with fake.FakeOpenAIServer(lambda body: {"id": "x"}) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.BAD_RESPONSE and info.value.retryable


async def test_a_200_error_body_is_the_error_its_type_says():
    error_body = {"error": {"message": "upstream failed", "type": "server_error"}}
    async with fake.FakeOpenAIServer(lambda body: error_body) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.SERVER_ERROR and "upstream failed" in str(info.value)
    assert info.value.retryable and info.value.status == 200


async def test_empty_choices(server):
    err = await fail(server, fake.EMPTY_CHOICES)
    assert err.kind == base.EMPTY_RESPONSE and err.retryable


EXPECTED_KIND = {
    fake.Fault(fake.RATE_LIMIT, retry_after="100"): base.RATE_LIMITED,
    fake.SERVER_ERROR: base.SERVER_ERROR,
    fake.UNAVAILABLE: base.SERVER_ERROR,
    fake.CONTEXT_LENGTH: base.CONTEXT_TOO_LONG,
    fake.UNAUTHORIZED: base.AUTH,
    fake.Fault(fake.SLOW, delay_s=1): base.TIMEOUT,
    fake.RESET: base.CONNECTION,
    fake.TRUNCATED: base.BAD_RESPONSE,
    fake.GARBAGE: base.BAD_RESPONSE,
    fake.EMPTY_CHOICES: base.EMPTY_RESPONSE,
}


async def test_every_fault_maps_to_its_kind_and_never_shows_the_key(server):
    secret_header = {"X-Api-Key": "hdr-SECRET-value"}
    for fault, kind in EXPECTED_KIND.items():
        err = await fail(server, fault, timeout_s=0.2, headers=secret_header)
        assert err.kind == kind
        assert err.retryable == (kind in base.RETRYABLE_KINDS), kind
        for text in (
            str(err),
            repr(err),
            repr(pickle.loads(pickle.dumps(err))),
            repr(err.__cause__),
            repr(err.__context__),
        ):
            assert KEY not in text and "SECRET" not in text, (kind, text)
    assert server.requests == len(EXPECTED_KIND)
    provider = OpenAIProvider(
        name="x", base_url=server.base_url, model="m", api_key=KEY, headers=secret_header
    )
    assert "SECRET" not in repr(provider) and "SECRET" not in str(provider)


async def test_50_concurrent_requests_all_reach_the_server_at_once():
    async with fake.FakeOpenAIServer(delay_s=0.2) as srv, client(srv, max_connections=50) as p:
        replies = await asyncio.gather(*(p.complete(ASK) for _ in range(50)))
    assert len(replies) == 50 and srv.requests == 50
    assert srv.max_in_flight >= 40


async def test_max_connections_caps_requests_in_flight():
    async with fake.FakeOpenAIServer(delay_s=0.2) as srv, client(srv, max_connections=4) as p:
        await asyncio.gather(*(p.complete(ASK) for _ in range(8)))
    assert srv.max_in_flight == 4


async def test_fault_rates_are_seeded_by_request():
    async def run() -> list[str]:
        out = []
        async with (
            fake.FakeOpenAIServer(rates={fake.SERVER_ERROR: 0.3}, seed=3) as srv,
            client(srv) as p,
        ):
            for i in range(40):
                try:
                    await p.complete(ChatRequest(messages=(Message("user", f"q{i}"),)))
                    out.append("ok")
                except ProviderError as e:
                    out.append(e.kind)
            assert srv.fault_counts[fake.SERVER_ERROR] == out.count(base.SERVER_ERROR)
        return out

    first, second = await run(), await run()
    assert first == second and 4 <= first.count(base.SERVER_ERROR) <= 20


async def test_token_counting_is_off_for_generic_endpoints(server):
    async with client(server) as p:
        assert await p.count_tokens("hello") is None
        assert await p.count_prompt_tokens(ASK.messages) is None


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
    with fake.FakeOpenAIServer(lambda body: "hi") as srv:

        async def go() -> str:
            async with client(srv) as p:
                return (await p.complete(ASK)).text

        assert asyncio.run(go()) == "hi" and asyncio.run(go()) == "hi"
        assert srv.requests == 2


def test_registry():
    assert {"openai", "local"} <= set(known_kinds())
    provider = create_provider("openai", name="o", base_url="http://127.0.0.1:1/v1", model="m")
    assert isinstance(provider, OpenAIProvider) and isinstance(provider, base.Provider)
    with pytest.raises(ConfigError, match=r"unknown provider kind 'nope'; known kinds: .*openai"):
        create_provider("nope")


@pytest.mark.parametrize("code", ["²", "429x", ""])
def test_an_error_body_code_that_is_no_plain_number_is_a_provider_error(code: str) -> None:
    # A 2xx body's error code counts as an HTTP status only when it is a number (OpenRouter
    # sends 429 or "429"); "²" passes str.isdigit() and made int() raise.
    provider = OpenAIProvider(name="o", base_url="http://127.0.0.1:9/v1", model="m")
    failure = provider._body_error(200, {"code": code, "message": "upstream failed"})
    assert failure.kind == base.PROVIDER_ERROR and failure.status == 200
    as_text = provider._body_error(200, {"code": "429", "message": "upstream failed"})
    assert as_text.kind == provider._body_error(200, {"code": 429, "message": "x"}).kind
    assert as_text.kind != base.PROVIDER_ERROR


async def test_the_flex_tier_is_sent_as_service_tier(server):
    async with client(server, service_tier="flex") as p:
        await p.complete(ASK)
    assert server.last_body["service_tier"] == "flex"
    async with client(server) as p:
        await p.complete(ASK)
    assert "service_tier" not in server.last_body
