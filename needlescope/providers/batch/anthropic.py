"""Anthropic's Message Batches API (``/v1/messages/batches``) over an ``AnthropicProvider``.

A batch is one POST of ``{"requests": [{"custom_id", "params"}]}``, each ``params`` the body
``complete`` would send; its results are a JSONL file at the batch's ``results_url``, each line
read by the provider's own ``_reply`` (succeeded) or ``_classify`` (errored), so a batch reply
or error means what a synchronous one means. Anthropic keeps no tag and no copy of the requests:
a reply's fingerprint takes its sampling from the body this client sent (kept per batch in
memory; ``remember`` restores it in another process), else its sampling is None.
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
from needlescope.provenance.fingerprint import PROMPT_KEYS
from needlescope.providers import base
from needlescope.providers.anthropic import AnthropicProvider
from needlescope.providers.batch.base import (
    BATCH_CANCELED,
    BATCH_EXPIRED,
    BatchLimits,
    BatchRequest,
    BatchResult,
    BatchState,
)
from needlescope.providers.http import as_dict, as_int

_PATH = "/v1/messages/batches"
_PAGE = 100  # batches per list request (the API allows 1-1000)
_COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")
# The HTTP status Anthropic sends with each error type: an errored batch request carries only
# the type, and the synchronous path reads the status first.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_NO_ENDPOINT = (404, 405)


class AnthropicBatches:
    """The ``BatchClient`` of Anthropic's Message Batches, sharing the provider's session."""

    limits = BatchLimits(max_requests=100_000, max_bytes=256 * 1024**2)

    def __init__(self, provider: AnthropicProvider) -> None:
        self.provider = provider
        # batch id -> custom id -> the body's settings: all a fingerprint reads of it (the
        # prompt is left out, so a 256 MB batch is not held twice in memory).
        self._bodies: dict[str, dict[str, dict[str, Any]]] = {}

    def request_bytes(self, item: BatchRequest) -> int:
        body = self.provider.request_body(item.request)
        return len(_entry(item.custom_id, body)) + 1  # the comma between two requests

    def remember(self, batch_id: str, items: Sequence[BatchRequest]) -> None:
        """Keep the bodies of a batch submitted elsewhere, for its replies' fingerprints."""
        self._bodies[batch_id] = {
            i.custom_id: _settings(self.provider.request_body(i.request)) for i in items
        }

    async def submit(self, items: Sequence[BatchRequest], tag: str) -> BatchState:
        """Create one batch of ``items``; ``tag`` is not sent (a Message Batch keeps none)."""
        bodies = [self.provider.request_body(item.request) for item in items]
        entries = [_entry(item.custom_id, body) for item, body in zip(items, bodies, strict=True)]
        self._check([item.custom_id for item in items], entries)
        payload = b'{"requests":[' + b",".join(entries) + b"]}"
        headers = {"Content-Type": "application/json"}
        data = await self._call("POST", self._url(), data=payload, headers=headers)
        state = self._state(data)
        self._bodies[state.batch_id] = {
            item.custom_id: _settings(body) for item, body in zip(items, bodies, strict=True)
        }
        return state

    async def state(self, batch_id: str) -> BatchState:
        return self._state(await self._call("GET", self._url(batch_id), batch_id=batch_id))

    async def cancel(self, batch_id: str) -> BatchState:
        url = self._url(batch_id, "cancel")
        return self._state(await self._call("POST", url, batch_id=batch_id))

    async def listed(self, since: float | None = None) -> list[BatchState]:
        found: list[BatchState] = []
        after: str | None = None
        while True:
            query: dict[str, str | int] = {"limit": _PAGE}
            if after:
                query["after_id"] = after
            page = as_dict(await self._call("GET", str(URL(self._url()).with_query(query))))
            for item in page.get("data") or ():
                state = self._state(item)
                if since is not None and state.created_at is not None and state.created_at < since:
                    return found  # newest first: the rest are older still
                found.append(state)
            after = page.get("last_id") if page.get("has_more") else None
            if not isinstance(after, str) or not after:
                return found

    async def results(self, batch_id: str) -> list[BatchResult]:
        data = await self._call("GET", self._url(batch_id), batch_id=batch_id)
        state = self._state(data)
        if not state.ended:
            raise ProviderError(
                base.BAD_REQUEST,
                f"Message Batch {batch_id} at {self.provider._where} has not ended "
                f"({state.status}): its results come once it has",
            )
        url = self._results_url(batch_id, as_dict(data).get("results_url"))
        _, raw = await self._raw("GET", url, batch_id=batch_id)
        lines = raw.decode(errors="replace").splitlines()
        return [self._result(batch_id, line) for line in lines if line.strip()]

    # --- requests --------------------------------------------------------------------------

    def _check(self, ids: list[str], entries: list[bytes]) -> None:
        problem = self._problem(ids, entries)
        if problem is not None:
            kind, what = problem
            where = self.provider._where
            raise ProviderError(kind, f"cannot submit a Message Batch to {where}: {what}")

    def _problem(self, ids: list[str], entries: list[bytes]) -> tuple[str, str] | None:
        """(kind, what is wrong) with a batch of these requests, or None."""
        size = sum(len(entry) + 1 for entry in entries) + len('{"requests":[]}') - 1
        if not ids:
            return base.BAD_REQUEST, "a batch needs at least one request"
        if len(set(ids)) < len(ids):
            return base.BAD_REQUEST, "custom ids repeat within the batch"
        if len(ids) > self.limits.max_requests:
            return base.REQUEST_TOO_LARGE, (
                f"{len(ids)} requests, over the {self.limits.max_requests} limit"
            )
        if size > self.limits.max_bytes:
            return base.REQUEST_TOO_LARGE, f"{size} bytes, over the {self.limits.max_bytes} limit"
        return None

    def _url(self, batch_id: str | None = None, *more: str) -> str:
        parts = [self.provider.base_url + _PATH]
        if batch_id is not None:
            parts.append(quote(batch_id, safe=""))
        return "/".join([*parts, *more])

    def _results_url(self, batch_id: str, given: Any) -> str:
        """The batch's ``results_url`` when it is on the configured host; else the results path
        there (the session's headers carry the key, which goes to no other host)."""
        home = URL(self.provider.base_url)
        if isinstance(given, str) and given:
            url = URL(given) if URL(given).is_absolute() else home.join(URL(given))
            if url.origin() == home.origin():
                return str(url)
        return self._url(batch_id, "results")

    async def _call(
        self,
        method: str,
        url: str,
        *,
        batch_id: str | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        status, raw = await self._raw(method, url, batch_id=batch_id, data=data, headers=headers)
        return self.provider._json(status, raw)

    async def _raw(
        self,
        method: str,
        url: str,
        *,
        batch_id: str | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        try:
            return await self.provider._request(method, url, data=data, headers=headers)
        except ProviderError as e:
            if e.status not in _NO_ENDPOINT:
                raise
            raise self._not_found(e, method, url, batch_id) from None

    def _not_found(
        self, e: ProviderError, method: str, url: str, batch_id: str | None
    ) -> ProviderError:
        # Anthropic's own envelope names its type: a batch it does not know. Anything else is
        # a server without the endpoints (a proxy, a compatible server, an old gateway).
        where = self.provider._where
        if batch_id is not None and "not_found_error" in str(e):
            message = f"{where} has no Message Batch {batch_id}: {e}"
        else:
            path = URL(url).path
            message = f"{where} has no Message Batches API (HTTP {e.status} on {method} {path})"
        return ProviderError(base.BAD_REQUEST, self.provider._scrub(message), status=e.status)

    # --- replies ---------------------------------------------------------------------------

    def _state(self, data: Any) -> BatchState:
        batch = as_dict(data)
        batch_id, status = batch.get("id"), batch.get("processing_status")
        if not isinstance(batch_id, str) or not isinstance(status, str):
            snippet = self.provider._snippet(json.dumps(data))
            raise self.provider._bad(
                base.BAD_RESPONSE, f"{self.provider._where} sent no Message Batch: {snippet}"
            )
        tallies = as_dict(batch.get("request_counts"))
        counts = {k: n for k in _COUNTS if (n := as_int(tallies.get(k))) is not None}
        return BatchState(
            batch_id=batch_id,
            status=status,
            ended=status == "ended",
            request_count=sum(counts.values()),
            counts=counts,
            created_at=_seconds(batch.get("created_at")),
        )

    def _result(self, batch_id: str, line: str) -> BatchResult:
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        custom_id = as_dict(entry).get("custom_id")
        if not isinstance(custom_id, str):
            snippet = self.provider._snippet(line)
            where = self.provider._where
            msg = f"results of Message Batch {batch_id} at {where}: a bad line: {snippet}"
            raise self.provider._bad(base.BAD_RESPONSE, msg)
        result = as_dict(as_dict(entry).get("result"))
        kind = result.get("type")
        if kind == "succeeded":
            return self._succeeded(batch_id, custom_id, result.get("message"))
        error = (
            self._errored(batch_id, custom_id, result.get("error"))
            if kind == "errored"
            else self._unanswered(batch_id, custom_id, kind)
        )
        return BatchResult(custom_id, error=error)

    def _succeeded(self, batch_id: str, custom_id: str, message: Any) -> BatchResult:
        try:
            reply = self.provider._reply(200, message, None)
        except ProviderError as e:
            return BatchResult(custom_id, error=e)
        body = self._bodies.get(batch_id, {}).get(custom_id)
        if body is not None:
            fingerprint = serving_fingerprint(message, body)
        else:  # the settings sent are unknown here: no sampling rather than a wrong one
            fingerprint = replace(serving_fingerprint(message, {}), sampling=None)
        if reply.thought:
            self.provider.reasoning = True  # as complete() does: later requests leave it room
        return BatchResult(custom_id, reply=replace(reply, fingerprint=fingerprint))

    def _errored(self, batch_id: str, custom_id: str, error: Any) -> ProviderError:
        """The kind the synchronous path gives the error's type, read by the same classifier."""
        error_type = as_dict(as_dict(error).get("error")).get("type")
        status = _ERROR_STATUS.get(error_type) if isinstance(error_type, str) else None
        failure = self.provider._classify(status or 200, {}, json.dumps(error))
        kind, retryable = (
            (failure.kind, failure.retryable) if status else (base.PROVIDER_ERROR, True)
        )
        message = (
            f"request {custom_id} of Message Batch {batch_id} at {self.provider._where} "
            f"errored: {failure.detail}"
        )
        return ProviderError(kind, self.provider._scrub(message), retryable=retryable)

    def _unanswered(self, batch_id: str, custom_id: str, kind: Any) -> ProviderError:
        where = f"request {custom_id} of Message Batch {batch_id} at {self.provider._where}"
        if kind == "canceled":
            return ProviderError(BATCH_CANCELED, f"{where} was canceled before it ran")
        if kind == "expired":
            msg = f"{where} expired (the batch's 24 hours ended) before it ran"
            return ProviderError(BATCH_EXPIRED, msg, retryable=True)
        snippet = self.provider._snippet(json.dumps(kind))
        return self.provider._bad(base.BAD_RESPONSE, f"{where} has an unknown result {snippet}")


def _entry(custom_id: str, body: dict[str, Any]) -> bytes:
    """One request of a batch's body, as it is sent."""
    entry = {"custom_id": custom_id, "params": body}
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()


def _seconds(value: Any) -> float | None:
    """Unix seconds of an RFC 3339 time ("2024-08-20T18:37:24.100435Z"), or None."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _settings(body: dict[str, Any]) -> dict[str, Any]:
    """A request body without its prompt: what a reply's fingerprint reads of it."""
    return {k: v for k, v in body.items() if k not in PROMPT_KEYS}
