"""A fake Gemini API with batch mode and implicit caching beside generateContent.

``FakeGeminiBatchServer`` is ``FakeGeminiServer`` (same responder, faults, word tokens) plus
``models/{model}:batchGenerateContent`` (inline requests) and ``batches`` get, list (newest
first, paged) and ``:cancel``: each batch a long-running operation shaped as the real API sends
it, checked on the way out by ``check_operation`` (google-genai's own conversion to ``BatchJob``).
Simulated time: a get (or ``advance``) is one step, pending → running, then ``group`` requests
run a step (seeded random order) until the batch succeeds; ``fail`` fails it, a batch older than
``WINDOW`` expires without output, a cancel keeps what has run. ``outcomes`` scripts a request's
end by metadata key (a fault kind: a google.rpc.Status; ``blocked``: a blocked prompt). Both paths
report ``cachedContentTokenCount`` for a prompt prefix seen before (at least ``min_cache_tokens``
words: 1024, 4096 for a Pro model); ``submitted`` counts submissions per key.
"""

from __future__ import annotations

import copy
import json
import random
import re
import string
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from aiohttp import web

from tests.support.fake_batches import SimulatedBatches, run_order
from tests.support.fake_server import UNAUTHORIZED, Responder, WireReply, default_responder
from tests.support.gemini_server import (
    _ERRORS,
    API_VERSIONS,
    CONTEXT_LENGTH,
    DAILY_QUOTA,
    KEY_INVALID,
    RATE_LIMIT,
    BadRequest,
    FakeGeminiServer,
    Fault,
    _error,
    _rate_limited,
    _too_long,
    _TooLong,
    _unknown_name,
)

START = 1_767_225_600.0  # the simulated clock's start: 2026-01-01T00:00:00Z
WINDOW = 48 * 3600.0  # a batch pending or running longer expires (the batch-mode guide)
MAX_BODY_BYTES = 20 * 1024**2  # "Request payload size exceeds the limit: 20971520 bytes."
MAX_REQUESTS = 10_000  # not Google's (it documents none): needlescope's client limit
META_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"
PENDING = "BATCH_STATE_PENDING"
RUNNING = "BATCH_STATE_RUNNING"
SUCCEEDED = "BATCH_STATE_SUCCEEDED"
FAILED = "BATCH_STATE_FAILED"
CANCELLED = "BATCH_STATE_CANCELLED"
EXPIRED = "BATCH_STATE_EXPIRED"
ENDED = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED})
FLASH_CACHE_MIN, PRO_CACHE_MIN = 1024, 4096  # implicit caching's least prompt, in tokens
# google.rpc.Code of each error status Google's envelope names.
RPC_CODES = {
    "CANCELLED": 1,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "UNAUTHENTICATED": 16,
}
_BATCH_FIELDS = frozenset(
    {"displayName", "display_name", "inputConfig", "input_config", "model", "priority"}
)
_ID_CHARS = string.ascii_lowercase + string.digits
_INT64 = re.compile(r"^\d+$")


@dataclass
class BatchItem:
    request: Any  # the GenerateContentRequest, as sent
    metadata: dict[str, Any]
    result: dict[str, Any] | None = None  # its InlinedResponse, once it has run

    @property
    def key(self) -> str | None:
        key = self.metadata.get("key")
        return key if isinstance(key, str) else None


@dataclass
class Batch:
    id: str
    model: str  # the model id, as generateContent's URL names it
    display_name: str
    created_at: float
    items: list[BatchItem]
    order: list[int]  # the order its requests run (and their responses are listed) in
    state: str = PENDING
    updated_at: float = 0.0
    ended_at: float | None = None
    error: dict[str, Any] | None = None  # the operation's google.rpc.Status, once ended so
    failing: str | None = None  # the message it fails with at its next step
    steps: int = 0

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    def run(self) -> list[BatchItem]:
        return [self.items[i] for i in self.order if self.items[i].result is not None]

    def pending(self) -> list[BatchItem]:
        return [self.items[i] for i in self.order if self.items[i].result is None]


class _Call(NamedTuple):
    """A batch-mode request: what it does and what its URL names (a batch id, or the model)."""

    kind: str  # "create", "get", "list", "cancel" or "unknown"
    version: str
    name: str


