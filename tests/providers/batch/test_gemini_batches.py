"""GeminiBatches against a fake Gemini batch mode, and the fake's objects and implicit caching."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from needlescope.errors import ProviderError
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.batch import BatchClient, batch_client
from needlescope.providers.batch import gemini as gemini_batch
from needlescope.providers.batch.base import (
    BATCH_CANCELED,
    BATCH_EXPIRED,
    BATCH_FAILED,
    BatchLimits,
    BatchRequest,
    BatchResult,
    BatchState,
)
from needlescope.providers.batch.gemini import GeminiBatches
from needlescope.providers.gemini import GeminiProvider
from tests.support import gemini_server as fake
from tests.support.batch_clients import failure, items, opened, run
from tests.support.gemini_batch_server import (
    CANCELLED,
    EXPIRED,
    FAILED,
    PENDING,
    RUNNING,
    START,
    SUCCEEDED,
    WINDOW,
    FakeGeminiBatchServer,
    sdk_batch_job,
    sdk_batch_list,
)

KEY = "AIzaSy-test-SECRET-0123456789abcdef"
MODEL = "gemini-2.5-flash"
PREFIX = " ".join(f"fact{i}" for i in range(1100))  # 1100 words: 1100 tokens to the fake
SHORT = " ".join(PREFIX.split()[:1000])  # under Flash's minimum of 1024


def ask(
    question: str, max_tokens: int = 20, system: str | None = None, **extra: Any
) -> ChatRequest:
    messages = (Message("system", system),) if system else ()
    return ChatRequest((*messages, Message("user", question)), max_tokens=max_tokens, extra=extra)


def echo(body: dict[str, Any]) -> str:
    return f"You asked: {body['contents'][-1]['parts'][-1]['text']}"


def provider(srv: FakeGeminiBatchServer, **kwargs: Any) -> GeminiProvider:
    defaults = {"name": "fake", "base_url": srv.base_url, "model": MODEL, "api_key": KEY}
    return GeminiProvider(**defaults | {"reasoning": False, "max_retry_after_s": 0} | kwargs)


def batches(
    srv: FakeGeminiBatchServer, **kwargs: Any
) -> AbstractAsyncContextManager[GeminiBatches]:
    return opened(provider(srv, **kwargs), GeminiBatches)


async def synchronous(
    srv: FakeGeminiBatchServer, requests: dict[str, ChatRequest]
) -> dict[str, Any]:
    """Each request's reply (or error) by the synchronous path, from a fresh provider."""
    p = provider(srv)
    out: dict[str, Any] = {}
    try:
        for custom_id, request in requests.items():
            try:
                out[custom_id] = await p.complete(request)
            except ProviderError as e:
                out[custom_id] = e
    finally:
        await p.aclose()
    return out


def reply_of(result: BatchResult) -> Reply:
    assert result.error is None, result.error
    assert result.reply is not None
    return result.reply


def error_of(result: BatchResult) -> ProviderError:
    assert result.reply is None and result.error is not None
    return result.error


# --- the round trip ---------------------------------------------------------------------------


async def test_batch_client_of_a_gemini_provider_is_gemini_batches():
    async with FakeGeminiBatchServer() as srv:
        p = provider(srv)
        client = batch_client(p)
        assert isinstance(client, GeminiBatches) and isinstance(client, BatchClient)
        await p.aclose()


