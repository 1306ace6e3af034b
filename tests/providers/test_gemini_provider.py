"""GeminiProvider against a local fake speaking the Gemini API's wire format."""

from __future__ import annotations

import asyncio
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
from needlescope.providers.base import ChatRequest, Message
from needlescope.providers.gemini import GeminiProvider, _retry_delay
from needlescope.providers.registry import create_provider
from tests.support import gemini_server as fake

KEY = "AIzaSy-test-SECRET-0123456789abcdef"
ANSWER = "The magic number is 42"
ASK = ChatRequest(messages=(Message("user", "What is the magic number?"),), max_tokens=20)
MODEL = "gemini-test"


@pytest.fixture
def server() -> Iterator[fake.FakeGeminiServer]:
    with fake.FakeGeminiServer(lambda body: ANSWER, api_key=KEY) as srv:
        yield srv


@asynccontextmanager
async def client(srv: fake.FakeGeminiServer, **kwargs: Any) -> AsyncIterator[GeminiProvider]:
    kwargs = {"name": "fake", "base_url": srv.base_url, "model": MODEL, "api_key": KEY} | kwargs
    provider = GeminiProvider(**kwargs)
    try:
        yield provider
    finally:
        await provider.aclose()


async def fail(
    srv: fake.FakeGeminiServer, *faults: Any, request: ChatRequest = ASK, **kwargs: Any
) -> ProviderError:
    srv.add_faults(*faults)
    async with client(srv, **kwargs) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(request)
    return info.value


# --- success ----------------------------------------------------------------------------------


async def test_success_maps_roles_and_settings_and_parses_the_reply(server):
    request = ChatRequest(
        messages=(
            Message("system", "Be brief."),
            Message("user", "Remember 42."),
            Message("assistant", "Noted."),
            Message("user", "What is the magic number?"),
        ),
        max_tokens=50,
        temperature=0.0,
        extra={"seed": 7, "top_p": 0.9},  # what the sweep puts in extra, snake_case
    )
    async with client(server) as p:
        reply = await p.complete(request)
    assert reply.text == ANSWER
    assert reply.finish_reason == "stop"
    assert reply.prompt_tokens == 2 + 2 + 1 + 5  # the fake counts words, system included
    assert reply.completion_tokens == 5
    assert reply.reasoning_tokens == 0  # usage present, no thoughts: proto3 left the 0 out
    assert reply.model_version == MODEL
    assert 0 < reply.latency_s < 5
    assert server.last_body == {
        "contents": [
            {"role": "user", "parts": [{"text": "Remember 42."}]},
            {"role": "model", "parts": [{"text": "Noted."}]},
            {"role": "user", "parts": [{"text": "What is the magic number?"}]},
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 0.0, "maxOutputTokens": 50, "seed": 7, "topP": 0.9},
    }
    assert server.last_path == f"/v1beta/models/{MODEL}:generateContent"  # no ?key= in the URL
    assert server.last_headers["x-goog-api-key"] == KEY
    assert "Authorization" not in server.last_headers
    assert server.requests == 1


async def test_thoughts_are_counted_but_kept_out_of_the_text(server):
    thinking = {"thinkingConfig": {"thinkingBudget": 12, "includeThoughts": True}}
    async with client(server) as p:
        reply = await p.complete(ChatRequest(messages=ASK.messages, max_tokens=100, extra=thinking))
    # the thinking budget is room beside the answer's: thoughts count against maxOutputTokens
    assert server.last_body["generationConfig"] == {"maxOutputTokens": 100 + 12, **thinking}
    assert reply.text == ANSWER and fake.THOUGHT_SUMMARY not in reply.text and reply.reasoned
    # completion tokens include the thoughts, which Gemini bills as output
    assert (reply.prompt_tokens, reply.completion_tokens, reply.reasoning_tokens) == (5, 5 + 12, 12)


async def test_text_joins_the_first_candidates_non_thought_parts():
    parts = [
        {"text": "Looking for the number.", "thought": True},
        {"text": "The answer "},
        {"text": "is 42", "thoughtSignature": "c2lnbmF0dXJl"},
        {"functionCall": {"name": "f", "args": {}}},
    ]
    payload = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"},
            {"content": {"role": "model", "parts": [{"text": "second candidate"}]}},
        ],
        "usageMetadata": {
            "promptTokenCount": 9,
            "candidatesTokenCount": 4,
            "thoughtsTokenCount": 7,
        },
        "modelVersion": "gemini-2.5-flash-001",
    }
    async with fake.FakeGeminiServer(lambda body: payload) as srv, client(srv) as p:
        reply = await p.complete(ASK)
    assert (reply.text, reply.finish_reason, reply.model_version) == (
        "The answer is 42",
        "stop",
        "gemini-2.5-flash-001",
    )
    assert (reply.prompt_tokens, reply.completion_tokens, reply.reasoning_tokens) == (9, 4 + 7, 7)


