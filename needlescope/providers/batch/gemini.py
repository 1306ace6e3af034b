"""Gemini's batch mode (``models/{model}:batchGenerateContent``, ``batches/…``) over a
``GeminiProvider``.

A batch is one POST of inline requests, each the body ``complete`` would send, its metadata the
custom id (``key``) and the sampling sent (``sampling``, which Gemini echoes back, so a reply's
fingerprint needs no memory of the submission). The batch is a long-running operation whose
inlined responses are read by the provider's own ``_reply`` and whose per-request
``google.rpc.Status`` errors by its ``_classify``: a batch reply or error means what a
synchronous one means. Inline only: the API takes 20 MB a request body (larger inputs need the
File API, not used here), so a batch is split at ``limits``. Requests an ended batch left
unanswered are reported only for batches this client submitted (or ``remember``s).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from yarl import URL

from needlescope.errors import ProviderError
from needlescope.provenance import serving_fingerprint
from needlescope.provenance.fingerprint import sampling_sent
from needlescope.providers import base
from needlescope.providers.batch.base import (
    BATCH_CANCELED,
    BATCH_EXPIRED,
    BATCH_FAILED,
    BatchLimits,
    BatchRequest,
    BatchResult,
    BatchState,
)
from needlescope.providers.gemini import GeminiProvider
from needlescope.providers.http import as_dict

# The API refuses a body over 20 MiB ("Request payload size exceeds the limit: 20971520
# bytes"); splitting at 20 MB leaves room for the envelope and the display name.
MAX_BODY_BYTES = 20 * 1024**2
_MAX_REQUEST_BYTES = 20_000_000
# Gemini documents no request count for an inline batch: this one keeps a batch's reply (every
# response inline in one JSON document) a size a client can hold.
_MAX_REQUESTS = 10_000
_PAGE = 10  # batches per list request: each carries its inline responses once ended
_NO_ENDPOINT = (404, 405, 501)
# BatchState suffixes (after BATCH_STATE_ or the SDK's JOB_STATE_) after which no more results
# come; a finished operation also says ``done``.
_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED"})
# Where an ended batch's unanswered requests go in ``counts``, and the error each one gets:
# (kind, what happened to it, retryable).
_LEFTOVER = {"CANCELLED": "canceled", "EXPIRED": "expired"}
_UNANSWERED = {
    "CANCELLED": (BATCH_CANCELED, "was canceled before it ran", False),
    "EXPIRED": (BATCH_EXPIRED, "expired (its batch ran out of time) before it ran", True),
    "FAILED": (BATCH_FAILED, "failed with its batch", False),
}
# google.rpc.Code names, by code, and the HTTP status Google's front end sends each with, so a
# batch request's error is classified as the synchronous path classifies the same error.
_RPC_NAMES = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
]
_RPC_HTTP = (200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401)


class GeminiBatches:
    """The ``BatchClient`` of Gemini's batch mode, sharing the provider's session."""

    limits = BatchLimits(max_requests=_MAX_REQUESTS, max_bytes=_MAX_REQUEST_BYTES)

    def __init__(self, provider: GeminiProvider) -> None:
        self.provider = provider
        self._keys: dict[str, list[str]] = {}  # batch id -> the custom ids submitted in it

    def request_bytes(self, item: BatchRequest) -> int:
        return len(self._entry(item)) + 1  # the comma between two requests

    def remember(self, batch_id: str, items: Sequence[BatchRequest]) -> None:
        """Know the requests of a batch submitted elsewhere, so that ``results`` reports those
        it left unanswered."""
        self._keys[_bare(batch_id)] = [item.custom_id for item in items]

    async def submit(self, items: Sequence[BatchRequest], tag: str) -> BatchState:
        """Create one batch of ``items``, its display name ``tag``."""
        payload = self._payload(items, tag)
        url = self.provider._url("batchGenerateContent")
        headers = {"Content-Type": "application/json"}
        data = await self._call("POST", url, data=payload, headers=headers)
        state = self._state(data)
        self.remember(state.batch_id, items)
        return state

    async def state(self, batch_id: str) -> BatchState:
        return self._state(await self._call("GET", self._url(batch_id), batch_id=batch_id))

    async def cancel(self, batch_id: str) -> BatchState:
        await self._call("POST", self._url(batch_id) + ":cancel", batch_id=batch_id)
        return await self.state(batch_id)

    async def listed(self, since: float | None = None) -> list[BatchState]:
        found: list[BatchState] = []
        token: str | None = None
        while True:
            query: dict[str, str | int] = {"pageSize": _PAGE}
            if token:
                query["pageToken"] = token
            url = str(URL(f"{self._root()}/batches").with_query(query))
            page = as_dict(await self._call("GET", url))
            states = [self._state(op) for op in page.get("operations") or ()]
            found += states
            token = page.get("nextPageToken")
            if not isinstance(token, str) or not token or _older_page(states, since):
                break
        found = [s for s in found if since is None or s.created_at is None or s.created_at >= since]
        return sorted(found, key=lambda s: s.created_at or 0.0, reverse=True)

    async def results(self, batch_id: str) -> list[BatchResult]:
        batch_id = _bare(batch_id)
        data = as_dict(await self._call("GET", self._url(batch_id), batch_id=batch_id))
        state = self._state(data)
        if not state.ended:
            raise ProviderError(
                base.BAD_REQUEST,
                f"batch {batch_id} at {self.provider._where} has not ended ({state.status}): "
                "its results come once it has",
            )
        found = [self._result(batch_id, item) for item in self._responses(batch_id, data)]
        answered = {r.custom_id for r in found}
        missing = [k for k in self._keys.get(batch_id, ()) if k not in answered]
        return found + [self._unanswered(batch_id, key, state) for key in missing]

    # --- requests --------------------------------------------------------------------------

    def _entry(self, item: BatchRequest) -> bytes:
        body = self.provider.request_body(item.request)
        metadata = {"key": item.custom_id, "sampling": sampling_sent(body)}
        entry = {"request": body, "metadata": metadata}
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()

    def _payload(self, items: Sequence[BatchRequest], tag: str) -> bytes:
        entries = [self._entry(item) for item in items]
        name = json.dumps(tag, ensure_ascii=False).encode()
        head = b'{"batch":{"displayName":' + name + b',"inputConfig":{"requests":{"requests":['
        payload = head + b",".join(entries) + b"]}}}}"
        problem = self._problem(items, len(payload))
        if problem is not None:
            kind, what = problem
            where = self.provider._where
            message = f"cannot submit a batch to {where}: {what}"
            raise ProviderError(kind, self.provider._scrub(message))
        return payload

    def _problem(self, items: Sequence[BatchRequest], size: int) -> tuple[str, str] | None:
        """(kind, what is wrong) with a batch of ``items`` whose body is ``size`` bytes."""
        ids = [item.custom_id for item in items]
        if not items:
            return base.BAD_REQUEST, "a batch needs at least one request"
        if len(set(ids)) < len(ids):
            return base.BAD_REQUEST, "custom ids repeat within the batch"
        if len(items) > self.limits.max_requests:
            return base.REQUEST_TOO_LARGE, (
                f"{len(items)} requests, over the {self.limits.max_requests} limit"
            )
        if size > MAX_BODY_BYTES:
            return base.REQUEST_TOO_LARGE, (
                f"{size} bytes, over the {MAX_BODY_BYTES} limit of an inline batch"
            )
        return None

    def _root(self) -> str:
        return f"{self.provider.base_url}/{self.provider.api_version}"

    def _url(self, batch_id: str) -> str:
        return f"{self._root()}/batches/{quote(_bare(batch_id), safe='')}"

    async def _call(
        self,
        method: str,
        url: str,
        *,
        batch_id: str | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            status, raw = await self.provider._request(method, url, data=data, headers=headers)
        except ProviderError as e:
            if e.status not in _NO_ENDPOINT:
                raise
            raise self._not_found(e, method, url, batch_id) from None
        return self.provider._json(status, raw)

    def _not_found(
        self, e: ProviderError, method: str, url: str, batch_id: str | None
    ) -> ProviderError:
        # Google's envelope says NOT_FOUND of a batch (or a model) it does not know; any other
        # 404 is a server without the endpoints (a proxy, a compatible server, an old gateway).
        where = self.provider._where
        google = "NOT_FOUND" in str(e)
        if google and batch_id is not None:
            message = f"{where} has no batch {_bare(batch_id)}: {e}"
        elif google and method == "POST":
            message = f"{where} has no batch mode for {self.provider.model}: {e}"
        else:
            path = URL(url).path
            message = f"{where} has no Gemini batch mode (HTTP {e.status} on {method} {path})"
        return ProviderError(base.BAD_REQUEST, self.provider._scrub(message), status=e.status)

    # --- replies ---------------------------------------------------------------------------

    def _state(self, data: Any) -> BatchState:
        op = as_dict(data)
        meta = as_dict(op.get("metadata"))
        name = op.get("name") or meta.get("name")
        status = meta.get("state")
        if not isinstance(name, str) or not name or not isinstance(status, str):
            snippet = self.provider._snippet(json.dumps(data))
            raise self.provider._bad(
                base.BAD_RESPONSE, f"{self.provider._where} sent no batch operation: {snippet}"
            )
        stage = _stage(status)
        ended = stage in _ENDED or op.get("done") is True
        total, counts = _counts(as_dict(meta.get("batchStats")), stage, ended)
        error = as_dict(op.get("error"))
        return BatchState(
            batch_id=_bare(name),
            status=status,
            ended=ended,
            request_count=sum(counts.values()) if total is None else total,
            counts=counts,
            created_at=_seconds(meta.get("createTime")),
            tag=meta.get("displayName") if isinstance(meta.get("displayName"), str) else None,
            error=self._why(error) if stage == "FAILED" and error else None,
        )

    def _why(self, error: dict[str, Any]) -> str:
        name = _rpc_name(error.get("code"))
        message = str(error.get("message") or json.dumps(error))
        return self.provider._snippet(f"{name}: {message}" if name else message)

    def _responses(self, batch_id: str, op: dict[str, Any]) -> list[dict[str, Any]]:
        """The inlined responses: in the operation's ``response`` once it succeeded, else (a
        batch canceled part way) in its metadata's ``output``."""
        meta = as_dict(op.get("metadata"))
        for output in (as_dict(op.get("response")), as_dict(meta.get("output"))):
            inlined = as_dict(output.get("inlinedResponses")).get("inlinedResponses")
            if isinstance(inlined, list):
                return [as_dict(item) for item in inlined]
            if output.get("responsesFile"):
                where = self.provider._where
                msg = f"batch {batch_id} at {where} answered in a file, which is not read here"
                raise self.provider._bad(base.BAD_RESPONSE, msg)
        return []

    def _result(self, batch_id: str, item: dict[str, Any]) -> BatchResult:
        metadata = as_dict(item.get("metadata"))
        key = metadata.get("key")
        if not isinstance(key, str):
            snippet = self.provider._snippet(json.dumps(item))
            where = self.provider._where
            msg = f"results of batch {batch_id} at {where}: a response without its key: {snippet}"
            raise self.provider._bad(base.BAD_RESPONSE, msg)
        if "error" in item:
            return BatchResult(key, error=self._errored(batch_id, key, as_dict(item["error"])))
        sampling = metadata.get("sampling")
        sent = sampling if isinstance(sampling, str) else None
        return self._succeeded(key, item.get("response"), sent)

    def _succeeded(self, key: str, response: Any, sampling: str | None) -> BatchResult:
        try:
            reply = self.provider._reply(200, response, None)
        except ProviderError as e:
            return BatchResult(key, error=e)
        # The sampling sent, as the request's metadata echoes it (else unknown: None, rather
        # than a wrong one).
        fingerprint = replace(serving_fingerprint(response, {}), sampling=sampling)
        if reply.thought:
            self.provider.reasoning = True  # as complete() does: later requests leave it room
        return BatchResult(key, reply=replace(reply, fingerprint=fingerprint))

    def _errored(self, batch_id: str, key: str, status: dict[str, Any]) -> ProviderError:
        """The kind the synchronous path gives the same error, read by the same classifier."""
        code = status.get("code")
        where = f"request {key} of batch {batch_id} at {self.provider._where}"
        if code == 1:
            return ProviderError(BATCH_CANCELED, f"{where} was canceled before it ran")
        http = _http_status(code)
        if http is None:
            detail = self.provider._snippet(json.dumps(status))
            message = self.provider._scrub(f"{where} errored: {detail}")
            return ProviderError(base.PROVIDER_ERROR, message, retryable=True)
        name = status.get("status") or _rpc_name(code)
        envelope = {"error": {**status, "code": http, "status": name}}
        failure = self.provider._classify(http, {}, json.dumps(envelope))
        return ProviderError(
            failure.kind,
            self.provider._scrub(f"{where} errored: {failure.detail}"),
            retryable=failure.retryable,
            retry_after_s=failure.retry_after_s,
        )

    def _unanswered(self, batch_id: str, key: str, state: BatchState) -> BatchResult:
        ended = f"got no response, though its batch ended {state.status}"
        kind, what, retryable = _UNANSWERED.get(
            _stage(state.status), (base.PROVIDER_ERROR, ended, True)
        )
        why = f": {state.error}" if kind == BATCH_FAILED and state.error else ""
        where = f"request {key} of batch {batch_id} at {self.provider._where}"
        message = self.provider._scrub(f"{where} {what}{why}")
        return BatchResult(key, error=ProviderError(kind, message, retryable=retryable))