async def test_round_trip_equals_the_synchronous_replies():
    requests = {
        "plain": ask("What is the magic number?"),
        "settings": ask("Name a colour", system="Be brief.", temperature=0.3, top_p=0.9),
        "cut": ask("one two three four five six", max_tokens=3),
        "think": ask("Think first", thinking_config={"thinkingBudget": 8, "includeThoughts": True}),
    }
    async with FakeGeminiBatchServer(echo, model_version="gemini-2.5-flash-001") as srv:
        expected = await synchronous(srv, requests)
        sync_body = srv.last_body
        async with batches(srv) as client:
            results = await run(client, items(requests))
            assert client.provider.reasoning  # a reply thought: later requests leave it room
    assert set(results) == set(requests)
    for custom_id, result in results.items():
        reply, sync = reply_of(result), expected[custom_id]
        assert reply.latency_s is None and sync.latency_s is not None
        assert reply == replace(sync, latency_s=None)
    assert results["cut"].reply and results["cut"].reply.finish_reason == base.LENGTH
    think = reply_of(results["think"])
    assert think.reasoning_tokens == 8 and think.reasoned
    assert think.fingerprint and think.fingerprint.model_version == "gemini-2.5-flash-001"
    assert think.fingerprint.sampling and '"thinkingBudget":8' in think.fingerprint.sampling
    sent = srv.last_batch_body["batch"]["inputConfig"]["requests"]["requests"]  # type: ignore[index]
    assert sent[-1]["request"] == sync_body  # the body complete() sends, as it is
    assert sent[-1]["metadata"]["key"] == "think"


async def test_request_body_and_its_measured_bytes():
    async with FakeGeminiBatchServer(echo) as srv, batches(srv) as client:
        batch = items({"a": ask("one"), "b": ask("two", temperature=0.5)})
        state = await client.submit(batch, "tag-1")
        body = srv.last_batch_body
    assert state.tag == "tag-1" and state.status == PENDING and not state.ended
    assert state.counts == {"succeeded": 0, "errored": 0, "processing": 2}
    assert state.request_count == 2 and state.created_at == START + 1
    assert body is not None and list(body) == ["batch"]
    assert body["batch"]["displayName"] == "tag-1"
    entries = body["batch"]["inputConfig"]["requests"]["requests"]
    assert [e["metadata"]["key"] for e in entries] == ["a", "b"]
    assert entries[1]["metadata"]["sampling"] == (
        '{"generationConfig":{"maxOutputTokens":20,"temperature":0.5}}'
    )
    assert [client.request_bytes(i) for i in batch] == [
        len(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode()) + 1 for e in entries
    ]


async def test_states_advance_pending_running_succeeded_with_counts():
    async with (
        FakeGeminiBatchServer(echo, group=2, auto_advance=False) as srv,
        batches(srv) as client,
    ):
        state = await client.submit(items({f"r{i}": ask(f"q{i}") for i in range(5)}), "t")
        seen = [(state.status, state.counts)]
        while not state.ended:
            await srv.advance(state.batch_id)
            state = await client.state(state.batch_id)
            seen.append((state.status, state.counts))
    assert [s for s, _ in seen] == [PENDING, RUNNING, RUNNING, RUNNING, SUCCEEDED]
    assert seen[2][1] == {"succeeded": 2, "errored": 0, "processing": 3}
    assert seen[-1][1] == {"succeeded": 5, "errored": 0}
    assert state.request_count == 5 and state.error is None


async def test_results_come_in_seeded_random_order_and_match_by_key():
    requests = {f"r{i}": ask(f"question {i}") for i in range(8)}
    async with FakeGeminiBatchServer(echo, seed=3) as srv, batches(srv) as client:
        state = await client.submit(items(requests), "t")
        await srv.finish(state.batch_id)
        listed = [r.custom_id for r in await client.results(state.batch_id)]
    assert sorted(listed) == sorted(requests) and listed != list(requests)
    async with FakeGeminiBatchServer(echo, seed=3) as srv, batches(srv) as client:
        results = await run(client, items(requests))
    assert [r for r in results] == listed  # the same seed, the same order
    for custom_id, result in results.items():
        assert reply_of(result).text == f"You asked: question {custom_id[1:]}"


async def test_submissions_are_counted_per_key():
    async with FakeGeminiBatchServer(echo) as srv, batches(srv) as client:
        await client.submit(items({"a": ask("x"), "b": ask("y")}), "one")
        await client.submit(items({"a": ask("x")}), "two")
    assert srv.submitted == {"a": 2, "b": 1}


# --- per-request errors -----------------------------------------------------------------------