class FakeGeminiBatchServer(FakeGeminiServer, SimulatedBatches[Batch, float]):
    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        group: int = 4,
        step_s: float = 1.0,
        auto_advance: bool = True,
        batch_mode: bool = True,
        implicit_cache: bool = True,
        min_cache_tokens: int | None = None,
        max_batch_requests: int = MAX_REQUESTS,
        max_batch_bytes: int = MAX_BODY_BYTES,
        **kwargs: Any,
    ) -> None:
        super().__init__(responder, **kwargs)
        self._init_batches(group, step_s, auto_advance, max_batch_requests, max_batch_bytes)
        self.batch_mode = batch_mode  # False: every batch endpoint is a 404, as on a proxy
        self.implicit_cache = implicit_cache
        self.min_cache_tokens = min_cache_tokens  # None: by the model (Flash or Pro)
        self.max_page = 1000  # a list page's largest size
        self.clock = START
        self.outcomes: dict[str, str | Fault] = {}  # metadata key -> how its request ends
        self.batch_generated = 0  # batch requests answered by the model
        self.last_batch_body: dict[str, Any] | None = None
        self._prompts: dict[str, list[tuple[str, ...]]] = {}  # model -> prompts seen, as words

    def reset_counts(self) -> None:
        super().reset_counts()
        self.batch_requests = self.batch_generated = 0

    # --- simulated time --------------------------------------------------------------------

    def fail(self, batch_id: str, message: str = "The batch failed: internal error.") -> None:
        """Fail the batch at its next step (an INTERNAL google.rpc.Status)."""
        self.batches[batch_id].failing = message

    def cancel_batch(self, batch: Batch) -> None:
        """Cancel ``batch`` as ``:cancel`` does: what has run stays in its output."""
        if not batch.ended:
            self._end(batch, CANCELLED, {"code": RPC_CODES["CANCELLED"], "message": "CANCELLED"})

    def _ended(self, batch: Batch) -> bool:
        return batch.ended

    async def _step(self, batch: Batch) -> None:
        if batch.ended:
            return
        self.clock += self.step_s
        batch.steps += 1
        batch.updated_at = self.clock
        if batch.failing is not None:
            self._end(batch, FAILED, {"code": RPC_CODES["INTERNAL"], "message": batch.failing})
        elif self.clock - batch.created_at > WINDOW:
            self._end(batch, EXPIRED, None)
        elif batch.state == PENDING:
            batch.state = RUNNING
        else:
            for item in batch.pending()[: self.group]:
                item.result = await self._run(batch, item)
            if not batch.pending():
                self._end(batch, SUCCEEDED, None)

    def _end(self, batch: Batch, state: str, error: dict[str, Any] | None) -> None:
        batch.state, batch.error = state, error
        batch.ended_at = batch.updated_at = self.clock

    # --- the operation ---------------------------------------------------------------------

    def operation(self, batch: Batch) -> dict[str, Any]:
        """The batch's long-running operation, as batches.get answers (keys in Google's order)."""
        meta: dict[str, Any] = {
            "@type": META_TYPE,
            "model": f"models/{batch.model}",
            "displayName": batch.display_name,
        }
        output = _inlined([item.result for item in batch.run() if item.result is not None])
        if output is not None and batch.state in (SUCCEEDED, CANCELLED):
            meta["output"] = output  # an expired batch has no results to retrieve (the guide)
        meta["createTime"] = _rfc3339(batch.created_at)
        if batch.ended_at is not None:
            meta["endTime"] = _rfc3339(batch.ended_at)
        meta["updateTime"] = _rfc3339(batch.updated_at or batch.created_at)
        meta["batchStats"] = _stats(batch)
        meta["state"] = batch.state
        meta["name"] = f"batches/{batch.id}"
        op: dict[str, Any] = {"name": f"batches/{batch.id}", "metadata": meta}
        if batch.ended:
            op["done"] = True
        if batch.state == SUCCEEDED:
            op["response"] = {"@type": OUTPUT_TYPE, **(output or {"inlinedResponses": {}})}
        elif batch.error is not None:
            op["error"] = batch.error
        check_operation(op)
        return op

    # --- routing ---------------------------------------------------------------------------

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/{version}/batches", self._handle)
        router.add_get("/{version}/batches/{target}", self._handle)
        super()._add_routes(router)  # POST /{version}/{collection}/{target}: cancel is one

    def _route(self, request: web.Request) -> web.StreamResponse | None:
        call = _call_of(request)
        if call is None:
            return super()._route(request)
        if not self.batch_mode or call.version not in API_VERSIONS or call.kind == "unknown":
            return web.Response(status=404, text="<html><body>Error 404 (Not Found)</body></html>")
        self.batch_requests += 1
        return None

    def _parse(self, request: web.Request, raw: bytes) -> dict[str, Any] | web.StreamResponse:
        call = _call_of(request)
        if call is None:
            return super()._parse(request, raw)
        if call.kind != "create":
            return {}  # get, list and cancel take no body
        if len(raw) > self.max_batch_bytes:
            return _error(
                400,
                f"Request payload size exceeds the limit: {self.max_batch_bytes} bytes.",
                "INVALID_ARGUMENT",
            )
        return super()._parse(request, raw)

    def _keep(self, request: web.Request, body: dict[str, Any]) -> None:
        call = _call_of(request)
        if call is None:
            super()._keep(request, body)
        elif call.kind == "create":
            self.last_batch_body = body

    def _fault_response(
        self, request: web.Request, body: dict[str, Any], fault: Fault
    ) -> web.StreamResponse | None:
        call = _call_of(request)
        if call is not None and fault.kind in (RATE_LIMIT, DAILY_QUOTA):
            return _rate_limited(call.name if call.kind == "create" else "batches", fault)
        return super()._fault_response(request, body, fault)

    async def _payload(
        self, request: web.Request, body: dict[str, Any], fault: Fault | None
    ) -> dict[str, Any] | web.StreamResponse:
        call = _call_of(request)
        if call is None:
            return await super()._payload(request, body, fault)
        if call.kind == "create":
            return self._create(call, body)
        if call.kind == "list":
            return self._list(request)
        batch = self.batches.get(call.name)
        if batch is None:
            return _error(404, "Requested entity was not found.", "NOT_FOUND")
        if call.kind == "cancel":
            self.cancel_batch(batch)
            return {}
        if self.auto_advance:
            await self._step(batch)
        return self.operation(batch)

    # --- batches.create and batches.list ---------------------------------------------------

    def _create(self, call: _Call, body: dict[str, Any]) -> dict[str, Any] | web.Response:
        if self.models is not None and call.name not in self.models:
            return _error(
                404,
                f"models/{call.name} is not found for API version {call.version}, or is not "
                "supported for batchGenerateContent. Call ListModels to see the list of "
                "available models and their supported methods.",
                "NOT_FOUND",
            )
        try:
            display_name, items = self._batch_input(call.name, body)
        except BadRequest as e:
            return _error(400, str(e), "INVALID_ARGUMENT")
        self.clock += self.step_s
        rng = random.Random(f"{self.seed}:{len(self.batches)}")
        batch_id = "".join(rng.choice(_ID_CHARS) for _ in range(36))
        order = run_order(self.seed, batch_id, len(items))
        batch = Batch(batch_id, call.name, display_name, self.clock, items, order)
        self.batches[batch_id] = batch
        self.submitted.update(item.key for item in items if item.key is not None)
        return self.operation(batch)

    def _batch_input(self, model: str, body: dict[str, Any]) -> tuple[str, list[BatchItem]]:
        """(display name, items) of a batchGenerateContent body; BadRequest as the API words it."""
        for name in body:
            if name != "batch":
                raise BadRequest(_unknown_name(name, ""))
        batch = body.get("batch")
        if not isinstance(batch, dict):
            raise BadRequest("* BatchGenerateContentRequest.batch: batch is not specified")
        for name in batch:
            if name not in _BATCH_FIELDS:
                raise BadRequest(_unknown_name(name, "batch"))
        display_name = _field(batch, "displayName")
        if not isinstance(display_name, str) or not display_name:
            raise BadRequest("* GenerateContentBatch.display_name: display_name is required")
        if batch.get("model") not in (None, f"models/{model}"):
            raise BadRequest(f"batch.model must match the model in the URL (models/{model}).")
        config = _field(batch, "inputConfig")
        if isinstance(config, dict) and _field(config, "fileName") is not None:
            raise BadRequest("this fake takes inline requests only, not an input file")
        requests = _dict(_dict(config).get("requests")).get("requests")
        if not isinstance(requests, list) or not requests:
            raise BadRequest("* GenerateContentBatch.input_config: requests are not specified")
        if len(requests) > self.max_batch_requests:
            raise BadRequest(
                f"* GenerateContentBatch.input_config.requests: {len(requests)} requests, "
                f"over the limit of {self.max_batch_requests}"
            )
        return display_name, [_item(entry, i) for i, entry in enumerate(requests)]

    def _list(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            size = int(request.query.get("pageSize", "50"))
            start = int(request.query.get("pageToken", "page-0").removeprefix("page-"))
        except ValueError:
            return _error(400, "Invalid page size or page token.", "INVALID_ARGUMENT")
        size = max(1, min(size, self.max_page))
        newest = list(reversed(self.batches.values()))
        page: dict[str, Any] = {}
        if newest[start : start + size]:  # proto3 JSON leaves an empty list out
            page["operations"] = [self.operation(b) for b in newest[start : start + size]]
        if start + size < len(newest):
            page["nextPageToken"] = f"page-{start + size}"
        return page

    # --- running a request -----------------------------------------------------------------

    async def _run(self, batch: Batch, item: BatchItem) -> dict[str, Any]:
        """The request's InlinedResponse: a response, or the google.rpc.Status it errored with."""
        outcome = self.outcomes.get(item.key) if item.key is not None else None
        fault = self._fault(outcome)
        result: dict[str, Any]
        status = _scripted_status(fault, batch.model) if fault is not None else None
        if status is not None:
            result = {"error": status}
        elif not isinstance(item.request, dict):
            result = {"error": {"code": RPC_CODES["INVALID_ARGUMENT"], "message": "no request"}}
        else:
            result = await self._generated(batch, item.request, fault)
        if item.metadata:
            result["metadata"] = item.metadata
        return result

    async def _generated(
        self, batch: Batch, request: dict[str, Any], fault: Fault | None
    ) -> dict[str, Any]:
        try:
            reply = await self.generate(request, batch.model, fault)
        except BadRequest as e:
            return {"error": {"code": RPC_CODES["INVALID_ARGUMENT"], "message": str(e)}}
        except _TooLong as e:
            return {"error": _rpc_status(_too_long(e.tokens, e.limit))}
        if isinstance(reply, WireReply) and not 200 <= reply.status < 300:
            err = _dict(_dict(reply.body).get("error"))
            code = RPC_CODES.get(str(err.get("status")), RPC_CODES["INTERNAL"])
            return {"error": {"code": code, "message": str(err.get("message") or reply.body)}}
        self.batch_generated += 1
        return {"response": reply.body if isinstance(reply, WireReply) else reply}

    # --- implicit caching ------------------------------------------------------------------

    async def generate(
        self, body: dict[str, Any], model: str, fault: Fault | None
    ) -> dict[str, Any] | WireReply:
        reply = await super().generate(body, model, fault)
        words = prompt_words(body)
        seen = self._prompts.setdefault(model, [])
        hit = max((_common(words, old) for old in seen), default=0)
        seen.append(words)
        if not isinstance(reply, dict) or not self.implicit_cache:
            return reply
        usage = reply.get("usageMetadata")
        if hit < self.cache_minimum(model) or not isinstance(usage, dict):
            return reply
        hit = min(hit, usage.get("promptTokenCount", hit))
        usage = usage | {
            "cachedContentTokenCount": hit,
            "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": hit}],
        }
        return reply | {"usageMetadata": usage}

    def cache_minimum(self, model: str) -> int:
        """The least prompt implicit caching applies to (the caching guide, per model)."""
        if self.min_cache_tokens is not None:
            return self.min_cache_tokens
        return PRO_CACHE_MIN if "pro" in model.lower() else FLASH_CACHE_MIN


