"""A fake OpenAI API with the Batch API (``/v1/files``, ``/v1/batches``) beside chat completions.

``FakeOpenAIBatchServer`` is ``FakeOpenAIServer`` (same responder, faults, token counts) plus
files (multipart upload, retrieve, content, delete) and batches (create, retrieve, list newest
first with ``after`` paging, cancel); every object is checked against the ``openai`` SDK's types.
Simulated time: each retrieve (or ``advance``) is one step: validating (an input the API refuses
fails the batch) → in_progress (``group`` requests a step, seeded random order) → finalizing →
completed; a cancelling batch ends cancelled, one past its 24 hours (``tick``) expired, their
unrun requests in the error file. ``outcomes`` scripts a request's end by custom id (a fault
kind, answered inside its line; ``EXPIRED``: never runs); ``api_faults`` queues HTTP statuses
for the next batch-API requests; ``submitted`` counts submissions per custom id.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from openai.types import Batch as SdkBatch
from openai.types import FileDeleted, FileObject

from tests.support.fake_batches import SimulatedBatches, checked, list_limit, run_order
from tests.support.fake_server import UNAUTHORIZED, Responder, WireReply, default_responder
from tests.support.openai_server import (
    _ERRORS,
    EMPTY_CHOICES,
    RATE_LIMIT,
    FakeOpenAIServer,
    Fault,
    error_reply,
    unsupported,
)

EXPIRED = "expired"  # an outcome: the request never runs, so the batch expires
START = 1_767_225_600  # the simulated clock's start: 2026-01-01T00:00:00Z
DAY = 86_400  # a batch's window
FILE_DAYS = 30  # how long an uploaded batch file is kept
ENDPOINTS = frozenset(  # BatchCreateParams.endpoint
    {
        "/v1/responses",
        "/v1/chat/completions",
        "/v1/embeddings",
        "/v1/completions",
        "/v1/moderations",
        "/v1/images/generations",
        "/v1/images/edits",
        "/v1/videos",
    }
)
PURPOSES = frozenset({"assistants", "batch", "fine-tune", "vision", "user_data"})  # uploadable
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# The message of a request in the error file that never ran, by its code.
UNRUN = {
    "batch_expired": "This request could not be executed before the completion window expired.",
    "batch_cancelled": "This request was not executed because the batch was cancelled.",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class StoredFile:
    obj: dict[str, Any]  # its FileObject
    content: bytes


@dataclass
class BatchItem:
    custom_id: str
    body: dict[str, Any]
    line: dict[str, Any] | None = None  # its output or error line, once it has one


@dataclass
class Batch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str] | None
    created_at: int
    status: str = "validating"
    items: list[BatchItem] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # the order its requests run in
    errors: list[dict[str, Any]] = field(default_factory=list)  # why it failed validation
    times: dict[str, int] = field(default_factory=dict)  # "in_progress_at" … "cancelled_at"
    output_file_id: str | None = None
    error_file_id: str | None = None
    model: str | None = None
    steps: int = 0

    @property
    def expires_at(self) -> int:
        return self.created_at + DAY

    def pending(self) -> list[BatchItem]:
        return [self.items[i] for i in self.order if self.items[i].line is None]


class FakeOpenAIBatchServer(FakeOpenAIServer, SimulatedBatches[Batch, int]):
    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        group: int = 4,
        step_s: int = 1,
        auto_advance: bool = True,
        max_batch_requests: int = 50_000,
        max_batch_bytes: int = 200 * 1024**2,
        **kwargs: Any,
    ) -> None:
        super().__init__(responder, **kwargs)
        self._init_batches(group, step_s, auto_advance, max_batch_requests, max_batch_bytes)
        self.max_page = 100  # a list page's largest size (lower it to test paging)
        self.clock = START
        self.files: dict[str, StoredFile] = {}
        self.outcomes: dict[str, str | Fault] = {}  # custom id -> how its request ends
        # Statuses the next batch-API requests fail with (None: that one is answered).
        self.api_faults: deque[int | None] = deque()
        self._ran = 0  # batch requests run, for their ids

    def batch_json(self, batch: Batch) -> dict[str, Any]:
        """The batch's Batch object."""
        lines = [item.line for item in batch.items if item.line is not None]
        done = sum(1 for line in lines if _succeeded(line))
        obj: dict[str, Any] = {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "model": batch.model,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": batch.created_at,
            "in_progress_at": None,
            "expires_at": batch.expires_at,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {
                "total": len(batch.items),
                "completed": done,
                "failed": len(lines) - done,
            },
            "metadata": batch.metadata,
        }
        obj.update(batch.times)
        return checked(SdkBatch, obj)

    # --- routes ----------------------------------------------------------------------------

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        super()._add_routes(router)
        router.add_post("/v1/files", self._api(self._upload))
        router.add_get("/v1/files/{file_id}", self._api(self._file))
        router.add_delete("/v1/files/{file_id}", self._api(self._delete))
        router.add_get("/v1/files/{file_id}/content", self._api(self._content))
        router.add_post("/v1/batches", self._api(self._create))
        router.add_get("/v1/batches", self._api(self._list))
        router.add_get("/v1/batches/{batch_id}", self._api(self._retrieve))
        router.add_post("/v1/batches/{batch_id}/cancel", self._api(self._cancel))

    def _api(self, handler: Handler) -> Handler:
        async def route(request: web.Request) -> web.StreamResponse:
            self.requests += 1
            self.batch_requests += 1
            self._record(request)
            if self.api_key is not None and self._key(request) != self.api_key:
                message = f"Incorrect API key provided: {self._key(request)}."
                return _error(401, message, code="invalid_api_key")
            status = self.api_faults.popleft() if self.api_faults else None
            if status is not None:
                return _error(status, f"fake HTTP {status}", "server_error")
            return await handler(request)

        return route

    # --- files -----------------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        if not request.content_type.startswith("multipart/"):
            return _error(400, "Invalid file upload: expected multipart/form-data")
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField):
            return _error(400, "Missing required parameter: 'file'.", param="file")
        if purpose not in PURPOSES:
            message = f"Invalid value for 'purpose': {purpose!r}."
            return _error(400, message, param="purpose", code="invalid_value")
        if purpose == "batch" and not upload.filename.endswith(".jsonl"):
            return _error(400, "Invalid file format for Batch API. Must be .jsonl", param="file")
        stored = self._store(upload.file.read(), upload.filename, str(purpose))
        return web.json_response(stored.obj)

    async def _file(self, request: web.Request) -> web.StreamResponse:
        stored = self.files.get(request.match_info["file_id"])
        return web.json_response(stored.obj) if stored else _no_file(request)

    async def _content(self, request: web.Request) -> web.StreamResponse:
        stored = self.files.get(request.match_info["file_id"])
        if stored is None:
            return _no_file(request)
        return web.Response(body=stored.content, content_type="application/octet-stream")

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        if self.files.pop(file_id, None) is None:
            return _no_file(request)
        deleted = {"id": file_id, "object": "file", "deleted": True}
        return web.json_response(checked(FileDeleted, deleted))

    def _store(self, content: bytes, filename: str, purpose: str) -> StoredFile:
        file_id = f"file-fake{len(self.files) + 1:016d}"
        expires = self.clock + FILE_DAYS * DAY if purpose in ("batch", "batch_output") else None
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": self.clock,
            "expires_at": expires,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
        }
        stored = StoredFile(checked(FileObject, obj), content)
        self.files[file_id] = stored
        return stored

    # --- batches ---------------------------------------------------------------------------

    async def _create(self, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        problem = self._create_problem(body)
        if problem is not None:
            return problem
        batch_id = f"batch_fake{len(self.batches) + 1:016d}"
        batch = Batch(
            batch_id, body["input_file_id"], body["endpoint"], body.get("metadata"), self.clock
        )
        self.batches[batch_id] = batch
        content = self.files[batch.input_file_id].content
        self.submitted.update(cid for _, entry in _entries(content) if (cid := _custom_id(entry)))
        return web.json_response(self.batch_json(batch))

    def _create_problem(self, body: dict[str, Any]) -> web.Response | None:
        """The API's 400 for a create body it refuses, or None."""
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(body.get(name), str):
                return _error(400, f"Missing required parameter: '{name}'.", param=name)
        if body["endpoint"] not in ENDPOINTS:
            supported = ", ".join(sorted(ENDPOINTS))
            message = f"Invalid value: '{body['endpoint']}'. Supported values are: {supported}."
            return _error(400, message, param="endpoint", code="invalid_value")
        if body["completion_window"] != "24h":
            message = f"Invalid value: '{body['completion_window']}'. Supported values are: '24h'."
            return _error(400, message, param="completion_window", code="invalid_value")
        problem = _metadata_problem(body.get("metadata"))
        if problem is not None:
            return _error(400, problem, param="metadata")
        stored = self.files.get(body["input_file_id"])
        if stored is None:
            message = f"Invalid 'input_file_id': '{body['input_file_id']}'. No such file."
            return _error(400, message, param="input_file_id")
        if stored.obj["purpose"] != "batch":
            message = f"The file {body['input_file_id']} was not uploaded with purpose 'batch'."
            return _error(400, message, param="input_file_id")
        return None

    async def _list(self, request: web.Request) -> web.StreamResponse:
        limit = list_limit(request)
        if not 1 <= limit <= 100:
            message = f"Invalid 'limit': integer between 1 and 100 expected, got {limit}."
            return _error(400, message, param="limit")
        newest = list(reversed(self.batches))
        after = request.query.get("after")
        if after in self.batches:
            newest = newest[newest.index(after) + 1 :]
        page = newest[: min(limit, self.max_page)]
        return web.json_response(
            {
                "object": "list",
                "data": [self.batch_json(self.batches[i]) for i in page],
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
                "has_more": len(newest) > len(page),
            }
        )

    async def _retrieve(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _no_batch(request)
        if self.auto_advance:
            await self._step(batch)
        return web.json_response(self.batch_json(batch))

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _no_batch(request)
        if batch.status in ENDED:
            message = f"Cannot cancel a batch with status '{batch.status}'."
            return _error(409, message)
        if batch.status != "cancelling":
            batch.status = "cancelling"
            batch.times["cancelling_at"] = self.clock
        return web.json_response(self.batch_json(batch))

    # --- processing ------------------------------------------------------------------------

    def _ended(self, batch: Batch) -> bool:
        return batch.status in ENDED

    async def _step(self, batch: Batch) -> None:
        """One step of simulated time."""
        if batch.status in ENDED:
            return
        batch.steps += 1
        if batch.status == "validating":
            self._validate(batch)
        elif batch.status == "cancelling":
            self._end(batch, "cancelled")
        elif batch.status == "finalizing":
            self._end(batch, "completed")
        elif self.clock >= batch.expires_at:
            self._end(batch, "expired")
        else:
            await self._run_group(batch)
        self.clock += self.step_s

    def _validate(self, batch: Batch) -> None:
        """in_progress, or failed with the errors the API reports for a bad input file."""
        content = self.files[batch.input_file_id].content
        entries = list(_entries(content))
        errors: list[dict[str, Any]] = []
        if len(content) > self.max_batch_bytes:
            message = (
                f"The batch input file is larger than the {self.max_batch_bytes} maximum. "
                "Please try again with a smaller batch."
            )
            errors.append(_batch_error("file_too_large", message))
        if len(entries) > self.max_batch_requests:
            message = (
                f"The batch input file has {len(entries)} requests, over the "
                f"{self.max_batch_requests} maximum."
            )
            errors.append(_batch_error("too_many_requests", message))
        seen: set[str] = set()
        for number, entry in entries:
            problem = _line_problem(entry, batch.endpoint, seen)
            if problem is not None:
                errors.append(_batch_error(*problem, line=number))
            elif isinstance(entry, dict):
                seen.add(entry["custom_id"])
        if not entries:
            errors.append(_batch_error("empty_file", "The batch input file is empty."))
        if errors:
            batch.status, batch.errors = "failed", errors
            batch.times["failed_at"] = self.clock
            return
        batch.items = [BatchItem(e["custom_id"], e["body"]) for _, e in entries]
        batch.order = run_order(self.seed, batch.id, len(batch.items))
        batch.model = str(batch.items[0].body.get("model"))
        batch.status = "in_progress"
        batch.times["in_progress_at"] = self.clock

    async def _run_group(self, batch: Batch) -> None:
        runnable = [i for i in batch.pending() if self.outcomes.get(i.custom_id) != EXPIRED]
        for item in runnable[: self.group]:
            item.line = await self._run(item)
        if len(runnable) > self.group:
            return
        if batch.pending():  # only requests that never run are left: the window passes
            self._end(batch, "expired")
        else:
            batch.status = "finalizing"
            batch.times["finalizing_at"] = self.clock

    async def _run(self, item: BatchItem) -> dict[str, Any]:
        """The request's output line: its reply, as /v1/chat/completions would answer it."""
        self._ran += 1
        scripted = self.outcomes.get(item.custom_id)
        fault = Fault(scripted) if isinstance(scripted, str) else scripted
        status, body = await self._respond(item.body, fault)
        response = {"status_code": status, "request_id": f"req_fake{self._ran:016d}", "body": body}
        return _output(self._ran, item.custom_id, response, None)

    async def _respond(self, body: dict[str, Any], fault: Fault | None) -> tuple[int, Any]:
        if not isinstance(body.get("messages"), list) or not isinstance(body.get("model"), str):
            message = "We could not parse the JSON body of your request."
            return 400, error_reply(400, message, "invalid_request_error").body
        scripted = _scripted(body, fault)
        if scripted is not None:
            return scripted.status, scripted.body
        refused = unsupported(body)
        if refused is not None:
            return refused.status, refused.body
        reply = await self._reply(body)
        if isinstance(reply, WireReply):
            return reply.status, reply.body
        payload = dict(reply) if isinstance(reply, dict) else self.completion(body, reply)
        if fault is not None and fault.kind == EMPTY_CHOICES:
            payload["choices"] = []
        return 200, payload

    def _end(self, batch: Batch, status: str) -> None:
        """End the batch: its unrun requests in the error file, and both files written."""
        code = {"expired": "batch_expired", "cancelled": "batch_cancelled"}.get(status)
        for item in batch.pending():
            assert code is not None, f"batch {batch.id} completed with requests unrun"
            self._ran += 1
            error = {"code": code, "message": UNRUN[code]}
            item.line = _output(self._ran, item.custom_id, None, error)
        lines = [item.line for item in batch.items if item.line is not None]
        rng = random.Random(f"{self.seed}:{batch.id}:results")
        for name, chosen in (
            ("output", [line for line in lines if _succeeded(line)]),
            ("error", [line for line in lines if not _succeeded(line)]),
        ):
            if not chosen:
                continue
            rng.shuffle(chosen)
            content = "".join(json.dumps(line) + "\n" for line in chosen).encode()
            stored = self._store(content, f"{batch.id}_{name}.jsonl", "batch_output")
            setattr(batch, f"{name}_file_id", stored.obj["id"])
        batch.status = status
        batch.times[f"{status}_at"] = self.clock


def _scripted(body: dict[str, Any], fault: Fault | None) -> WireReply | None:
    """The error reply a scripted fault answers with, or None."""
    if fault is None or fault.kind == EMPTY_CHOICES:
        return None
    if fault.kind == RATE_LIMIT:
        message = f"Rate limit reached for {body['model']} on requests per min (RPM)"
        return error_reply(429, message, "requests", code="rate_limit_exceeded")
    if fault.kind == UNAUTHORIZED:
        return error_reply(401, "Incorrect API key provided.", "invalid_request_error")
    if fault.kind in _ERRORS:
        return error_reply(*_ERRORS[fault.kind])
    raise ValueError(f"outcome {fault.kind!r} is not a reply; an HTTP fault has no batch line")


_NOT_JSON = object()  # an input line that is not JSON


def _entries(content: bytes) -> list[tuple[int, Any]]:
    """(line number, parsed JSON or None) of each non-blank line of an input file."""
    entries = []
    for number, raw in enumerate(content.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            entries.append((number, json.loads(raw)))
        except ValueError:
            entries.append((number, _NOT_JSON))
    return entries


def _custom_id(entry: Any) -> str | None:
    value = entry.get("custom_id") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def _line_problem(entry: Any, endpoint: str, seen: set[str]) -> tuple[str, str, str | None] | None:
    """(code, message, param) of an input line the API refuses, or None."""
    if entry is _NOT_JSON or not isinstance(entry, dict):
        return "invalid_json_line", "This line is not parseable as valid JSON.", None
    for name in ("custom_id", "method", "url", "body"):
        if name not in entry:
            return "missing_required_parameter", f"Missing required parameter: '{name}'.", name
    if not isinstance(entry["custom_id"], str) or not entry["custom_id"]:
        return "invalid_request", "The custom_id must be a non-empty string.", "custom_id"
    if entry["custom_id"] in seen:
        message = (
            "The custom_id for this request is a duplicate of another request. The custom_id "
            "parameter must be unique for each request in a batch."
        )
        return "duplicate_custom_id", message, "custom_id"
    if entry["method"] != "POST":
        return "invalid_method", "Only POST requests are supported.", "method"
    if entry["url"] != endpoint:
        message = "The URL provided for this request does not match the batch endpoint."
        return "invalid_url", message, "url"
    if not isinstance(entry["body"], dict):
        return "invalid_request", "The body of this request must be a JSON object.", "body"
    return None


def _metadata_problem(metadata: Any) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or len(metadata) > 16:
        return "Invalid 'metadata': an object of at most 16 keys expected."
    for key, value in metadata.items():
        if len(key) > 64:
            return f"Invalid 'metadata': key {key[:64]!r}… is longer than 64 characters."
        if not isinstance(value, str) or len(value) > 512:
            return f"Invalid 'metadata.{key}': a string of at most 512 characters expected."
    return None


def _batch_error(
    code: str, message: str, param: str | None = None, line: int | None = None
) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


def _output(
    n: int, custom_id: str, response: dict[str, Any] | None, error: dict[str, Any] | None
) -> dict[str, Any]:
    """One line of an output or error file."""
    line_id = f"batch_req_fake{n:016d}"
    return {"id": line_id, "custom_id": custom_id, "response": response, "error": error}


def _succeeded(line: dict[str, Any]) -> bool:
    response = line.get("response")
    return isinstance(response, dict) and 200 <= response["status_code"] < 300


def _error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> web.Response:
    return error_reply(status, message, type_, param, code).response()


def _no_file(request: web.Request) -> web.Response:
    file_id = request.match_info["file_id"]
    return _error(404, f"No such File object: {file_id}", param="id")


def _no_batch(request: web.Request) -> web.Response:
    return _error(404, f"No batch found with id '{request.match_info['batch_id']}'.")