SCRIPTED = (
    fake.CONTEXT_LENGTH,
    fake.RATE_LIMIT,
    fake.SERVER_ERROR,
    fake.UNAVAILABLE,
    fake.DEADLINE,
    fake.KEY_INVALID,
    fake.FORBIDDEN,
    fake.UNAUTHORIZED,
)


async def test_request_errors_get_the_kinds_of_the_synchronous_path():
    requests = {kind: ask(f"about {kind}") for kind in SCRIPTED}
    async with FakeGeminiBatchServer(echo) as srv:
        srv.add_faults(*SCRIPTED)
        expected = await synchronous(srv, requests)
        srv.outcomes = {kind: kind for kind in SCRIPTED}
        async with batches(srv) as client:
            results = await run(client, items(requests))
    for kind in SCRIPTED:
        error, sync = error_of(results[kind]), expected[kind]
        assert isinstance(sync, ProviderError)
        assert (error.kind, error.retryable) == (sync.kind, sync.retryable), kind
        assert f"request {kind} of batch " in str(error) and "\n" not in str(error)
    assert error_of(results[fake.CONTEXT_LENGTH]).kind == base.CONTEXT_TOO_LONG
    assert error_of(results[fake.RATE_LIMIT]).retry_after_s == 1.0
    assert error_of(results[fake.KEY_INVALID]).kind == base.AUTH


async def test_blocked_invalid_and_too_long_requests_read_as_synchronously():
    requests = {
        "blocked": ask("something unsafe"),
        "invalid": ask("hello", bogus_field=1),  # an unknown generationConfig field
        "long": ask("a b c d e f g h"),
        "fine": ask("hi"),
    }
    async with FakeGeminiBatchServer(echo, max_input_tokens=5) as srv:
        srv.add_faults(fake.BLOCKED)
        expected = await synchronous(srv, requests)
        srv.outcomes = {"blocked": fake.BLOCKED}
        async with batches(srv) as client:
            results = await run(client, items(requests))
    blocked = reply_of(results["blocked"])
    assert blocked.finish_reason == base.CONTENT_FILTER
    assert blocked == replace(expected["blocked"], latency_s=None)
    assert error_of(results["invalid"]).kind == expected["invalid"].kind == base.BAD_REQUEST
    assert error_of(results["long"]).kind == expected["long"].kind == base.CONTEXT_TOO_LONG
    assert reply_of(results["fine"]).text == "You asked: hi"


# --- batches that end early -------------------------------------------------------------------


async def test_a_failed_batch_fails_every_request():
    async with FakeGeminiBatchServer(echo, auto_advance=False) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("x"), "b": ask("y")}), "t")
        srv.fail(state.batch_id, "The batch failed: an internal error.")
        await srv.advance(state.batch_id)
        state = await client.state(state.batch_id)
        results = {r.custom_id: r for r in await client.results(state.batch_id)}
    assert state.status == FAILED and state.ended
    assert state.error == "INTERNAL: The batch failed: an internal error."
    assert state.counts == {"succeeded": 0, "errored": 2}
    for custom_id in ("a", "b"):
        error = error_of(results[custom_id])
        assert error.kind == BATCH_FAILED and "an internal error" in str(error)


async def test_a_batch_canceled_part_way_keeps_what_ran():
    requests = {f"r{i}": ask(f"q{i}") for i in range(5)}
    async with (
        FakeGeminiBatchServer(echo, group=2, auto_advance=False) as srv,
        batches(srv) as client,
    ):
        state = await client.submit(items(requests), "t")
        await srv.advance(state.batch_id, 2)  # running, then two requests run
        state = await client.cancel(state.batch_id)
        results = {r.custom_id: r for r in await client.results(state.batch_id)}
    assert state.status == CANCELLED and state.ended
    assert state.counts == {"succeeded": 2, "errored": 0, "canceled": 3}
    replies = [r for r in results.values() if r.reply is not None]
    canceled = [error_of(r) for r in results.values() if r.reply is None]
    assert len(replies) == 2 and len(canceled) == 3 and set(results) == set(requests)
    assert all(e.kind == BATCH_CANCELED and not e.retryable for e in canceled)