def prompt_words(request: dict[str, Any]) -> tuple[str, ...]:
    """The prompt as the model reads it, in the fake's tokens: the system instruction's words,
    then each content's."""
    contents = [request.get("systemInstruction"), *(request.get("contents") or [])]
    words: list[str] = []
    for content in contents:
        for part in _dict(content).get("parts") or []:
            text = _dict(part).get("text")
            words += text.split() if isinstance(text, str) else []
    return tuple(words)


# --- checks against google-genai ---------------------------------------------------------------


def sdk_batch_job(op: dict[str, Any]) -> Any:
    """``op`` as google-genai's ``batches.get`` returns it: a validated ``types.BatchJob``."""
    from google.genai import batches, types

    return types.BatchJob.model_validate(batches._BatchJob_from_mldev(copy.deepcopy(op)))


def sdk_batch_list(page: dict[str, Any]) -> Any:
    """A batches.list page as google-genai's ``batches.list`` reads it."""
    from google.genai import batches, types

    converted = batches._ListBatchJobsResponse_from_mldev(copy.deepcopy(page))
    return types.ListBatchJobsResponse.model_validate(converted)


def check_operation(op: dict[str, Any]) -> None:
    """Assert ``op`` is a batch operation as the API sends it: what the SDK maps (validated by
    its ``BatchJob``) and what it does not (the int64 strings of ``batchStats``, ``done``)."""
    job = sdk_batch_job(op)
    meta = op["metadata"]
    assert re.fullmatch(r"batches/[^/]+", op["name"]) and meta["name"] == op["name"]
    assert meta["@type"] == META_TYPE and job.state is not None
    assert meta["state"].startswith("BATCH_STATE_"), meta["state"]
    for count in meta["batchStats"].values():
        assert isinstance(count, str) and _INT64.match(count) and count != "0", count
    assert op.get("done", False) == (meta["state"] in ENDED)
    assert not ("response" in op and "error" in op)  # a oneof
    if "response" in op:
        assert op["response"]["@type"] == OUTPUT_TYPE
        assert op["response"]["inlinedResponses"] == meta["output"]["inlinedResponses"]
    inlined = job.dest.inlined_responses if job.dest is not None else None
    for item in inlined or []:
        assert (item.response is None) != (item.error is None)


