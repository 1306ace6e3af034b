"""AnthropicBatches against a fake Message Batches API, and the fake's prompt-cache accounting."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from anthropic.types.shared import ErrorResponse

from needlescope.providers import base
from needlescope.providers.anthropic import AnthropicProvider
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.batch import BatchClient, batch_client
from needlescope.providers.batch.anthropic import AnthropicBatches
from needlescope.providers.batch.base import BATCH_CANCELED, BATCH_EXPIRED, BatchRequest, BatchState
from tests.support.anthropic_batch_server import DAY, EXPIRED, START, FakeAnthropicBatchServer
from tests.support.anthropic_server import FakeAnthropicServer, Fault
from tests.support.batch_clients import ask, echo, failure, items, opened, run, sync_failures

KEY = "sk-ant-test-SECRET-0123456789abcdef"
THINK = {"type": "enabled", "budget_tokens": 2048}
PREFIX = " ".join(f"fact{i}" for i in range(1100))  # 1100 words: 1103 tokens as a system
DOC = " ".join(f"line{i}" for i in range(1100))
SHORT = " ".join(PREFIX.split()[:1000])  # 1003 tokens: under the minimum of 1024


def cached(question: str, prefix: str = PREFIX, ttl: str = "5m") -> ChatRequest:
    """A request whose system prompt is one block marked for caching."""
    block = {"type": "text", "text": prefix, "cache_control": {"type": "ephemeral", "ttl": ttl}}
    return ask(question, system=[block])


def batches(
    srv: FakeAnthropicServer, **kwargs: Any
) -> AbstractAsyncContextManager[AnthropicBatches]:
    defaults = {"name": "fake", "base_url": srv.base_url, "model": "claude-test", "api_key": KEY}
    return opened(AnthropicProvider(**defaults | kwargs), AnthropicBatches)


def same_reply(batch: Reply | None, sync: Reply) -> None:
    """A batch reply is the synchronous one, but for latency and the batch service tier."""
    assert batch is not None and batch.latency_s is None and sync.fingerprint is not None
    assert replace(batch, fingerprint=None) == replace(sync, latency_s=None, fingerprint=None)
    assert batch.fingerprint == replace(sync.fingerprint, service_tier="batch")


# --- round trip --------------------------------------------------------------------------------


async def test_batch_replies_equal_the_synchronous_ones() -> None:
    requests = {
        "plain": ask("What is the magic number?"),
        "system": ChatRequest(
            (Message("system", "Be brief."), Message("user", "Name a colour.")),
            max_tokens=50,
            temperature=0.0,
        ),
        "short": ask("Say a long sentence please.", max_tokens=2),
        "thinks": ask("Think first.", thinking=THINK),
        "stops": ask("Stop at is.", stop_sequences=[" is"]),
    }
    async with FakeAnthropicBatchServer(echo, api_key=KEY) as srv, batches(srv) as client:
        assert isinstance(client, BatchClient)
        assert isinstance(batch_client(client.provider), AnthropicBatches)
        sync = {cid: await client.provider.complete(r) for cid, r in requests.items()}
        state = await client.submit(items(requests), "sweep-1")
        assert state == BatchState(
            batch_id=state.batch_id,
            status="in_progress",
            ended=False,
            request_count=5,
            counts={"processing": 5, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            created_at=START,
            tag=None,
        )
        ended = await client.state(state.batch_id)  # one step runs 4 of 5 requests
        assert not ended.ended and ended.counts["processing"] == 5
        ended = await client.state(state.batch_id)
        assert ended.ended and ended.status == "ended"
        assert ended.counts == {**state.counts, "processing": 0, "succeeded": 5}
        results = {r.custom_id: r for r in await client.results(state.batch_id)}
        # Another process knows the bodies only once told them: else no sampling is claimed.
        elsewhere = AnthropicBatches(client.provider)
        unknown = {r.custom_id: r.reply for r in await elsewhere.results(state.batch_id)}
        elsewhere.remember(state.batch_id, items(requests))
        known = {r.custom_id: r.reply for r in await elsewhere.results(state.batch_id)}
    assert set(results) == set(requests)
    for cid, reply in sync.items():
        assert results[cid].error is None
        same_reply(results[cid].reply, reply)
        same_reply(known[cid], reply)
        assert unknown[cid] is not None and unknown[cid].fingerprint is not None
        assert unknown[cid].fingerprint.sampling is None
    assert sync["short"].finish_reason == base.LENGTH and sync["thinks"].reasoning_tokens
    assert srv.submitted == {cid: 1 for cid in requests}
    body = srv.batches[state.batch_id].items[0].params
    assert body == client.provider.request_body(requests["plain"])  # the body complete sends


async def test_the_wire_objects_validate_against_the_sdk() -> None:
    async with FakeAnthropicBatchServer(echo, api_key=KEY, group=2) as srv:
        async with batches(srv) as client:
            state = await client.submit(items({"a": ask("A?"), "b": ask("B?")}), "t")
        headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
        async with aiohttp.ClientSession(headers=headers) as http:
            url = f"{srv.base_url}/v1/messages/batches"
            async with http.get(f"{url}/{state.batch_id}/results") as resp:
                assert resp.status == 400  # not ended yet
                ErrorResponse.model_validate(await resp.json())
            async with http.get(f"{url}/{state.batch_id}") as resp:
                batch = MessageBatch.model_validate(await resp.json())
            async with http.get(url, params={"limit": "5"}) as resp:
                page = await resp.json()
            assert batch.processing_status == "ended" and batch.ended_at is not None
            assert batch.results_url == f"{srv.base_url}/v1/messages/batches/{batch.id}/results"
            async with http.get(batch.results_url) as resp:
                lines = (await resp.text()).splitlines()
    assert [MessageBatch.model_validate(b).id for b in page["data"]] == [batch.id]
    assert page["has_more"] is False and page["first_id"] == page["last_id"] == batch.id
    parsed = [MessageBatchIndividualResponse.model_validate(json.loads(line)) for line in lines]
    assert sorted(p.custom_id for p in parsed) == ["a", "b"]
    assert {p.result.type for p in parsed} == {"succeeded"}


# --- requests that never answered --------------------------------------------------------------


async def test_errored_requests_get_the_kinds_the_synchronous_path_gives() -> None:
    faults = {
        "busy": "overloaded",
        "long": "prompt_too_long",
        "limit": Fault("rate_limit", retry_after=None),
        "broke": "server_error",
        "denied": "forbidden",
    }
    server = FakeAnthropicBatchServer(echo, api_key=KEY, group=3)
    async with server as srv, batches(srv) as client:
        sync = await sync_failures(srv, client.provider, faults)
        sync["bad"] = await failure(client.provider.complete(ask("Q?", bogus=1)))
        srv.outcomes.update(faults, late=EXPIRED)
        requests = {cid: ask("Q?") for cid in [*faults, "late"]} | {"bad": ask("Q?", bogus=1)}
        results = await run(client, items(requests))
    assert sync["bad"].kind == base.BAD_REQUEST and sync["long"].kind == base.CONTEXT_TOO_LONG
    for cid, error in sync.items():
        got = results[cid].error
        assert got is not None and results[cid].reply is None
        assert (got.kind, got.retryable) == (error.kind, error.retryable), cid
        assert f"request {cid} of Message Batch msgbatch_" in str(got)
        assert "\n" not in str(got) and KEY not in str(got)
    late = results["late"].error
    assert late is not None and (late.kind, late.retryable) == (BATCH_EXPIRED, True)


async def test_cancel_ends_the_unrun_requests_canceled() -> None:
    requests = {f"q{i}": ask(f"Question {i}?") for i in range(6)}
    async with FakeAnthropicBatchServer(echo, group=2) as srv, batches(srv) as client:
        state = await client.submit(items(requests), "t")
        await client.state(state.batch_id)  # two requests run
        canceling = await client.cancel(state.batch_id)
        assert (canceling.status, canceling.ended, canceling.counts["processing"]) == (
            "canceling",
            False,
            6,
        )
        ended = await client.state(state.batch_id)
        results = await client.results(state.batch_id)
        again = await client.cancel(state.batch_id)
    assert ended.ended and (ended.counts["succeeded"], ended.counts["canceled"]) == (2, 4)
    assert again.status == "ended"
    canceled = [r.error for r in results if r.error is not None]
    assert len(canceled) == 4 and sum(r.reply is not None for r in results) == 2
    assert all(e.kind == BATCH_CANCELED and not e.retryable for e in canceled)


async def test_a_batch_past_its_24_hours_expires_its_unrun_requests() -> None:
    requests = {f"q{i}": ask(f"Question {i}?") for i in range(5)}
    async with FakeAnthropicBatchServer(echo, group=2) as srv, batches(srv) as client:
        state = await client.submit(items(requests), "t")
        await client.state(state.batch_id)
        srv.tick(DAY)
        ended = await client.state(state.batch_id)
        results = await client.results(state.batch_id)
    assert ended.ended and (ended.counts["succeeded"], ended.counts["expired"]) == (2, 3)
    expired = [r.error for r in results if r.error is not None]
    assert [e.kind for e in expired] == [BATCH_EXPIRED] * 3


async def test_results_of_a_batch_still_running_are_refused() -> None:
    async with FakeAnthropicBatchServer(echo, auto_advance=False) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("A?")}), "t")
        error = await failure(client.results(state.batch_id))
    assert error.kind == base.BAD_REQUEST and "has not ended (in_progress)" in str(error)


# --- listing -----------------------------------------------------------------------------------


async def test_listed_pages_newest_first_and_stops_at_since() -> None:
    async with FakeAnthropicBatchServer(echo, auto_advance=False) as srv, batches(srv) as client:
        srv.max_page = 2
        made = []
        for i in range(5):
            made.append(await client.submit(items({"a": ask(f"Batch {i}?")}), "t"))
            srv.tick(60)
        before = srv.batch_requests
        everything = await client.listed()
        pages = srv.batch_requests - before
        recent = await client.listed(since=made[2].created_at)
        early_stop = srv.batch_requests - before - pages
    assert [s.batch_id for s in everything] == [s.batch_id for s in reversed(made)]
    assert pages == 3  # 2 + 2 + 1
    assert [s.batch_id for s in recent] == [s.batch_id for s in reversed(made[2:])]
    assert early_stop == 2  # the second page holds an older batch: no third is asked for
    assert everything[0].created_at == START + 4 * 60


# --- errors ------------------------------------------------------------------------------------


async def test_a_server_without_batches_says_so_in_one_line() -> None:
    async with FakeAnthropicServer(echo, api_key=KEY) as srv, batches(srv) as client:
        calls = [
            client.submit(items({"a": ask("A?")}), "t"),
            client.state("msgbatch_1"),
            client.listed(),
            client.cancel("msgbatch_1"),
            client.results("msgbatch_1"),
        ]
        errors = [await failure(call) for call in calls]
    for error in errors:
        assert error.kind == base.BAD_REQUEST and not error.retryable
        assert "has no Message Batches API (HTTP 404 on " in str(error)
        assert "\n" not in str(error) and KEY not in str(error)


async def test_an_unknown_batch_and_a_wrong_key() -> None:
    async with FakeAnthropicBatchServer(echo, api_key=KEY) as srv:
        async with batches(srv) as client:
            unknown = await failure(client.state("msgbatch_nope"))
        async with batches(srv, api_key="sk-ant-WRONG-key-9876543210") as client:
            denied = await failure(client.submit(items({"a": ask("A?")}), "t"))
    assert unknown.kind == base.BAD_REQUEST and "has no Message Batch msgbatch_nope" in str(unknown)
    assert denied.kind == base.AUTH and "WRONG" not in str(denied) and KEY not in str(denied)


async def test_the_results_url_is_only_followed_on_the_configured_host() -> None:
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        home = f"{srv.base_url}/v1/messages/batches/b1/results"
        assert client._results_url("b1", "https://elsewhere.example/r") == home
        assert client._results_url("b1", f"{srv.base_url}/other/r") == f"{srv.base_url}/other/r"
        assert client._results_url("b1", None) == home


async def test_submissions_over_the_limits_are_refused_before_sending() -> None:
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        client.limits = replace(client.limits, max_requests=2)
        too_many = await failure(client.submit(items({c: ask("Q?") for c in "abc"}), "t"))
        one = BatchRequest("a", ask("Q?"))
        size = client.request_bytes(one) + len('{"requests":[]}') - 1
        client.limits = replace(client.limits, max_bytes=size)
        srv.max_batch_bytes = size
        too_big = await failure(client.submit([one, BatchRequest("b", ask("Q?"))], "t"))
        twice = await failure(client.submit([one, one], "t"))
        assert srv.batch_requests == 0
        fits = await client.submit([one], "t")  # its body is exactly as request_bytes says
    assert (too_many.kind, too_big.kind) == (base.REQUEST_TOO_LARGE, base.REQUEST_TOO_LARGE)
    assert twice.kind == base.BAD_REQUEST and fits.request_count == 1


@pytest.mark.parametrize(
    ("requests", "status", "message"),
    [
        ([{"custom_id": "a b", "params": {}}], 400, "String should match pattern"),
        ([{"custom_id": "x" * 65, "params": {}}], 400, "at most 64 characters"),
        ([{"custom_id": "a", "params": {}}] * 2, 400, "requests.1.custom_id: Duplicate"),
        ([{"custom_id": c, "params": {}} for c in "abcd"], 400, "at most 3 items"),
        ([], 400, "at least 1 item"),
        ([{"custom_id": "a", "params": {"model": "m" * 900}}], 413, "maximum allowed"),
    ],
)
async def test_the_fake_refuses_batches_as_the_api_does(
    requests: list[dict[str, Any]], status: int, message: str
) -> None:
    async with FakeAnthropicBatchServer(max_batch_requests=3, max_batch_bytes=800) as srv:
        headers = {"anthropic-version": "2023-06-01"}
        async with aiohttp.ClientSession(headers=headers) as http:
            url = f"{srv.base_url}/v1/messages/batches"
            async with http.post(url, json={"requests": requests}) as resp:
                assert resp.status == status
                error = await resp.json()
    if status == 400:  # the SDK's error types lack 413's request_too_large
        ErrorResponse.model_validate(error)
    assert message in error["error"]["message"] and not srv.batches


# --- prompt caching ----------------------------------------------------------------------------


async def test_a_marked_prefix_is_written_then_read() -> None:
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        first = await client.provider.complete(cached("First question?"))
        second = await client.provider.complete(cached("Second question?"))
        short = [await client.provider.complete(cached(q, SHORT)) for q in ("A?", "B?")]
    assert (first.cache_write_tokens, first.cached_tokens) == (1103, 0)
    assert (second.cache_write_tokens, second.cached_tokens) == (0, 1103)
    assert first.prompt_tokens == second.prompt_tokens == 1103 + 2 + 3  # every token counted
    assert first.cache_write_1h_tokens == 0
    assert all((r.cache_write_tokens, r.cached_tokens) == (0, 0) for r in short)  # under 1024
    assert (srv.cache.hits, srv.cache.misses, srv.cache.writes) == (1, 1, 1)


async def test_a_haiku_needs_2048_tokens() -> None:
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv, model="claude-haiku") as client:
        replies = [await client.provider.complete(cached(q)) for q in ("A?", "B?")]
    assert all((r.cache_write_tokens, r.cached_tokens) == (0, 0) for r in replies)


async def test_entries_expire_after_their_ttl_and_a_read_renews_them() -> None:
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        complete = client.provider.complete
        assert (await complete(cached("Q0?"))).cache_write_tokens == 1103
        srv.tick(299)
        assert (await complete(cached("Q1?"))).cached_tokens == 1103  # renewed for 5 minutes
        srv.tick(299)
        assert (await complete(cached("Q2?"))).cached_tokens == 1103
        srv.tick(301)
        gone = await complete(cached("Q3?"))
        hour = await complete(cached("H0?", DOC, ttl="1h"))
        srv.tick(3000)
        kept = await complete(cached("H1?", DOC, ttl="1h"))  # renewed for an hour
        srv.tick(3000)
        still = await complete(cached("H2?", DOC, ttl="1h"))
        srv.tick(3601)
        lost = await complete(cached("H3?", DOC, ttl="1h"))
    assert (gone.cache_write_tokens, gone.cached_tokens) == (1103, 0)
    assert (hour.cache_write_tokens, hour.cache_write_1h_tokens) == (1103, 1103)
    assert kept.cached_tokens == still.cached_tokens == 1103
    assert (lost.cache_write_tokens, lost.cache_write_1h_tokens, lost.cached_tokens) == (
        1103,
        1103,
        0,
    )


async def test_the_longest_live_prefix_is_read_and_the_rest_written_by_ttl() -> None:
    def two_marks(question: str) -> ChatRequest:
        system = [
            {"type": "text", "text": PREFIX, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ]
        doc = {"type": "text", "text": DOC, "cache_control": {"type": "ephemeral"}}
        content = [doc, {"type": "text", "text": question}]
        return ChatRequest(
            (Message("user", "x"),),
            20,
            extra={"system": system, "messages": [{"role": "user", "content": content}]},
        )

    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        complete = client.provider.complete
        first = await complete(two_marks("A?"))
        second = await complete(two_marks("B?"))
        srv.tick(301)
        third = await complete(two_marks("C?"))
    assert (first.cache_write_tokens, first.cache_write_1h_tokens) == (2206, 1103)
    assert (second.cached_tokens, second.cache_write_tokens) == (2206, 0)
    assert (third.cached_tokens, third.cache_write_tokens, third.cache_write_1h_tokens) == (
        1103,
        1103,
        0,
    )


@pytest.mark.parametrize(
    ("marks", "message"),
    [
        (["5m"] * 5, "A maximum of 4 blocks with cache_control may be provided. Found 5."),
        (["5m", "1h"], "ttl='1h' block may not come after a ttl='5m' block"),
        (["2h"], "Input should be '5m' or '1h'"),
    ],
)
async def test_bad_breakpoints_are_refused(marks: list[str], message: str) -> None:
    system = [
        {"type": "text", "text": f"Part {i}.", "cache_control": {"type": "ephemeral", "ttl": t}}
        for i, t in enumerate(marks)
    ]
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        error = await failure(client.provider.complete(ask("Q?", system=system)))
        results = await run(client, [BatchRequest("a", ask("Q?", system=system))])
    assert error.kind == base.BAD_REQUEST and message in str(error)
    batch_error = results["a"].error
    assert batch_error is not None and batch_error.kind == base.BAD_REQUEST
    assert message in str(batch_error)


@pytest.mark.parametrize(
    ("group", "step_s", "ttl", "reads"),
    [
        (4, 1.0, "5m", 4),  # the first group of 4 all miss and write; the second reads
        (1, 1.0, "5m", 7),  # one at a time: only the first misses
        (1, 400.0, "5m", 0),  # each step outlives a 5-minute entry
        (1, 400.0, "1h", 7),
    ],
)
async def test_in_a_batch_only_requests_run_after_the_writer_read(
    group: int, step_s: float, ttl: str, reads: int
) -> None:
    requests = {f"q{i}": cached(f"Question {i}?", ttl=ttl) for i in range(8)}
    server = FakeAnthropicBatchServer(echo, group=group, step_s=step_s)
    async with server as srv, batches(srv) as client:
        results = await run(client, items(requests))
    replies = [r.reply for r in results.values() if r.reply is not None]
    assert len(replies) == 8
    assert sum(r.cached_tokens == 1103 for r in replies) == reads
    assert sum(r.cache_write_tokens == 1103 for r in replies) == 8 - reads
    assert (srv.cache.hits, srv.cache.misses) == (reads, 8 - reads)


async def test_batch_and_synchronous_requests_share_one_cache() -> None:
    async with FakeAnthropicBatchServer(echo) as srv, batches(srv) as client:
        await client.provider.complete(cached("Warm up?"))
        results = await run(client, items({"a": cached("A?"), "b": cached("B?")}))
    assert all(r.reply is not None and r.reply.cached_tokens == 1103 for r in results.values())