async def test_a_batch_canceled_while_pending_cancels_every_request():
    async with FakeGeminiBatchServer(echo, auto_advance=False) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("x")}), "t")
        state = await client.cancel(state.batch_id)
        results = await client.results(state.batch_id)
    assert state.counts == {"succeeded": 0, "errored": 0, "canceled": 1}
    assert [error_of(r).kind for r in results] == [BATCH_CANCELED]


async def test_an_expired_batch_expires_its_requests():
    async with FakeGeminiBatchServer(echo, group=1) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("x"), "b": ask("y")}), "t")
        await srv.advance(state.batch_id, 2)  # one request has run
        srv.tick(WINDOW)
        state = await client.state(state.batch_id)
        results = await client.results(state.batch_id)
    assert state.status == EXPIRED and state.ended
    assert state.counts == {"succeeded": 1, "errored": 0, "expired": 1}
    errors = [error_of(r) for r in results]  # an expired batch has no results to retrieve
    assert [e.kind for e in errors] == [BATCH_EXPIRED] * 2 and all(e.retryable for e in errors)


async def test_results_of_a_running_batch_are_refused():
    async with FakeGeminiBatchServer(echo, auto_advance=False) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("x")}), "t")
        error = await failure(client.results(state.batch_id))
    assert error.kind == base.BAD_REQUEST and "has not ended (BATCH_STATE_PENDING)" in str(error)


# --- listing after a restart ------------------------------------------------------------------


async def test_listed_finds_batches_by_display_name_after_a_restart(monkeypatch):
    monkeypatch.setattr(gemini_batch, "_PAGE", 2)  # three pages of batches
    requests = {"a": ask("x", temperature=0.2), "b": ask("y")}
    async with FakeGeminiBatchServer(echo) as srv:
        async with batches(srv) as before:
            made = [await before.submit(items(requests), f"sweep-{i}") for i in range(5)]
            first = await run(before, items(requests), "sweep-5")
        async with batches(srv) as after:  # a new process: no memory of the submissions
            listed = await after.listed()
            recent = await after.listed(since=made[3].created_at)
            found = next(s for s in listed if s.tag == "sweep-5")
            again = {r.custom_id: r for r in await after.results(found.batch_id)}
    assert [s.tag for s in listed] == [f"sweep-{i}" for i in range(5, -1, -1)]
    assert [s.tag for s in recent] == ["sweep-5", "sweep-4", "sweep-3"]
    assert all(s.created_at is not None for s in listed)
    assert again == first  # the fingerprint's sampling too, echoed by the request's metadata
    assert reply_of(again["a"]).fingerprint.sampling == (  # type: ignore[union-attr]
        '{"generationConfig":{"maxOutputTokens":20,"temperature":0.2}}'
    )


async def test_unanswered_requests_are_reported_once_remembered():
    async with FakeGeminiBatchServer(echo, auto_advance=False) as srv:
        requests = items({"a": ask("x"), "b": ask("y")})
        async with batches(srv) as before:
            state = await before.submit(requests, "t")
            await before.cancel(state.batch_id)
        async with batches(srv) as after:
            assert await after.results(state.batch_id) == []  # it never saw the keys
            after.remember(f"batches/{state.batch_id}", requests)
            results = await after.results(state.batch_id)
    assert sorted(r.custom_id for r in results) == ["a", "b"]


# --- servers without batch mode, and the key ----------------------------------------------------


async def test_a_server_without_batch_mode_is_one_line():
    async with FakeGeminiBatchServer(echo, batch_mode=False) as srv, batches(srv) as client:
        errors = [
            await failure(client.submit(items({"a": ask("x")}), "t")),
            await failure(client.state("abc")),
            await failure(client.listed()),
            await failure(client.cancel("abc")),
        ]
        assert await client.provider.complete(ask("still here"))  # generateContent still works
    for error in errors:
        assert error.kind == base.BAD_REQUEST and not error.retryable and error.status == 404
        assert "has no Gemini batch mode (HTTP 404 on " in str(error) and "\n" not in str(error)
    assert "POST /v1beta/models/gemini-2.5-flash:batchGenerateContent" in str(errors[0])