# --- helpers ----------------------------------------------------------------------------------


def _call_of(request: web.Request) -> _Call | None:
    """The batch-mode call ``request`` makes; None for generateContent and countTokens."""
    info = request.match_info
    version = info.get("version", "")
    if "collection" not in info:  # the GET routes
        target = info.get("target", "")
        return _Call("get" if target else "list", version, target)
    name, _, method = info["target"].rpartition(":")
    if info["collection"] == "batches":
        return _Call("cancel" if method == "cancel" and name else "unknown", version, name)
    if method == "batchGenerateContent" and info["collection"] == "models":
        return _Call("create", version, name)
    return None


def _item(entry: Any, index: int) -> BatchItem:
    if not isinstance(entry, dict):
        raise BadRequest(f"* GenerateContentBatch.input_config.requests[{index}]: not an object")
    for name in entry:
        if name not in ("request", "metadata"):
            raise BadRequest(_unknown_name(name, f"batch.input_config.requests.requests[{index}]"))
    metadata = entry.get("metadata", {})
    if not isinstance(metadata, dict):
        raise BadRequest(f"* requests[{index}].metadata: a Struct (a JSON object) expected")
    return BatchItem(entry.get("request"), metadata)


def _scripted_status(fault: Fault, model: str) -> dict[str, Any] | None:
    """The google.rpc.Status a scripted fault ends its request with; None for a fault that is
    no error (a blocked prompt is a response; slow and transport faults do not apply)."""
    if fault.kind in (RATE_LIMIT, DAILY_QUOTA):
        return _rpc_status(_rate_limited(model, fault))
    if fault.kind == CONTEXT_LENGTH:
        return _rpc_status(_too_long(2_000_000, 1_048_576))
    if fault.kind == KEY_INVALID:
        message = "API key not valid. Please pass a valid API key."
        return {"code": RPC_CODES["INVALID_ARGUMENT"], "message": message}
    if fault.kind == UNAUTHORIZED:
        message = "Request had invalid authentication credentials."
        return {"code": RPC_CODES["UNAUTHENTICATED"], "message": message}
    if fault.kind in _ERRORS:
        return _rpc_status(_error(*_ERRORS[fault.kind]))
    return None


