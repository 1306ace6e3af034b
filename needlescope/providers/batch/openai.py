"""OpenAI's Batch API (``/v1/files`` and ``/v1/batches``) over an ``OpenAIProvider``.
Over 400 lines: the file, the batch and both result files are one wire format, in one place.

A batch is a JSONL file of ``{"custom_id", "method", "url", "body"}`` lines (each ``body`` the
one ``complete`` would send) tagged in the batch's ``metadata``. Result lines are read by the
provider's own ``_reply`` or ``_http_error``: a batch reply or error means what a synchronous one
means. Fingerprints take their sampling from the bodies sent (kept by ``submit``, else read back
from the batch's input file); a request in neither result file of an expired, cancelled or failed
batch gets BATCH_EXPIRED, BATCH_CANCELED or BATCH_FAILED.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from needlescope.errors import ProviderError
from needlescope.provenance import serving_fingerprint
from needlescope.provenance.fingerprint import PROMPT_KEYS
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
from needlescope.providers.http import as_dict, as_int
from needlescope.providers.openai import OpenAIProvider

ENDPOINT = "/v1/chat/completions"  # every line's url and the batch's endpoint
TAG_KEY = "needlescope_tag"  # the metadata key the tag is kept under
TAG_CHARS = 512  # longest metadata value
_PAGE = 100  # batches per list request (the API allows 1-100)
_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# Error codes a batch failure may clear by itself (the organisation's enqueued-token limit).
_TRANSIENT_FAILURES = frozenset({"token_limit_exceeded"})
_NO_ENDPOINT = (404, 405)
Settings = dict[str, Any]  # a request body without its prompt: what its fingerprint reads


class OpenAIBatches:
    """The ``BatchClient`` of OpenAI's Batch API, sharing the provider's session."""

    limits = BatchLimits(max_requests=50_000, max_bytes=200 * 1024**2)

    def __init__(self, provider: OpenAIProvider) -> None:
        self.provider = provider
        self._settings: dict[str, dict[str, Settings]] = {}  # batch id -> custom id -> settings

    def request_bytes(self, item: BatchRequest) -> int:
        return len(_line(item.custom_id, self.provider.request_body(item.request))) + 1

    async def submit(self, items: Sequence[BatchRequest], tag: str) -> BatchState:
        """Upload ``items`` as one input file and create a batch of it, tagged ``tag``."""
        bodies = [self.provider.request_body(item.request) for item in items]
        lines = [_line(item.custom_id, body) for item, body in zip(items, bodies, strict=True)]
        self._check([item.custom_id for item in items], lines, tag)
        file_id = await self._upload(b"".join(line + b"\n" for line in lines), tag)
        create = {
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": "24h",
            "metadata": {TAG_KEY: tag},
        }
        try:
            data = await self._call("POST", self._url("batches"), json_body=create)
        except ProviderError as e:
            # Refused: no batch reads the file. (After a timeout or a 2xx that is not JSON a
            # batch may exist: its file stays, to expire as batch files do after 30 days.)
            if e.status is not None and not 200 <= e.status < 300:
                await self._discard(file_id)
            raise
        state = self._state(data)
        self._settings[state.batch_id] = {
            item.custom_id: _settings(body) for item, body in zip(items, bodies, strict=True)
        }
        return state

    async def state(self, batch_id: str) -> BatchState:
        url = self._url("batches", batch_id)
        return self._state(await self._call("GET", url, subject=("batch", batch_id)))

    async def cancel(self, batch_id: str) -> BatchState:
        url = self._url("batches", batch_id, "cancel")
        return self._state(await self._call("POST", url, subject=("batch", batch_id)))

    async def listed(self, since: float | None = None) -> list[BatchState]:
        found: list[BatchState] = []
        after: Any = None
        while True:
            query: dict[str, str | int] = {"limit": _PAGE}
            if after:
                query["after"] = after
            url = str(URL(self._url("batches")).with_query(query))
            page = as_dict(await self._call("GET", url))
            data = [as_dict(item) for item in page.get("data") or ()]
            for item in data:
                state = self._state(item)
                if since is not None and state.created_at is not None and state.created_at < since:
                    return found  # newest first: the rest are older still
                found.append(state)
            # The cursor is the page's last batch (the SDK's rule when last_id is left out).
            after = (page.get("last_id") or data[-1].get("id")) if data else None
            if not page.get("has_more") or not isinstance(after, str) or not after:
                return found

    async def results(self, batch_id: str) -> list[BatchResult]:
        data = as_dict(
            await self._call("GET", self._url("batches", batch_id), subject=("batch", batch_id))
        )
        state = self._state(data)
        if not state.ended:
            raise ProviderError(
                base.BAD_REQUEST,
                f"batch {batch_id} at {self.provider._where} has not ended ({state.status}): "
                "its results come once it has",
            )
        settings = await self._sent(batch_id, state.input_file_id)
        found: dict[str, BatchResult] = {}
        for key in ("output_file_id", "error_file_id"):
            file_id = data.get(key)
            if not isinstance(file_id, str) or not file_id:
                continue
            for line in (await self._content(file_id)).splitlines():
                if line.strip():
                    result = self._result(batch_id, line, settings)
                    found.setdefault(result.custom_id, result)
        for custom_id in settings.keys() - found.keys():
            error = self._unanswered(batch_id, custom_id, state, data)
            found[custom_id] = BatchResult(custom_id, error=error)
        return list(found.values())

    # --- requests --------------------------------------------------------------------------

    def _check(self, ids: list[str], lines: list[bytes], tag: str) -> None:
        problem = self._problem(ids, lines, tag)
        if problem is not None:
            kind, what = problem
            where = self.provider._where
            raise ProviderError(kind, f"cannot submit a batch to {where}: {what}")

    def _problem(self, ids: list[str], lines: list[bytes], tag: str) -> tuple[str, str] | None:
        """(kind, what is wrong) with a batch of these requests, or None."""
        size = sum(len(line) + 1 for line in lines)
        if not ids:
            return base.BAD_REQUEST, "a batch needs at least one request"
        if len(set(ids)) < len(ids):
            return base.BAD_REQUEST, "custom ids repeat within the batch"
        if len(tag) > TAG_CHARS:
            return base.BAD_REQUEST, f"its tag is {len(tag)} characters, over {TAG_CHARS}"
        if len(ids) > self.limits.max_requests:
            return base.REQUEST_TOO_LARGE, (
                f"{len(ids)} requests, over the {self.limits.max_requests} limit"
            )
        if size > self.limits.max_bytes:
            return base.REQUEST_TOO_LARGE, f"{size} bytes, over the {self.limits.max_bytes} limit"
        return None

    async def _upload(self, payload: bytes, tag: str) -> str:
        """The id of the input file ``payload`` is uploaded as."""
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", payload, filename=_filename(tag), content_type="application/jsonl")
        data = as_dict(await self._call("POST", self._url("files"), data=form))
        file_id = data.get("id")
        if not isinstance(file_id, str) or not file_id:
            snippet = self.provider._snippet(json.dumps(data))
            msg = f"{self.provider._where} sent no file for the batch's input: {snippet}"
            raise self.provider._bad(base.BAD_RESPONSE, msg)
        return file_id

    async def _discard(self, file_id: str) -> None:
        """Delete an input file no batch was made of; if that fails it expires anyway."""
        with contextlib.suppress(ProviderError):
            await self._raw("DELETE", self._url("files", file_id), subject=("file", file_id))

    async def _content(self, file_id: str) -> str:
        url = self._url("files", file_id, "content")
        _, raw = await self._raw("GET", url, subject=("file", file_id))
        return raw.decode(errors="replace")

    async def _sent(self, batch_id: str, input_file_id: str | None) -> dict[str, Settings]:
        """Each request's settings: kept since ``submit``, else read from the input file."""
        if batch_id in self._settings:
            return self._settings[batch_id]
        if not input_file_id:
            return {}
        try:
            text = await self._content(input_file_id)
        except ProviderError as e:
            if e.status not in _NO_ENDPOINT:
                raise
            return {}  # the input file is deleted: the settings sent are unknown
        settings: dict[str, Settings] = {}
        for line in text.splitlines():
            try:
                entry = as_dict(json.loads(line))
            except ValueError:
                continue  # a line the batch failed on
            custom_id, body = entry.get("custom_id"), entry.get("body")
            if isinstance(custom_id, str) and isinstance(body, dict):
                settings.setdefault(custom_id, _settings(body))
        self._settings[batch_id] = settings
        return settings

    def _url(self, *parts: str) -> str:
        return "/".join([self.provider.base_url, *(quote(part, safe="") for part in parts)])

    async def _call(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        data: Any = None,
        subject: tuple[str, str] | None = None,
    ) -> Any:
        status, raw = await self._raw(method, url, json_body=json_body, data=data, subject=subject)
        return self.provider._json(status, raw)

    async def _raw(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        data: Any = None,
        subject: tuple[str, str] | None = None,
    ) -> tuple[int, bytes]:
        try:
            return await self.provider._request(method, url, json_body=json_body, data=data)
        except ProviderError as e:
            if e.status not in _NO_ENDPOINT:
                raise
            raise self._not_found(e, method, url, subject) from None

    def _not_found(
        self, e: ProviderError, method: str, url: str, subject: tuple[str, str] | None
    ) -> ProviderError:
        # OpenAI's 404 for an object it does not have names the object ("No batch found with
        # id …"); any other 404 (or 405) is a server without the endpoints (vLLM, llama.cpp, a
        # proxy), whose message names the path if anything (OpenAI's own "Invalid URL (GET …)").
        where, text, path = self.provider._where, str(e), URL(url).path
        named = subject is not None and subject[1] in text and path not in text
        if e.status == 404 and subject is not None and named:
            message = f"{where} has no {subject[0]} {subject[1]}: {text}"
        else:
            message = (
                f"{where} has no batch API (HTTP {e.status} on {method} {path}): "
                "batch: true needs OpenAI's /v1/files and /v1/batches"
            )
        return ProviderError(base.BAD_REQUEST, self.provider._scrub(message), status=e.status)

    # --- replies ---------------------------------------------------------------------------

    def _state(self, data: Any) -> BatchState:
        batch = as_dict(data)
        batch_id, status = batch.get("id"), batch.get("status")
        if not isinstance(batch_id, str) or not isinstance(status, str):
            snippet = self.provider._snippet(json.dumps(data))
            raise self.provider._bad(
                base.BAD_RESPONSE, f"{self.provider._where} sent no batch: {snippet}"
            )
        tallies = as_dict(batch.get("request_counts"))
        total, done, failed = (
            as_int(tallies.get(k)) or 0 for k in ("total", "completed", "failed")
        )
        ended = status in _ENDED
        counts = {"succeeded": done, "errored": failed}
        rest = max(0, total - done - failed)
        if not ended:
            counts["processing"] = rest
        elif rest and status in ("expired", "cancelled"):
            counts["expired" if status == "expired" else "canceled"] = rest
        tag = as_dict(batch.get("metadata")).get(TAG_KEY)
        input_file_id = batch.get("input_file_id")
        return BatchState(
            batch_id=batch_id,
            status=status,
            ended=ended,
            request_count=total,
            counts=counts,
            created_at=_seconds(batch.get("created_at")),
            tag=tag if isinstance(tag, str) else None,
            input_file_id=input_file_id if isinstance(input_file_id, str) else None,
            error=self._failure(batch) if status == "failed" else None,
        )

    def _failure(self, batch: Mapping[str, Any]) -> str:
        """Why a batch failed, from its ``errors``: one line, scrubbed."""
        reasons = []
        for error in as_dict(batch.get("errors")).get("data") or ():
            err = as_dict(error)
            message = str(err.get("message") or err.get("code") or "")
            line = as_int(err.get("line"))
            reasons.append(f"line {line}: {message}" if line is not None else message)
        reason = "; ".join(r for r in reasons if r)
        return self.provider._snippet(reason) if reason else "it failed (no reason given)"

    def _result(self, batch_id: str, line: str, settings: Mapping[str, Settings]) -> BatchResult:
        try:
            entry = as_dict(json.loads(line))
        except ValueError:
            entry = {}
        custom_id = entry.get("custom_id")
        if not isinstance(custom_id, str):
            snippet = self.provider._snippet(line)
            where = self.provider._where
            msg = f"results of batch {batch_id} at {where}: a bad line: {snippet}"
            raise self.provider._bad(base.BAD_RESPONSE, msg)
        if entry.get("error") is not None:
            return BatchResult(custom_id, error=self._errored(batch_id, custom_id, entry["error"]))
        response = as_dict(entry.get("response"))
        status, body = as_int(response.get("status_code")), response.get("body")
        if status is None:
            where = f"request {custom_id} of batch {batch_id} at {self.provider._where}"
            error = self.provider._bad(base.BAD_RESPONSE, f"{where} has no response and no error")
            return BatchResult(custom_id, error=error)
        if not 200 <= status < 300:
            failure = self.provider._http_error(status, {}, json.dumps(body).encode())
            return BatchResult(custom_id, error=_within(failure, batch_id, custom_id))
        return self._succeeded(batch_id, custom_id, status, body, settings.get(custom_id))

    def _succeeded(
        self, batch_id: str, custom_id: str, status: int, body: Any, settings: Settings | None
    ) -> BatchResult:
        try:
            reply = self.provider._reply(status, body, None)
        except ProviderError as e:
            return BatchResult(custom_id, error=_within(e, batch_id, custom_id))
        data = as_dict(body)
        if settings is not None:  # the same fingerprint complete() gives: no prompt in it
            fingerprint = serving_fingerprint(data, settings)
        else:  # the settings sent are unknown here: no sampling rather than a wrong one
            fingerprint = replace(serving_fingerprint(data, {}), sampling=None)
        if reply.thought:
            self.provider.reasoning = True  # as complete() does: later requests leave it room
        return BatchResult(custom_id, reply=replace(reply, fingerprint=fingerprint))

    def _errored(self, batch_id: str, custom_id: str, error: Any) -> ProviderError:
        """A line's ``error`` (a request that failed without an HTTP reply of its own)."""
        err = as_dict(error)
        code = err.get("code")
        where = f"request {custom_id} of batch {batch_id} at {self.provider._where}"
        if code == "batch_expired":
            msg = f"{where} expired (the batch's 24 hours ended) before it ran"
            return ProviderError(BATCH_EXPIRED, msg, retryable=True)
        if code == "batch_cancelled":
            return ProviderError(BATCH_CANCELED, f"{where} was cancelled before it ran")
        named = self.provider._body_error(200, err)  # the kind its code names, as in a reply
        detail = self.provider._snippet(f"{err.get('message') or ''} ({code})")
        message = self.provider._scrub(f"{where} failed: {detail}")
        return ProviderError(named.kind, message, retryable=named.retryable)

    def _unanswered(
        self, batch_id: str, custom_id: str, state: BatchState, batch: Mapping[str, Any]
    ) -> ProviderError:
        """The error of a request in neither result file."""
        where = f"request {custom_id} of batch {batch_id} at {self.provider._where}"
        if state.status == "expired":
            msg = f"{where} expired (the batch's 24 hours ended) before it ran"
            return ProviderError(BATCH_EXPIRED, msg, retryable=True)
        if state.status == "cancelled":
            return ProviderError(BATCH_CANCELED, f"{where} was cancelled before it ran")
        if state.status == "failed":
            codes = {as_dict(e).get("code") for e in as_dict(batch.get("errors")).get("data") or ()}
            retryable = bool(codes) and codes <= _TRANSIENT_FAILURES
            msg = self.provider._scrub(f"{where} did not run: the batch failed: {state.error}")
            return ProviderError(BATCH_FAILED, msg, retryable=retryable)
        return self.provider._bad(base.BAD_RESPONSE, f"{where} is in neither result file")


def _line(custom_id: str, body: dict[str, Any]) -> bytes:
    """One line of a batch's input file, without its newline."""
    entry = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()


def _settings(body: Mapping[str, Any]) -> Settings:
    return {k: v for k, v in body.items() if k not in PROMPT_KEYS}


def _filename(tag: str) -> str:
    """The input file's name: the tag, as the dashboard lists it."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", tag).strip("-.")[:64]
    return f"needlescope-{name or 'batch'}.jsonl"


def _within(e: ProviderError, batch_id: str, custom_id: str) -> ProviderError:
    """``e`` as one request of a batch: its kind, and where it came from."""
    message = f"{e} (request {custom_id} of batch {batch_id})"
    return ProviderError(e.kind, message, retryable=e.retryable, status=e.status)


def _seconds(value: Any) -> float | None:
    """Unix seconds of a timestamp, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