async def test_an_unknown_batch_or_model_is_named():
    async with FakeGeminiBatchServer(echo, models={"other"}) as srv, batches(srv) as client:
        missing = await failure(client.state("batches/nope"))
        model = await failure(client.submit(items({"a": ask("x")}), "t"))
    assert missing.kind == base.BAD_REQUEST and " has no batch nope: HTTP 404 " in str(missing)
    assert "has no batch mode for gemini-2.5-flash: " in str(model)


async def test_the_key_is_never_in_a_message():
    async with (
        FakeGeminiBatchServer(echo, api_key="another-key-0123456789") as srv,
        batches(srv) as client,
    ):  # the server's 401 echoes the key it was sent
        errors = [
            await failure(client.submit(items({"a": ask("x")}), "t")),
            await failure(client.state("abc")),
            await failure(client.listed()),
            await failure(client.cancel("abc")),
            await failure(client.results("abc")),
        ]
    for error in errors:
        assert error.kind == base.AUTH and KEY not in str(error) and "***" in str(error)
    async with FakeGeminiBatchServer(echo, batch_mode=False) as srv, batches(srv) as client:
        error = await failure(client.state("abc"))
        assert KEY not in str(error) and KEY not in repr(client.provider)


# --- limits -----------------------------------------------------------------------------------


async def test_limits_are_checked_before_sending(monkeypatch):
    async with FakeGeminiBatchServer(echo) as srv, batches(srv) as client:
        client.limits = BatchLimits(max_requests=2, max_bytes=10_000)
        over = await failure(client.submit(items({f"r{i}": ask("x") for i in range(3)}), "t"))
        empty = await failure(client.submit([], "t"))
        twice = await failure(client.submit([BatchRequest("a", ask("x"))] * 2, "t"))
        monkeypatch.setattr(gemini_batch, "MAX_BODY_BYTES", 300)
        big = await failure(client.submit(items({"a": ask("word " * 100)}), "t"))
        assert srv.batch_requests == 0
    assert over.kind == big.kind == base.REQUEST_TOO_LARGE
    assert empty.kind == twice.kind == base.BAD_REQUEST
    assert "over the 300 limit of an inline batch" in str(big)
    assert GeminiBatches.limits.max_bytes < 20 * 1024**2  # room for the envelope


async def test_the_fake_enforces_its_limits():
    async with (
        FakeGeminiBatchServer(echo, max_batch_requests=2, max_batch_bytes=1000) as srv,
        batches(srv) as client,
    ):
        many = await failure(client.submit(items({f"r{i}": ask("x") for i in range(3)}), "t"))
        big = await failure(client.submit(items({"a": ask("word " * 300)}), "t"))
    assert many.kind == base.BAD_REQUEST and "over the limit of 2" in str(many)
    assert big.kind == base.REQUEST_TOO_LARGE and "payload size exceeds" in str(big)


# --- the fake's objects against google-genai ----------------------------------------------------