def _bare(batch_id: str) -> str:
    """A batch's id without its collection: ``batches/abc`` → ``abc``."""
    return batch_id.removeprefix("batches/")


def _stage(status: str) -> str:
    """The state without its prefix: ``BATCH_STATE_RUNNING`` and ``JOB_STATE_RUNNING`` alike."""
    return status.removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")


def _http_status(code: Any) -> int | None:
    """The HTTP status of a ``google.rpc.Status`` code (or of an HTTP status sent instead)."""
    if not isinstance(code, int) or isinstance(code, bool) or code < 1:
        return None
    return code if code >= 100 else _RPC_HTTP[code] if code < len(_RPC_HTTP) else None


def _rpc_name(code: Any) -> str:
    ok = isinstance(code, int) and not isinstance(code, bool) and 0 < code < len(_RPC_NAMES)
    return _RPC_NAMES[code] if ok else ""


def _int64(value: Any) -> int | None:
    """A proto3 JSON int64: a decimal string (or a number); None for anything else."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _counts(stats: dict[str, Any], stage: str, ended: bool) -> tuple[int | None, dict[str, int]]:
    """(requests in the batch, requests by outcome) from ``batchStats``; proto3 JSON leaves a
    zero count out. An ended batch's unanswered requests count as its end made them."""
    total = _int64(stats.get("requestCount"))
    done = {
        "succeeded": _int64(stats.get("successfulRequestCount")) or 0,
        "errored": _int64(stats.get("failedRequestCount")) or 0,
    }
    rest = (total or 0) - sum(done.values())
    if not ended:
        pending = _int64(stats.get("pendingRequestCount"))
        return total, done | {"processing": max(0, rest) if pending is None else pending}
    leftover = _LEFTOVER.get(stage, "errored")
    return total, done | {leftover: done.get(leftover, 0) + max(0, rest)}


def _older_page(states: list[BatchState], since: float | None) -> bool:
    """Whether a page, listed newest first, ends before ``since``: later pages are older still.
    A page out of order (or with a time missing) proves nothing, so the listing goes on."""
    times = [s.created_at for s in states if s.created_at is not None]
    if since is None or not times or len(times) < len(states):
        return False
    return times == sorted(times, reverse=True) and times[-1] < since


def _seconds(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time ("2025-12-10T18:27:01.407650525Z"), or None."""
    if not isinstance(value, str):
        return None
    head, dot, tail = value.partition(".")
    if dot:  # nanoseconds: Python reads at most microseconds on every version
        digits = len(tail) - len(tail.lstrip("0123456789"))
        value = f"{head}.{tail[: min(digits, 6)]}{tail[digits:]}"
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