async def test_thinking_that_spends_the_whole_budget_is_an_empty_length_reply():
    # On Gemini 2.5 thoughts count against maxOutputTokens: a small budget can hold no answer.
    async with fake.FakeGeminiServer(lambda b: ANSWER, thinking_tokens=30) as srv, client(srv) as p:
        reply = await p.complete(ASK)  # max_tokens=20 < 30 tokens of thinking
        assert (reply.text, reply.finish_reason) == ("", "length")
        assert (reply.completion_tokens, reply.reasoning_tokens) == (20, 20)
        assert p.reasoning  # it thinks, though its name did not say so: room from now on
        off = {"thinkingConfig": {"thinkingBudget": 0}}
        reply = await p.complete(ChatRequest(messages=ASK.messages, max_tokens=3, extra=off))
        assert (reply.text, reply.finish_reason, reply.reasoning_tokens) == (
            "The magic number",
            "length",
            0,
        )


async def test_extra_maps_onto_generation_config_and_request_fields(server):
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    extra = {
        "thinking_config": {"thinkingBudget": 0},  # snake_case key → camelCase field
        "topK": 40,
        "maxOutputTokens": 64,  # wins over max_tokens
        "seed": None,  # unset: not sent
        "safety_settings": safety,  # a request-level field
        "generationConfig": {"stopSequences": ["\n\n"]},  # merged as is
    }
    async with client(server) as p:
        await p.complete(ChatRequest(messages=ASK.messages, max_tokens=20, extra=extra))
        assert server.last_body["safetySettings"] == safety
        assert server.last_body["generationConfig"] == {
            "maxOutputTokens": 64,
            "thinkingConfig": {"thinkingBudget": 0},
            "topK": 40,
            "stopSequences": ["\n\n"],
        }
        await p.complete(ChatRequest(messages=ASK.messages))
        assert "generationConfig" not in server.last_body and "systemInstruction" not in (
            server.last_body
        )


async def test_unknown_generation_field_is_refused_by_the_api_as_bad_request(server):
    request = ChatRequest(messages=ASK.messages, extra={"reasoning_effort": "low"})
    err = await fail(server, request=request)
    assert err.kind == base.BAD_REQUEST and not err.retryable and err.status == 400
    assert 'Unknown name "reasoningEffort"' in str(err) and "INVALID_ARGUMENT" in str(err)


async def test_consecutive_turns_of_a_role_are_merged_and_unknown_roles_refused(server):
    messages = (Message("user", "Haystack."), Message("user", "Question?"))
    async with client(server) as p:
        await p.complete(ChatRequest(messages=messages))
        assert server.last_body["contents"] == [
            {"role": "user", "parts": [{"text": "Haystack."}, {"text": "Question?"}]}
        ]
        with pytest.raises(ProviderError) as info:
            await p.complete(ChatRequest(messages=(Message("tool", "{}"),)))
    assert info.value.kind == base.BAD_REQUEST and not info.value.retryable
    assert "'tool'" in str(info.value)
    assert server.requests == 1


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("MAX_TOKENS", "length"),
        ("OTHER", "other"),
        ("MALFORMED_FUNCTION_CALL", "tool_calls"),
        ("LANGUAGE", "content_filter"),
        ("SOMETHING_NEW", "SOMETHING_NEW"),  # unknown: kept verbatim, never guessed
        (None, None),
    ],
)
async def test_finish_reasons_and_missing_content_or_usage(finish, expected):
    candidate: dict[str, Any] = {"index": 0}
    if finish:
        candidate["finishReason"] = finish
    payload = {"candidates": [candidate]}
    async with fake.FakeGeminiServer(lambda body: payload) as srv, client(srv) as p:
        reply = await p.complete(ASK)
    assert (reply.text, reply.finish_reason) == ("", expected)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.reasoning_tokens) == (None,) * 3
    assert reply.model_version is None


# --- countTokens ------------------------------------------------------------------------------