async def test_operations_validate_as_the_sdk_reads_them():
    async with FakeGeminiBatchServer(echo, group=1, auto_advance=False) as srv:
        srv.outcomes = {"bad": fake.SERVER_ERROR}
        async with batches(srv) as client:
            p = client.provider
            url = f"{srv.base_url}/v1beta/batches"
            state = await client.submit(items({"ok": ask("hello"), "bad": ask("x")}), "sdk")
            _, pending = await p._get(f"{url}/{state.batch_id}")
            await srv.finish(state.batch_id)
            _, done = await p._get(f"{url}/{state.batch_id}")
            other = await client.submit(items({"c": ask("y")}), "other")
            await srv.advance(other.batch_id, 1)
            await client.cancel(other.batch_id)
            _, page = await p._get(f"{url}?pageSize=1")
    assert sdk_batch_job(pending).state.name == "JOB_STATE_PENDING"
    job = sdk_batch_job(done)
    assert job.name == f"batches/{state.batch_id}" and job.display_name == "sdk"
    assert job.state.name == "JOB_STATE_SUCCEEDED" and job.model == f"models/{MODEL}"
    assert job.create_time and job.create_time.timestamp() == state.created_at
    by_key = {r.metadata["key"]: r for r in job.dest.inlined_responses}
    assert by_key["ok"].response.text == "You asked: hello"
    assert by_key["bad"].error.code == 13 and by_key["bad"].response is None
    assert done["metadata"]["batchStats"] == {
        "requestCount": "2",
        "successfulRequestCount": "1",
        "failedRequestCount": "1",
    }
    listing = sdk_batch_list(page)
    assert [j.display_name for j in listing.batch_jobs] == ["other"]
    assert listing.batch_jobs[0].state.name == "JOB_STATE_CANCELLED"
    assert page["operations"][0]["error"]["code"] == 1 and page["nextPageToken"]


def test_real_shaped_operations_read_as_states():
    """Operations as Gemini sends them (a capture's shape), and the SDK's JOB_STATE_ words."""
    client = GeminiBatches(GeminiProvider(name="g", model=MODEL, api_key=KEY))
    pending = {
        "name": "batches/4m855v7q30kc",
        "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": "models/gemini-2.5-flash",
            "displayName": "test-batch-job",
            "createTime": "2025-12-10T18:27:01.407650525Z",
            "updateTime": "2025-12-10T18:27:01.407650525Z",
            "batchStats": {"requestCount": "3", "pendingRequestCount": "3"},
            "state": "BATCH_STATE_PENDING",
            "name": "batches/4m855v7q30kc",
        },
    }
    state = client._state(pending)
    assert state == BatchState(
        batch_id="4m855v7q30kc",
        status="BATCH_STATE_PENDING",
        ended=False,
        request_count=3,
        counts={"succeeded": 0, "errored": 0, "processing": 3},
        created_at=datetime(2025, 12, 10, 18, 27, 1, 407650, UTC).timestamp(),
        tag="test-batch-job",
    )
    sdk = {"name": "batches/x", "done": True, "metadata": {"state": "JOB_STATE_SUCCEEDED"}}
    assert client._state(sdk).ended and client._state(sdk).counts == {
        "succeeded": 0,
        "errored": 0,
    }
    with pytest.raises(ProviderError) as info:
        client._state({"metadata": {}})
    assert info.value.kind == base.BAD_RESPONSE


# --- implicit caching -------------------------------------------------------------------------


async def test_implicit_cache_hits_are_reported_both_ways():
    requests = {f"q{i}": ask(f"q{i} please", system=PREFIX) for i in range(3)}
    async with FakeGeminiBatchServer(echo) as srv:
        async with batches(srv) as client:
            results = await run(client, items(requests))
            later = await client.provider.complete(ask("q9 please", system=PREFIX))
            short = await run(client, items({"s": ask("q", system=SHORT)}), "short")
            again = await run(client, items({"s2": ask("r", system=SHORT)}), "short")
        async with batches(srv, model="gemini-2.5-pro") as pro:
            first = await run(pro, items({"p": ask("a", system=PREFIX)}), "pro")
            second = await run(pro, items({"p2": ask("b", system=PREFIX)}), "pro")
    cached = sorted(reply_of(r).cached_tokens or 0 for r in results.values())
    assert cached == [0, 1100, 1100]  # the first to run wrote it, the others read it
    assert all(reply_of(r).prompt_tokens == 1102 for r in results.values())
    assert later.cached_tokens == 1100
    assert reply_of(short["s"]).cached_tokens == reply_of(again["s2"]).cached_tokens == 0
    assert reply_of(first["p"]).cached_tokens == 0
    assert reply_of(second["p2"]).cached_tokens == 0  # 1100 words: under Pro's 4096
