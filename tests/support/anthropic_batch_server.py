"""A fake Anthropic API with Message Batches and prompt caching beside ``/v1/messages``.

``FakeAnthropicBatchServer`` is ``FakeAnthropicServer`` (same responder, faults, token counts)
plus ``/v1/messages/batches``: create, retrieve, list (newest first, paged), cancel, and the
results JSONL at each batch's absolute ``results_url``; every object is checked against the
``anthropic`` SDK's types. Simulated time: each retrieve (or ``advance``) is one step, running
``group`` requests (seeded random order) at ``clock``, then moving it on ``step_s``; a canceling
batch ends with its unrun requests canceled, one past its 24 hours with them expired.
``outcomes`` scripts a request's end by custom id (a fault kind: errored; ``EXPIRED``); invalid
params error at processing, as the API's do. Both endpoints cache prompts as
``tests.support.anthropic_cache`` says; ``submitted`` counts submissions per custom id.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

from tests.support.anthropic_cache import Lookup, PromptCache, cache_problem, minimum_tokens
from tests.support.anthropic_server import (
    _ERRORS,
    COUNTING,
    PROMPT_TOO_LONG,
    REQUEST_ID,
    TOO_LARGE,
    FakeAnthropicServer,
    Fault,
    _error,
    _invalid,
    count_input_tokens,
)
from tests.support.fake_batches import SimulatedBatches, checked, list_limit, run_order
from tests.support.fake_server import Responder, WireReply, default_responder

EXPIRED = "expired"  # an outcome: the request expires unrun
START = 1_767_225_600.0  # the simulated clock's start: 2026-01-01T00:00:00Z
DAY = 86_400.0  # a batch's window
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class BatchItem:
    custom_id: str
    params: Any
    result: dict[str, Any] | None = None  # once it has run, been canceled or expired


@dataclass
class Batch:
    id: str
    created_at: float
    items: list[BatchItem]
    order: list[int]  # the order its requests run in
    status: str = "in_progress"
    ended_at: float | None = None
    cancel_initiated_at: float | None = None
    steps: int = 0

    @property
    def expires_at(self) -> float:
        return self.created_at + DAY

    def pending(self) -> list[BatchItem]:
        return [self.items[i] for i in self.order if self.items[i].result is None]


class FakeAnthropicBatchServer(FakeAnthropicServer, SimulatedBatches[Batch, float]):
    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        group: int = 4,
        step_s: float = 1.0,
        auto_advance: bool = True,
        max_batch_requests: int = 100_000,
        max_batch_bytes: int = 256 * 1024**2,
        min_cache_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(responder, **kwargs)
        # A group's requests run together: none reads another's cache writes.
        self._init_batches(group, step_s, auto_advance, max_batch_requests, max_batch_bytes)
        self.max_page = 1000  # a list page's largest size (lower it to test pagination)
        self.clock = START
        least = (lambda model: min_cache_tokens) if min_cache_tokens else minimum_tokens
        self.cache = PromptCache(least)
        self.outcomes: dict[str, str | Fault] = {}  # custom id -> how its request ends
        self._ran = 0  # batch requests run, for their messages' ids

    def batch_json(self, batch: Batch) -> dict[str, Any]:
        """The batch's MessageBatch object."""
        ended = batch.status == "ended"
        tally = Counter(str(item.result["type"]) for item in batch.items if item.result)
        counts = {"processing": 0 if ended else len(batch.items)} | {
            k: tally[k] if ended else 0 for k in ("succeeded", "errored", "canceled", "expired")
        }
        obj = {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.status,
            "request_counts": counts,
            "ended_at": _rfc3339(batch.ended_at),
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.expires_at),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(batch.cancel_initiated_at),
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }
        return checked(MessageBatch, obj)

    # --- routes ----------------------------------------------------------------------------

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        super()._add_routes(router)
        path = "/v1/messages/batches"
        router.add_post(path, self._batch_route(self._create))
        router.add_get(path, self._batch_route(self._list))
        router.add_get(path + "/{batch_id}", self._batch_route(self._retrieve))
        router.add_post(path + "/{batch_id}/cancel", self._batch_route(self._cancel))
        router.add_get(path + "/{batch_id}/results", self._batch_route(self._results))

    def _batch_route(self, handler: Handler) -> Handler:
        async def route(request: web.Request) -> web.StreamResponse:
            self.requests += 1
            self.batch_requests += 1
            request[REQUEST_ID] = f"req_fake{self.requests:016d}"
            self._record(request)
            resp = self._refused(request) or await handler(request)
            resp.headers["request-id"] = request[REQUEST_ID]
            return resp

        return route

    def _refused(self, request: web.Request) -> web.StreamResponse | None:
        if "anthropic-version" not in request.headers:
            msg = "anthropic-version: header is required"
            return _error(request, 400, "invalid_request_error", msg)
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return _error(request, 401, "authentication_error", "invalid x-api-key")
        return None

    async def _create(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if len(raw) > self.max_batch_bytes:
            status, type_, message = _ERRORS[TOO_LARGE]
            return _error(request, status, type_, message)
        try:
            body = json.loads(raw)
        except ValueError:
            msg = "There was an error parsing the body."
            return _error(request, 400, "invalid_request_error", msg)
        problem = self._batch_problem(body)
        if problem is not None:
            return _error(request, 400, "invalid_request_error", problem)
        batch = self._new_batch(body["requests"])
        return web.json_response(self.batch_json(batch))

    async def _list(self, request: web.Request) -> web.StreamResponse:
        limit = list_limit(request)
        if not 1 <= limit <= 1000:
            msg = "limit: Input should be between 1 and 1000"
            return _error(request, 400, "invalid_request_error", msg)
        newest = list(reversed(self.batches))
        after, before = request.query.get("after_id"), request.query.get("before_id")
        if after in self.batches:
            newest = newest[newest.index(after) + 1 :]
        elif before in self.batches:
            newest = newest[: newest.index(before)]
        page = newest[: min(limit, self.max_page)]
        data = [self.batch_json(self.batches[i]) for i in page]
        return web.json_response(
            {
                "data": data,
                "has_more": len(newest) > len(page),
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
            }
        )

    async def _retrieve(self, request: web.Request) -> web.StreamResponse:
        batch = self._batch(request)
        if batch is None:
            return self._unknown(request)
        if self.auto_advance:
            await self._step(batch)
        return web.json_response(self.batch_json(batch))

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        batch = self._batch(request)
        if batch is None:
            return self._unknown(request)
        if batch.status == "in_progress":
            batch.status, batch.cancel_initiated_at = "canceling", self.clock
        return web.json_response(self.batch_json(batch))

    async def _results(self, request: web.Request) -> web.StreamResponse:
        batch = self._batch(request)
        if batch is None:
            return self._unknown(request)
        if batch.status != "ended":
            msg = f"Message Batch {batch.id} has not finished processing; its results come then"
            return _error(request, 400, "invalid_request_error", msg)
        lines = [
            checked(MessageBatchIndividualResponse, {"custom_id": i.custom_id, "result": i.result})
            for i in batch.items
        ]
        random.Random(f"{self.seed}:{batch.id}:results").shuffle(lines)
        text = "".join(json.dumps(line) + "\n" for line in lines)
        return web.Response(text=text, content_type="application/x-jsonl")

    def _batch(self, request: web.Request) -> Batch | None:
        return self.batches.get(request.match_info["batch_id"])

    def _unknown(self, request: web.Request) -> web.StreamResponse:
        msg = f"Message Batch {request.match_info['batch_id']} not found"
        return _error(request, 404, "not_found_error", msg)

    # --- creation --------------------------------------------------------------------------

    def _batch_problem(self, body: Any) -> str | None:
        """The API's 400 message for a batch body it refuses at creation, or None."""
        if not isinstance(body, dict) or not isinstance(body.get("requests"), list):
            return "requests: Field required"
        for name in body:
            if name != "requests":
                return f"{name}: Extra inputs are not permitted"
        requests = body["requests"]
        if not requests:
            return "requests: List should have at least 1 item after validation, not 0"
        if len(requests) > self.max_batch_requests:
            return (
                f"requests: List should have at most {self.max_batch_requests} items after "
                f"validation, not {len(requests)}"
            )
        seen: set[str] = set()
        for i, entry in enumerate(requests):
            problem = _entry_problem(i, entry, seen)
            if problem is not None:
                return problem
            seen.add(entry["custom_id"])
        return None

    def _new_batch(self, requests: list[dict[str, Any]]) -> Batch:
        batch_id = f"msgbatch_fake{len(self.batches) + 1:016d}"
        items = [BatchItem(r["custom_id"], r["params"]) for r in requests]
        batch = Batch(batch_id, self.clock, items, run_order(self.seed, batch_id, len(items)))
        self.batches[batch_id] = batch
        self.submitted.update(item.custom_id for item in items)
        return batch

    # --- processing ------------------------------------------------------------------------

    def _ended(self, batch: Batch) -> bool:
        return batch.status == "ended"

    async def _step(self, batch: Batch) -> None:
        """One step of simulated time: the next group runs (or the batch ends)."""
        if batch.status == "ended":
            return
        batch.steps += 1
        pending = batch.pending()
        if batch.status == "canceling":
            for item in pending:
                item.result = {"type": "canceled"}
        elif self.clock >= batch.expires_at:
            for item in pending:
                item.result = {"type": "expired"}
        else:
            await self._run_group(pending[: self.group])
        if not batch.pending():
            batch.status, batch.ended_at = "ended", self.clock
        self.clock += self.step_s

    async def _run_group(self, group: list[BatchItem]) -> None:
        """Run requests side by side: each looks the cache up before any of them writes."""
        lookups: list[Lookup] = []
        for item in group:
            item.result, lookup = await self._run(item)
            if lookup is not None:
                lookups.append(lookup)
        for lookup in lookups:
            self.cache.commit(lookup, self.clock)

    async def _run(self, item: BatchItem) -> tuple[dict[str, Any], Lookup | None]:
        scripted = self.outcomes.get(item.custom_id)
        if scripted == EXPIRED:
            return {"type": "expired"}, None
        if scripted is not None:
            fault = scripted if isinstance(scripted, Fault) else Fault(scripted)
            return self._scripted_error(item.params, fault), None
        params = item.params
        problem = _invalid(params, False) or cache_problem(params)
        if problem is None and count_input_tokens(params, self.words) > self.context_window:
            tokens = count_input_tokens(params, self.words)
            problem = f"prompt is too long: {tokens} tokens > {self.context_window} maximum"
        if problem is not None:
            return _errored("invalid_request_error", problem), None
        lookup = self.cache.lookup(params, self.clock, self.words)
        reply = await self._reply(params)
        if isinstance(reply, WireReply):  # a recorded reply, sent as it is: no cache accounting
            if reply.status == 200:
                return {"type": "succeeded", "message": reply.body}, None
            error = reply.body.get("error", {}) if isinstance(reply.body, dict) else {}
            return _errored(str(error.get("type")), str(error.get("message"))), None
        self._ran += 1
        message = dict(reply) if isinstance(reply, dict) else self.message(params, reply)
        message["id"] = f"msg_fakebatch{self._ran:08d}"
        if isinstance(message.get("usage"), dict):
            message["usage"] = {**message["usage"], **lookup.usage(), "service_tier": "batch"}
        return {"type": "succeeded", "message": message}, lookup

    def _scripted_error(self, params: Any, fault: Fault) -> dict[str, Any]:
        if fault.kind not in _ERRORS:
            raise ValueError(f"outcome {fault.kind!r} is no error; known: {sorted(_ERRORS)}")
        _, type_, message = _ERRORS[fault.kind]
        if fault.kind == PROMPT_TOO_LONG:
            tokens = count_input_tokens(params, self.words)
            message = message.format(n=tokens, max=self.context_window)
        return _errored(type_, fault.message or message)

    # --- /v1/messages ----------------------------------------------------------------------

    def _parse(self, request: web.Request, raw: bytes) -> dict[str, Any] | web.StreamResponse:
        body = super()._parse(request, raw)
        if isinstance(body, dict) and (problem := cache_problem(body)) is not None:
            return _error(request, 400, "invalid_request_error", problem)
        return body

    async def _payload(
        self, request: web.Request, body: dict[str, Any], fault: Fault | None
    ) -> dict[str, Any] | web.StreamResponse:
        if request[COUNTING]:
            return await super()._payload(request, body, fault)
        lookup = self.cache.lookup(body, self.clock, self.words)
        payload = await super()._payload(request, body, fault)
        if isinstance(payload, dict) and isinstance(payload.get("usage"), dict):
            self.cache.commit(lookup, self.clock)
            payload["usage"].update(lookup.usage())
        return payload


def _entry_problem(i: int, entry: Any, seen: set[str]) -> str | None:
    """The API's 400 message for one entry of a batch's ``requests``, or None."""
    where = f"requests.{i}"
    if not isinstance(entry, dict):
        return f"{where}: Input should be a valid dictionary"
    for name in ("custom_id", "params"):
        if name not in entry:
            return f"{where}.{name}: Field required"
    for name in entry:
        if name not in ("custom_id", "params"):
            return f"{where}.{name}: Extra inputs are not permitted"
    custom_id = entry["custom_id"]
    if not isinstance(custom_id, str):
        return f"{where}.custom_id: Input should be a valid string"
    if len(custom_id) > 64:
        return f"{where}.custom_id: String should have at most 64 characters"
    if not CUSTOM_ID.match(custom_id):
        return f"{where}.custom_id: String should match pattern '{CUSTOM_ID.pattern}'"
    if custom_id in seen:
        return f"{where}.custom_id: Duplicate custom_id {custom_id!r}: each must be unique"
    if not isinstance(entry["params"], dict):
        return f"{where}.params: Input should be a valid dictionary"
    return None


def _errored(type_: str, message: str) -> dict[str, Any]:
    return {
        "type": "errored",
        "error": {"type": "error", "error": {"type": type_, "message": message}},
    }


def _rfc3339(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    when = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")
    return when.replace("+00:00", "Z")