async def test_count_tokens_and_count_prompt_tokens(server):
    messages = (Message("system", "Be brief."), Message("user", "What is the magic number?"))
    async with client(server) as p:
        assert await p.count_tokens("one two three") == 3
        assert server.last_count_body == {
            "contents": [{"role": "user", "parts": [{"text": "one two three"}]}]
        }
        assert server.last_path == f"/v1beta/models/{MODEL}:countTokens"
        counted = await p.count_prompt_tokens(messages)
        assert server.last_count_body == {
            "generateContentRequest": {
                "model": f"models/{MODEL}",
                "contents": [{"role": "user", "parts": [{"text": "What is the magic number?"}]}],
                "systemInstruction": {"parts": [{"text": "Be brief."}]},
            }
        }
        reply = await p.complete(ChatRequest(messages=messages))
    assert counted == reply.prompt_tokens == 7  # what countTokens says is what is billed
    assert server.count_requests == 2 and server.requests == 1


async def test_count_tokens_waits_out_a_short_429_and_reports_errors(server):
    async with client(server, model="models/gemini-test") as p:
        server.add_faults(fake.Fault(fake.RATE_LIMIT, retry_delay="0.1s"))
        assert await p.count_tokens("a b") == 2
        assert server.count_requests == 2
        server.add_faults(fake.UNAVAILABLE)
        with pytest.raises(ProviderError) as info:
            await p.count_tokens("a b")
    assert info.value.kind == base.SERVER_ERROR and info.value.retryable


async def test_count_tokens_without_total_is_zero_or_a_bad_response():
    replies = iter([{"totalTokens": 0}, {}, {"totalTokens": "many"}])
    async with fake.FakeGeminiServer() as srv, client(srv) as p:
        srv.count = lambda body, resource: next(replies)  # type: ignore[method-assign]
        assert await p.count_tokens("") == 0
        assert await p.count_tokens("") == 0  # proto3 JSON leaves a 0 out
        with pytest.raises(ProviderError) as info:
            await p.count_tokens("")
    assert info.value.kind == base.BAD_RESPONSE and "totalTokens" in str(info.value)


# --- rate limits ------------------------------------------------------------------------------


async def test_429_retry_delay_is_waited_out_once(server):
    server.add_faults(fake.Fault(fake.RATE_LIMIT, retry_delay="0.3s"))
    async with client(server) as p:
        start = time.perf_counter()
        reply = await p.complete(ASK)
        elapsed = time.perf_counter() - start
    assert reply.text == ANSWER
    assert elapsed >= 0.3
    assert reply.latency_s < elapsed - 0.25  # latency is the answering request's, not the wait
    assert server.requests == 2 and server.fault_counts[fake.RATE_LIMIT] == 1


async def test_retry_after_header_is_honoured_too(server):
    server.add_faults(fake.Fault(fake.RATE_LIMIT, retry_delay=None, retry_after="0.2"))
    async with client(server) as p:
        start = time.perf_counter()
        await p.complete(ASK)
    assert time.perf_counter() - start >= 0.2
    assert server.requests == 2


async def test_429_twice_is_rate_limited(server):
    limited = fake.Fault(fake.RATE_LIMIT, retry_delay="0.1s")
    err = await fail(server, limited, limited)
    assert err.kind == base.RATE_LIMITED and err.retryable
    assert err.status == 429 and err.retry_after_s == pytest.approx(0.1)
    assert str(err).startswith(f"HTTP 429 from {server.base_url}: RESOURCE_EXHAUSTED [")
    assert fake.MINUTE_QUOTA_ID in str(err) and "\n" not in str(err)
    assert server.requests == 2


@pytest.mark.parametrize("retry_delay", ["120s", None])
async def test_429_not_waited_when_too_long_or_unknown(server, retry_delay):
    err = await fail(
        server, fake.Fault(fake.RATE_LIMIT, retry_delay=retry_delay), max_retry_after_s=60
    )
    assert err.kind == base.RATE_LIMITED and err.retryable
    assert err.retry_after_s == (120 if retry_delay else None)
    assert server.requests == 1


async def test_a_daily_quota_is_not_retryable(server):
    err = await fail(server, fake.Fault(fake.DAILY_QUOTA, retry_delay="0.1s"))
    assert err.kind == base.RATE_LIMITED and not err.retryable and err.retry_after_s is None
    assert fake.DAILY_QUOTA_ID in str(err)
    assert server.requests == 1


