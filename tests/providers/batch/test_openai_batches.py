"""OpenAIBatches against a fake OpenAI Batch API (files + batches beside chat completions)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from openai.types import Batch, FileObject

from needlescope.errors import ProviderError
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.batch import BatchClient, batch_client
from needlescope.providers.batch.base import (
    BATCH_CANCELED,
    BATCH_EXPIRED,
    BATCH_FAILED,
    BatchLimits,
    BatchRequest,
    BatchState,
)
from needlescope.providers.batch.openai import ENDPOINT, TAG_KEY, OpenAIBatches
from needlescope.providers.openai import OpenAIProvider
from tests.support.batch_clients import ask, echo, failure, items, opened, run, sync_failures
from tests.support.fake_server import WireReply
from tests.support.openai_batch_server import DAY, EXPIRED, START, FakeOpenAIBatchServer
from tests.support.openai_server import FakeOpenAIServer, Fault

KEY = "sk-proj-test-SECRET-0123456789abcdef"


def batches(srv: FakeOpenAIServer, **kwargs: Any) -> AbstractAsyncContextManager[OpenAIBatches]:
    defaults = {"name": "fake", "base_url": srv.base_url, "model": "gpt-4o-mini", "api_key": KEY}
    return opened(OpenAIProvider(**defaults | kwargs), OpenAIBatches)


def one_line(error: ProviderError | None) -> ProviderError:
    assert error is not None
    assert "\n" not in str(error) and KEY not in str(error)
    return error


def same_reply(batch: Reply | None, sync: Reply) -> None:
    """A batch reply is the synchronous one, but for its latency (none is measured)."""
    assert batch is not None and batch.latency_s is None and sync.latency_s is not None
    assert sync.fingerprint is not None and sync.fingerprint.sampling is not None
    assert batch == replace(sync, latency_s=None)


# --- round trip --------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["gpt-4o-mini", "o3-mini"])
async def test_batch_replies_equal_the_synchronous_ones(model: str) -> None:
    requests = {
        "plain": ask("What is the magic number?"),
        "system": ChatRequest(
            (Message("system", "Be brief."), Message("user", "Name a colour.")),
            max_tokens=50,
            temperature=1.0,
        ),
        "short": ask("Say a long sentence please.", max_tokens=2),
        "seeded": ask("Pick one.", seed=7, reasoning_effort="low"),
        "unlimited": ask("No limit.", max_tokens=None),
    }
    server = FakeOpenAIBatchServer(echo, api_key=KEY, reasoning_tokens=1)
    async with server as srv, batches(srv, model=model) as client:
        assert isinstance(client, BatchClient)
        assert isinstance(batch_client(client.provider), OpenAIBatches)
        sync = {cid: await client.provider.complete(r) for cid, r in requests.items()}
        state = await client.submit(items(requests), "sweep-1")
        assert state == BatchState(
            batch_id=state.batch_id,
            status="validating",
            ended=False,
            request_count=0,  # counted once validated
            counts={"succeeded": 0, "errored": 0, "processing": 0},
            created_at=START,
            tag="sweep-1",
            input_file_id=state.input_file_id,
        )
        seen = [(await client.state(state.batch_id)) for _ in range(4)]
        results = {r.custom_id: r for r in await client.results(state.batch_id)}
    assert [s.status for s in seen] == ["in_progress", "in_progress", "finalizing", "completed"]
    assert seen[1].counts == {"succeeded": 4, "errored": 0, "processing": 1}
    assert seen[-1].counts == {"succeeded": 5, "errored": 0} and seen[-1].request_count == 5
    assert set(results) == set(requests)
    for cid, reply in sync.items():
        assert results[cid].error is None, cid
        same_reply(results[cid].reply, reply)
    if model == "gpt-4o-mini":  # a reasoning model is given room to think: no cut
        assert sync["short"].finish_reason == base.LENGTH
    assert srv.submitted == {cid: 1 for cid in requests}
    body = next(i.body for i in srv.batches[state.batch_id].items if i.custom_id == "plain")
    assert body == client.provider.request_body(requests["plain"])  # the body complete sends
    uploaded = srv.files[srv.batches[state.batch_id].input_file_id]
    assert uploaded.obj["bytes"] == sum(client.request_bytes(i) for i in items(requests))
    assert uploaded.obj["purpose"] == "batch" and uploaded.obj["filename"].endswith(".jsonl")
    assert srv.batches[state.batch_id].metadata == {TAG_KEY: "sweep-1"}


async def test_results_come_in_random_order_and_are_keyed_by_custom_id() -> None:
    requests = {f"cell-{i:02d}": ask(f"Question {i}?") for i in range(12)}
    async with FakeOpenAIBatchServer(echo, seed=3, group=5) as srv, batches(srv) as client:
        results = await client.results((await finished(client, srv, requests)).batch_id)
    order = [r.custom_id for r in results]
    assert sorted(order) == sorted(requests) and order != sorted(order)
    for r in results:
        assert (
            r.reply is not None and r.reply.text == f"You asked: Question {int(r.custom_id[5:])}?"
        )


async def finished(
    client: OpenAIBatches, srv: FakeOpenAIBatchServer, requests: dict[str, ChatRequest]
) -> BatchState:
    state = await client.submit(items(requests), "t")
    await srv.finish(state.batch_id)
    return await client.state(state.batch_id)


async def test_the_wire_objects_validate_against_the_sdk() -> None:
    async with FakeOpenAIBatchServer(echo, api_key=KEY) as srv:
        async with batches(srv) as client:
            state = await client.submit(items({"a": ask("A?"), "b": ask("B?")}), "t")
        srv.outcomes["b"] = "server_error"
        await srv.finish(state.batch_id)
        headers = {"Authorization": f"Bearer {KEY}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            url = srv.base_url
            async with http.get(f"{url}/batches/{state.batch_id}") as resp:
                batch = Batch.model_validate(await resp.json())
            async with http.get(f"{url}/batches", params={"limit": "5"}) as resp:
                page = await resp.json()
            async with http.get(f"{url}/files/{batch.output_file_id}") as resp:
                output = FileObject.model_validate(await resp.json())
            lines = []
            for file_id in (batch.output_file_id, batch.error_file_id):
                async with http.get(f"{url}/files/{file_id}/content") as resp:
                    lines += [json.loads(line) for line in (await resp.text()).splitlines()]
            async with http.get(f"{url}/batches/batch_nope") as resp:
                missing = resp.status, await resp.json()
    assert batch.status == "completed" and batch.completed_at is not None
    assert batch.request_counts is not None
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)
    assert [Batch.model_validate(b).id for b in page["data"]] == [batch.id]
    assert page["object"] == "list" and page["has_more"] is False
    assert page["first_id"] == page["last_id"] == batch.id
    assert output.purpose == "batch_output" and output.expires_at == output.created_at + 30 * DAY
    by_id = {line["custom_id"]: line for line in lines}
    assert set(by_id) == {"a", "b"}
    assert set(by_id["a"]) == {"id", "custom_id", "response", "error"}
    assert by_id["a"]["error"] is None and by_id["a"]["response"]["status_code"] == 200
    assert by_id["a"]["response"]["body"]["object"] == "chat.completion"
    assert by_id["b"]["response"]["status_code"] == 500
    assert missing[0] == 404 and set(missing[1]["error"]) == {"message", "type", "param", "code"}


# --- requests that never answered --------------------------------------------------------------


async def test_errored_lines_get_the_kinds_the_synchronous_path_gives() -> None:
    faults: dict[str, str | Fault] = {
        "limit": Fault("rate_limit", retry_after=None),
        "broke": "server_error",
        "busy": "unavailable",
        "long": "context_length",
        "empty": "empty_choices",
    }
    server = FakeOpenAIBatchServer(echo, api_key=KEY, group=3)
    async with server as srv, batches(srv) as client:
        sync = await sync_failures(srv, client.provider, faults)
        sync["bad"] = await failure(client.provider.complete(ask("Q?", top_p=0.5, model="o3")))
        srv.outcomes.update(faults)
        requests = {cid: ask("Q?") for cid in faults} | {"bad": ask("Q?", top_p=0.5, model="o3")}
        results = await run(client, items(requests))
    assert sync["limit"].kind == base.RATE_LIMITED and sync["bad"].kind == base.BAD_REQUEST
    assert sync["empty"].kind == base.EMPTY_RESPONSE
    for cid, error in sync.items():
        got = one_line(results[cid].error)
        assert results[cid].reply is None
        assert (got.kind, got.retryable, got.status) == (error.kind, error.retryable, error.status)
        assert str(got).startswith(f"{error} (request {cid} of batch batch_")


async def test_a_reply_the_reader_refuses_is_that_requests_error() -> None:
    def responder(body: dict[str, Any]) -> Any:
        question = body["messages"][-1]["content"]
        if question == "error?":  # a 200 whose body is an error envelope
            return WireReply(200, {"error": {"message": "upstream broke", "code": 502}})
        return {"choices": "nope"} if question == "odd?" else "fine"

    async with FakeOpenAIBatchServer(responder) as srv, batches(srv) as client:
        requests = {"odd": ask("odd?"), "error": ask("error?"), "ok": ask("ok?")}
        results = await run(client, items(requests))
    assert one_line(results["odd"].error).kind == base.BAD_RESPONSE
    assert one_line(results["error"].error).kind == base.SERVER_ERROR
    assert results["ok"].reply is not None and results["ok"].reply.text == "fine"


async def test_an_expired_batch_gives_its_partial_results() -> None:
    requests = {f"c{i}": ask(f"Q{i}?") for i in range(6)}
    async with FakeOpenAIBatchServer(echo, group=2) as srv, batches(srv) as client:
        state = await client.submit(items(requests), "t")
        running = await client.state(state.batch_id)
        running = await client.state(state.batch_id)  # 2 of 6 have run
        srv.tick(DAY)
        ended = await client.state(state.batch_id)
        results = {r.custom_id: r for r in await client.results(state.batch_id)}
        batch = srv.batches[state.batch_id]
    assert running.counts == {"succeeded": 2, "errored": 0, "processing": 4}
    assert (ended.status, ended.ended) == ("expired", True)
    assert ended.counts == {"succeeded": 2, "errored": 4}  # expired requests count as failed
    assert batch.output_file_id and batch.error_file_id
    replies = [r for r in results.values() if r.reply is not None]
    expired = [one_line(r.error) for r in results.values() if r.error is not None]
    assert set(results) == set(requests) and len(replies) == 2 and len(expired) == 4
    assert {(e.kind, e.retryable) for e in expired} == {(BATCH_EXPIRED, True)}


async def test_a_request_that_never_runs_expires_its_batch() -> None:
    async with FakeOpenAIBatchServer(echo) as srv, batches(srv) as client:
        srv.outcomes["late"] = EXPIRED
        results = await run(client, items({"late": ask("A?"), "soon": ask("B?")}))
        assert next(iter(srv.batches.values())).status == "expired"
    assert one_line(results["late"].error).kind == BATCH_EXPIRED
    assert results["soon"].reply is not None


async def test_requests_in_neither_file_are_the_batchs_end() -> None:
    """A server that leaves unrun requests out of the error file: the status says why."""
    async with FakeOpenAIBatchServer(echo, group=1) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("A?"), "b": ask("B?")}), "t")
        await srv.advance(state.batch_id, 2)  # validated; one request has run
        srv.tick(DAY)
        await srv.finish(state.batch_id)
        srv.batches[state.batch_id].error_file_id = None
        results = {r.custom_id: r for r in await client.results(state.batch_id)}
    assert sum(r.reply is not None for r in results.values()) == 1
    assert [one_line(r.error).kind for r in results.values() if r.error] == [BATCH_EXPIRED]


async def test_cancel_ends_the_batch_with_its_unrun_requests_cancelled() -> None:
    requests = {f"c{i}": ask(f"Q{i}?") for i in range(5)}
    async with FakeOpenAIBatchServer(echo, group=2) as srv, batches(srv) as client:
        state = await client.submit(items(requests), "t")
        await srv.advance(state.batch_id, 2)  # validated; two have run
        cancelling = await client.cancel(state.batch_id)
        ended = await client.state(state.batch_id)
        results = await client.results(state.batch_id)
        again = await failure(client.cancel(state.batch_id))
    assert (cancelling.status, cancelling.ended) == ("cancelling", False)
    assert (ended.status, ended.ended) == ("cancelled", True)
    assert ended.counts == {"succeeded": 2, "errored": 3}
    cancelled = [one_line(r.error) for r in results if r.error is not None]
    assert len(cancelled) == 3 and {e.kind for e in cancelled} == {BATCH_CANCELED}
    assert again.status == 409 and not again.retryable


async def test_a_batch_the_api_refuses_fails_with_its_reasons() -> None:
    requests = {f"c{i}": ask(f"Q{i}?") for i in range(3)}
    server = FakeOpenAIBatchServer(echo, max_batch_requests=2, max_batch_bytes=10_000)
    async with server as srv, batches(srv) as client:
        client.limits = BatchLimits(max_requests=10, max_bytes=10**6)  # looser than the server's
        state = await client.submit(items(requests), "t")
        failed = await client.state(state.batch_id)
        results = await client.results(state.batch_id)
        later = OpenAIBatches(client.provider)  # reads the custom ids from the input file
        again = await later.results(state.batch_id)
    assert (failed.status, failed.ended, failed.request_count) == ("failed", True, 0)
    assert failed.error is not None and "over the 2 maximum" in failed.error
    assert srv.submitted == {cid: 1 for cid in requests}  # submitted, never run
    for found in (results, again):
        assert sorted(r.custom_id for r in found) == sorted(requests)
        errors = [one_line(r.error) for r in found]
        assert {(e.kind, e.retryable) for e in errors} == {(BATCH_FAILED, False)}
        assert "the batch failed: The batch input file has 3 requests" in str(errors[0])


def entry(custom_id: str = "a", url: str | None = "/v1/chat/completions", **more: Any) -> bytes:
    line = {"custom_id": custom_id, "method": "POST", "url": url, "body": {}} | more
    return json.dumps({k: v for k, v in line.items() if v is not None}).encode()


@pytest.mark.parametrize(
    ("lines", "code", "line"),
    [
        ([b"not json"], "invalid_json_line", 1),
        ([entry(url="/v1/embeddings")], "invalid_url", 1),
        ([entry(body=None)], "missing_required_parameter", 1),
        ([entry(method="GET")], "invalid_method", 1),
        ([entry(), entry()], "duplicate_custom_id", 2),
    ],
)
async def test_the_fake_fails_a_bad_input_file(lines: list[bytes], code: str, line: int) -> None:
    async with FakeOpenAIBatchServer() as srv, aiohttp.ClientSession() as http:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b"\n".join(lines) + b"\n", filename="in.jsonl")
        async with http.post(f"{srv.base_url}/files", data=form) as resp:
            file_id = FileObject.model_validate(await resp.json()).id
        create = {"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"}
        async with http.post(f"{srv.base_url}/batches", json=create) as resp:
            batch_id = Batch.model_validate(await resp.json()).id
        async with http.get(f"{srv.base_url}/batches/{batch_id}") as resp:
            batch = Batch.model_validate(await resp.json())
    assert batch.status == "failed" and batch.errors is not None and batch.errors.data
    assert (batch.errors.data[0].code, batch.errors.data[0].line) == (code, line)


async def test_submit_refuses_what_the_api_would_before_sending_anything() -> None:
    async with FakeOpenAIBatchServer(echo) as srv, batches(srv) as client:
        client.limits = BatchLimits(max_requests=2, max_bytes=400)
        twice = [BatchRequest("a", ask("A?")), BatchRequest("a", ask("B?"))]
        repeated = await failure(client.submit(twice, "t"))
        many = await failure(client.submit(items({c: ask("Q?") for c in "abc"}), "t"))
        big = await failure(client.submit(items({"a": ask("word " * 100)}), "t"))
        empty = await failure(client.submit([], "t"))
        tagged = await failure(client.submit(items({"a": ask("A?")}), "x" * 513))
    assert (repeated.kind, many.kind, big.kind) == (
        base.BAD_REQUEST,
        base.REQUEST_TOO_LARGE,
        base.REQUEST_TOO_LARGE,
    )
    assert empty.kind == tagged.kind == base.BAD_REQUEST and "513 characters" in str(tagged)
    assert srv.batch_requests == 0


async def test_a_refused_create_deletes_its_input_file() -> None:
    async with FakeOpenAIBatchServer(echo) as srv, batches(srv) as client:
        srv.api_faults.extend([None, 400])  # the upload passes; the create is refused
        error = await failure(client.submit(items({"a": ask("A?")}), "t"))
    assert error.status == 400 and srv.files == {} and srv.batches == {}


# --- a restart, listing ------------------------------------------------------------------------


async def test_a_new_client_finds_its_batches_by_tag_and_reads_the_same_replies() -> None:
    requests = {"a": ask("A?", seed=1), "b": ask("B?", temperature=0.5)}
    async with FakeOpenAIBatchServer(echo, api_key=KEY) as srv:
        async with batches(srv) as client:
            old = await client.submit(items({"x": ask("X?")}), "old-sweep")
            srv.tick(3_600)
            mine = await client.submit(items(requests), "sweep-7")
            await srv.finish(mine.batch_id)
            before = {r.custom_id: r.reply for r in await client.results(mine.batch_id)}
        async with batches(srv) as restarted:  # a new process: nothing in memory
            srv.max_page = 1  # one batch a page: listing pages on
            everything = await restarted.listed()
            recent = await restarted.listed(since=START + 3_600)
            found = next(s for s in everything if s.tag == "sweep-7")
            after = {r.custom_id: r.reply for r in await restarted.results(found.batch_id)}
    assert [s.batch_id for s in everything] == [mine.batch_id, old.batch_id]
    assert [s.batch_id for s in recent] == [mine.batch_id]
    assert found.ended and found.created_at == START + 3_600
    assert after == before and all(r is not None and r.fingerprint for r in after.values())
    sampling = {cid: r.fingerprint.sampling for cid, r in after.items() if r and r.fingerprint}
    assert sampling == {
        "a": '{"max_tokens":20,"seed":1}',
        "b": '{"max_tokens":20,"temperature":0.5}',
    }


async def test_a_deleted_input_file_leaves_the_sampling_unknown() -> None:
    async with FakeOpenAIBatchServer(echo) as srv, batches(srv) as client:
        state = await finished(client, srv, {"a": ask("A?")})
        del srv.files[srv.batches[state.batch_id].input_file_id]
        results = await OpenAIBatches(client.provider).results(state.batch_id)
    reply = results[0].reply
    assert reply is not None and reply.fingerprint is not None
    assert reply.fingerprint.sampling is None and reply.fingerprint.system_fingerprint == "fp_fake"


async def test_results_of_a_running_batch_are_refused() -> None:
    async with FakeOpenAIBatchServer(echo, auto_advance=False) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("A?")}), "t")
        error = await failure(client.results(state.batch_id))
    assert error.kind == base.BAD_REQUEST and "has not ended (validating)" in str(error)


# --- servers without the API, and secrets ------------------------------------------------------


async def test_a_server_without_a_batch_api_is_one_clear_line() -> None:
    async with FakeOpenAIServer(echo) as srv, batches(srv) as client:
        submit = await failure(client.submit(items({"a": ask("A?")}), "t"))
        state = await failure(client.state("batch_abc"))
        listed = await failure(client.listed())
    for error in (submit, state, listed):
        one_line(error)
        assert (error.kind, error.retryable, error.status) == (base.BAD_REQUEST, False, 404)
        assert "has no batch API" in str(error)
    assert "POST /v1/files" in str(submit) and "GET /v1/batches/batch_abc" in str(state)


async def test_an_unknown_batch_is_named() -> None:
    async with FakeOpenAIBatchServer(echo) as srv, batches(srv) as client:
        error = one_line(await failure(client.state("batch_nope")))
    assert error.kind == base.BAD_REQUEST and "has no batch batch_nope" in str(error)


async def test_a_401_never_shows_the_key() -> None:
    server = FakeOpenAIBatchServer(echo, api_key="sk-other-key-000")
    async with server as srv, batches(srv) as client:
        submit = one_line(await failure(client.submit(items({"a": ask("A?")}), "t")))
        listed = one_line(await failure(client.listed()))
    assert submit.kind == listed.kind == base.AUTH and "***" in str(submit)


@asynccontextmanager
async def hostile(names: str) -> AsyncIterator[str]:
    """A server answering every request 404, echoing the key and its path or its last part."""

    async def not_found(request: web.Request) -> web.Response:
        where = request.path if names == "path" else request.path.split("/")[3]
        text = f"Nothing at {where} for {request.headers.get('Authorization')}"
        return web.Response(status=404, text=text)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", not_found)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(("names", "says"), [("path", "has no batch API"), ("id", "has no batch")])
async def test_a_404_that_echoes_the_key_never_shows_it(names: str, says: str) -> None:
    async with hostile(names) as url:
        provider = OpenAIProvider(name="fake", base_url=url, model="m", api_key=KEY)
        client = OpenAIBatches(provider)
        try:
            errors = [
                await failure(client.state("batch_1")),
                await failure(client.results("batch_1")),
                await failure(client.cancel("batch_1")),
            ]
        finally:
            await provider.aclose()
    for error in errors:
        assert one_line(error).kind == base.BAD_REQUEST and says in str(error)
    if names == "id":
        assert "has no batch batch_1: HTTP 404" in str(errors[0]) and "***" in str(errors[0])


async def test_a_failing_poll_keeps_its_kind() -> None:
    async with FakeOpenAIBatchServer(echo) as srv, batches(srv) as client:
        state = await client.submit(items({"a": ask("A?")}), "t")
        srv.api_faults.extend([500, 429])
        broke = await failure(client.state(state.batch_id))
        limited = await failure(client.state(state.batch_id))
    assert (broke.kind, broke.retryable) == (base.SERVER_ERROR, True)
    assert (limited.kind, limited.retryable) == (base.RATE_LIMITED, True)