def _rpc_status(response: web.Response) -> dict[str, Any]:
    """Google's HTTP error envelope as the google.rpc.Status a batch request carries: the code
    is gRPC's; the details are left out, as google-genai's ``JobError`` has them as strings."""
    assert isinstance(response.body, bytes)
    err = json.loads(response.body)["error"]
    return {"code": RPC_CODES[err["status"]], "message": err["message"]}


def _inlined(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    return {"inlinedResponses": {"inlinedResponses": results}} if results else None


def _stats(batch: Batch) -> dict[str, str]:
    """batchStats: int64 counts as strings, zero counts left out (proto3 JSON)."""
    run = batch.run()
    counts = {
        "requestCount": len(batch.items),
        "successfulRequestCount": sum("response" in _dict(i.result) for i in run),
        "failedRequestCount": sum("error" in _dict(i.result) for i in run),
        "pendingRequestCount": 0 if batch.ended else len(batch.pending()),
    }
    return {k: str(n) for k, n in counts.items() if n}


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """How many leading words ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _field(obj: Any, camel: str) -> Any:
    """A proto field by its JSON name or its proto name (the API takes both)."""
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    obj = _dict(obj)
    return obj.get(camel, obj.get(snake))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rfc3339(seconds: float) -> str:
    """Google's timestamps: UTC, nine fractional digits."""
    whole = int(seconds)
    nanos = round((seconds - whole) * 1e9)
    stamp = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos:09d}Z"