def test_retry_delay_forms():
    def err(*details: dict[str, Any], message: str = "quota") -> dict[str, Any]:
        return {"message": message, "details": list(details)}

    info = "type.googleapis.com/google.rpc.RetryInfo"
    assert _retry_delay(err({"@type": info, "retryDelay": "7s"}), {}) == 7
    assert _retry_delay(err({"@type": info, "retryDelay": "45.837906927s"}), {}) == 45.837906927
    assert _retry_delay(err({"@type": info, "retryDelay": "2s"}), {"Retry-After": "5"}) == 5
    assert _retry_delay(err({"@type": info, "retryDelay": "soon"}), {}) is None
    assert _retry_delay(err(message="Please retry in 26.66s."), {}) == 26.66
    assert _retry_delay(err(message="Please retry in 500ms."), {}) == 0.5
    assert _retry_delay(err(), {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert _retry_delay(err(), {}) is None


# --- other errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "kind", "label"),
    [
        (fake.SERVER_ERROR, 500, base.SERVER_ERROR, "INTERNAL"),
        (fake.UNAVAILABLE, 503, base.SERVER_ERROR, "UNAVAILABLE"),
        (fake.DEADLINE, 504, base.TIMEOUT, "DEADLINE_EXCEEDED"),
    ],
)
async def test_5xx_is_retryable(server, fault, status, kind, label):
    err = await fail(server, fault)
    assert err.kind == kind and err.retryable and err.status == status
    assert str(err).startswith(f"HTTP {status} from {server.base_url}: {label}: ")
    assert server.requests == 1  # no retry loop in the client


async def test_too_many_tokens_is_context_too_long_and_not_retryable(server):
    err = await fail(server, fake.CONTEXT_LENGTH)
    assert err.kind == base.CONTEXT_TOO_LONG and not err.retryable and err.status == 400
    assert "exceeds the maximum number of tokens allowed (1048576)" in str(err)
    assert len(str(err)) < 300 and "\n" not in str(err)


async def test_a_prompt_longer_than_the_window_is_context_too_long():
    async with fake.FakeGeminiServer(max_input_tokens=4) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.CONTEXT_TOO_LONG
    assert "The input token count (5) exceeds" in str(info.value)


@pytest.mark.parametrize(
    ("fault", "status"), [(fake.UNAUTHORIZED, 401), (fake.KEY_INVALID, 400), (fake.FORBIDDEN, 403)]
)
async def test_auth_failures_are_auth_and_never_show_the_key(server, fault, status):
    err = await fail(server, fault)
    assert err.kind == base.AUTH and not err.retryable and err.status == status
    assert KEY not in str(err) and KEY not in repr(err)


async def test_wrong_key_is_auth_and_the_sent_key_is_scrubbed(server):
    wrong = "AIzaSy-wrong-key-9876543210"
    err = await fail(server, api_key=wrong)
    assert err.kind == base.AUTH and "UNAUTHENTICATED" in str(err)
    assert wrong not in str(err) and "***" in str(err)  # the fake echoes the key it got


async def test_unknown_model_and_wrong_path_are_bad_requests():
    async with fake.FakeGeminiServer(models={MODEL}) as srv:
        err = await fail(srv, model="gemini-nope")
        assert err.kind == base.BAD_REQUEST and err.status == 404 and not err.retryable
        assert "models/gemini-nope is not found" in str(err)
        err = await fail(srv, api_version="v9")
        assert err.kind == base.BAD_REQUEST and err.status == 404


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
    async with client(fake.FakeGeminiServer(), base_url=url) as p:
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


@pytest.mark.parametrize(
    ("code", "kind"), [(500, base.SERVER_ERROR), (429, base.RATE_LIMITED), (None, "provider_error")]
)
async def test_a_200_carrying_an_error_is_the_error_its_code_says(code, kind):
    error_body = {"error": {"code": code, "message": "upstream failed", "status": "INTERNAL"}}
    async with fake.FakeGeminiServer(lambda body: error_body) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == kind and "INTERNAL: upstream failed" in str(info.value)
    assert info.value.retryable and info.value.status == 200


@pytest.mark.parametrize("reason", ["SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "OTHER"])
async def test_a_blocked_prompt_is_a_filtered_reply(server, reason):
    server.add_faults(fake.Fault(fake.BLOCKED, block_reason=reason))
    async with client(server) as p:
        reply = await p.complete(ASK)
    assert (reply.text, reply.finish_reason) == ("", "content_filter")
    assert (reply.prompt_tokens, reply.completion_tokens) == (5, 0)  # proto3 leaves 0s out


async def test_no_candidates_without_a_block_reason_is_a_retryable_empty_response():
    async with fake.FakeGeminiServer(lambda body: {"candidates": []}) as srv, client(srv) as p:
        with pytest.raises(ProviderError) as info:
            await p.complete(ASK)
    assert info.value.kind == base.EMPTY_RESPONSE and info.value.retryable
    assert "no candidates" in str(info.value)


EXPECTED_KIND = {
    fake.Fault(fake.RATE_LIMIT, retry_delay="100s"): base.RATE_LIMITED,
    fake.SERVER_ERROR: base.SERVER_ERROR,
    fake.UNAVAILABLE: base.SERVER_ERROR,
    fake.DEADLINE: base.TIMEOUT,
    fake.CONTEXT_LENGTH: base.CONTEXT_TOO_LONG,
    fake.UNAUTHORIZED: base.AUTH,
    fake.KEY_INVALID: base.AUTH,
    fake.FORBIDDEN: base.AUTH,
    fake.Fault(fake.SLOW, delay_s=1): base.TIMEOUT,
    fake.RESET: base.CONNECTION,
    fake.TRUNCATED: base.BAD_RESPONSE,
    fake.GARBAGE: base.BAD_RESPONSE,
}


async def test_every_fault_maps_to_its_kind_and_never_shows_the_key(server):
    secret_header = {"X-Goog-User-Token": "hdr-SECRET-value"}
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
    provider = GeminiProvider(
        name="x", base_url=server.base_url, model="m", api_key=KEY, headers=secret_header
    )
    assert "SECRET" not in repr(provider) and "SECRET" not in str(provider)


def test_repr_hides_credentials_in_the_base_url():
    provider = GeminiProvider(
        name="g", base_url="https://user:pw-SECRET-1@proxy.example/gemini?key=q-SECRET-2", model="m"
    )
    assert "SECRET" not in repr(provider)
    assert provider._where == "https://proxy.example/gemini"
    assert provider._scrub("pw-SECRET-1 q-SECRET-2") == "*** ***"


# --- concurrency, sessions, registry ----------------------------------------------------------


async def test_50_concurrent_requests_all_reach_the_server_at_once():
    async with fake.FakeGeminiServer(delay_s=0.2) as srv, client(srv, max_connections=50) as p:
        replies = await asyncio.gather(*(p.complete(ASK) for _ in range(50)))
    assert len(replies) == 50 and srv.requests == 50
    assert srv.max_in_flight >= 40


async def test_max_connections_caps_requests_in_flight():
    async with fake.FakeGeminiServer(delay_s=0.2) as srv, client(srv, max_connections=4) as p:
        await asyncio.gather(*(p.complete(ASK) for _ in range(8)))
    assert srv.max_in_flight == 4


async def test_fault_rates_are_seeded_by_request():
    async def run() -> list[str]:
        out = []
        async with (
            fake.FakeGeminiServer(rates={fake.UNAVAILABLE: 0.3}, seed=3) as srv,
            client(srv) as p,
        ):
            for i in range(40):
                try:
                    await p.complete(ChatRequest(messages=(Message("user", f"q{i}"),)))
                    out.append("ok")
                except ProviderError as e:
                    out.append(e.kind)
            assert srv.fault_counts[fake.UNAVAILABLE] == out.count(base.SERVER_ERROR)
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
    with fake.FakeGeminiServer(lambda body: "hi") as srv:

        async def go() -> str:
            async with client(srv) as p:
                return (await p.complete(ASK)).text

        assert asyncio.run(go()) == "hi" and asyncio.run(go()) == "hi"
        assert srv.requests == 2


def test_registry():
    provider = create_provider("gemini", name="g", model="gemini-2.5-flash", api_key=KEY)
    assert isinstance(provider, GeminiProvider) and isinstance(provider, base.Provider)
    assert provider.base_url == "https://generativelanguage.googleapis.com"
    assert KEY not in repr(provider)


# --- the real API -----------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("GEMINI_API_KEY"), reason="GEMINI_API_KEY is not set")
async def test_live_gemini():
    provider = GeminiProvider(
        name="live",
        model=os.environ.get("GEMINI_MODEL", "gemini-2.5-flash"),
        api_key=os.environ["GEMINI_API_KEY"],
        timeout_s=120,
    )
    messages = (
        Message("system", "Answer with digits only."),
        Message("user", "The magic number is 4817. What is the magic number?"),
    )
    try:
        reply = await provider.complete(
            ChatRequest(messages=messages, max_tokens=2048, temperature=0.0)
        )
        assert "4817" in reply.text and reply.finish_reason == "stop"
        assert reply.prompt_tokens and reply.completion_tokens and reply.model_version
        counted = await provider.count_prompt_tokens(messages)
        assert abs(counted - reply.prompt_tokens) <= 2
        assert 0 < await provider.count_tokens("The magic number is 4817.") < 20
    finally:
        await provider.aclose()


async def test_the_flex_tier_is_sent_as_service_tier(server):
    async with client(server, service_tier="flex") as p:
        await p.complete(ASK)
    assert server.last_body["serviceTier"] == "flex"
    assert "serviceTier" not in server.last_body.get("generationConfig", {})
