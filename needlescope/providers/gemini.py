"""SDK-free client for Google's Gemini API (``generativelanguage.googleapis.com``), aiohttp only.

Wire format: ``POST {base_url}/{api_version}/models/{model}:generateContent`` with
``{"contents": [{"role": "user"|"model", "parts": [{"text": …}]}], "systemInstruction": …,
"generationConfig": …}``; the key travels in the ``x-goog-api-key`` header, never in the URL.

How a config's ``generation`` maps onto a request:

* ``temperature`` → ``generationConfig.temperature``; ``max_tokens`` (or the probe's answer
  budget) → ``generationConfig.maxOutputTokens``. On thinking models (Gemini 2.5 and later) the
  thoughts are billed against ``maxOutputTokens``: a small budget can be spent on thinking
  alone, which comes back as an empty reply with ``finish_reason == "length"``. Give thinking
  room (a larger ``max_tokens``) or bound it (``thinkingBudget``).
* ``generation.extra`` (and ``top_p``/``seed``, which the sweep puts there) is merged in key by
  key. Keys may be camelCase or snake_case (``top_p`` → ``topP``). Request-level fields
  (``safetySettings``, ``tools``, ``toolConfig``, ``cachedContent``) go to the top of the body;
  ``generationConfig: {…}`` is merged into ``generationConfig`` as is; every other key is a
  ``generationConfig`` field and sent verbatim, so a field newer than this module still works
  and a misspelt one is refused by the API (HTTP 400, ``bad_request``). For example::

      generation:
        max_tokens: 2048
        extra:
          thinkingConfig: {thinkingBudget: 1024, includeThoughts: false}
          topK: 40

  An explicit ``maxOutputTokens`` or ``temperature`` in ``extra`` wins over the generic setting.

Reply: ``text`` joins the first candidate's text parts that are not thoughts (``thought: true``);
``prompt_tokens`` / ``completion_tokens`` / ``reasoning_tokens`` are ``usageMetadata``'s
``promptTokenCount`` / ``candidatesTokenCount`` / ``thoughtsTokenCount`` (unlike OpenAI's,
Gemini's completion count excludes the thoughts); ``model_version`` is ``modelVersion``.

Errors are one-line ``ProviderError``s whose kind the orchestrator stores and retries on:

* 429 ``RESOURCE_EXHAUSTED`` → ``rate_limited``. The wait comes from ``RetryInfo.retryDelay``
  in ``error.details`` (what Gemini sends), a ``Retry-After`` header, or the message's "Please
  retry in 7.5s"; a wait of at most ``max_retry_after_s`` is waited out once and the request
  re-sent once. A per-day quota (a ``QuotaFailure`` whose ``quotaId`` says ``PerDay``) is not
  retryable: it resets in hours, not seconds.
* 500/503 → ``server_error``, 504 ``DEADLINE_EXCEEDED`` and client timeouts → ``timeout``,
  unreachable host → ``connection``: all retryable.
* 400 saying the prompt has too many tokens ("The input token count (…) exceeds the maximum
  number of tokens allowed (…)") or the payload is too large, and 413 → ``context_too_long``;
  400 ``API_KEY_INVALID``, 401 and 403 → ``auth``; any other 4xx → ``bad_request``.
* A 2xx body that is not JSON or is cut short → ``bad_response`` (retryable).
* No candidates at all → ``empty_response``. When the prompt itself was blocked
  (``promptFeedback.blockReason``) the message names the reason; a block for SAFETY,
  BLOCKLIST, PROHIBITED_CONTENT or IMAGE_SAFETY is *not* retryable, since the same prompt is
  refused again, while OTHER or no reason is. A candidate that stopped for safety is not an
  error: it is a reply (usually empty) with ``finish_reason == "content_filter"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from yarl import URL

from needlescope.errors import ProviderError
from needlescope.providers import base
from needlescope.providers.base import ChatRequest, Message, Reply
from needlescope.providers.http import HttpFailure, HttpProvider, looks_secret, retry_after_value
from needlescope.providers.http import as_dict as _dict
from needlescope.providers.registry import register

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
KEY_HEADER = "x-goog-api-key"

# "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."
# "Request payload size exceeds the limit: 20971520 bytes." (a prompt too big to even send)
CONTEXT_TOO_LONG_RE = re.compile(
    r"exceeds the maximum number of tokens|input token count|payload size exceeds"
    r"|too many tokens|too long|context (?:length|window)",
    re.IGNORECASE,
)
# Request-level fields of GenerateContentRequest that ``extra`` may set; all else is generation.
REQUEST_FIELDS = frozenset({"safetySettings", "tools", "toolConfig", "cachedContent"})
_ROLES = {"user": "user", "assistant": "model", "model": "model"}
_STATUS_KINDS = {
    429: base.RATE_LIMITED,
    401: base.AUTH,
    403: base.AUTH,
    408: base.TIMEOUT,
    413: base.CONTEXT_TOO_LONG,
    504: base.TIMEOUT,
}
_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "FINISH_REASON_UNSPECIFIED": None,
}
# A prompt blocked for one of these is blocked again when re-sent: retrying only costs quota.
FINAL_BLOCKS = frozenset({"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY"})
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")  # google.protobuf.Duration: "7s", "0.5s"
_RETRY_IN_RE = re.compile(r"retry in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)


@register("gemini")
class GeminiProvider(HttpProvider):
    """POSTs ``{base_url}/{api_version}/models/{model}:generateContent``; fails in one line.

    The only retry here: a 429 whose retry delay is at most ``max_retry_after_s`` is waited out
    once and re-sent once (for ``countTokens`` too). Everything else is raised for the
    orchestrator to retry. ``model`` is an id (``gemini-2.5-flash``) or a resource name
    (``models/…``, ``tunedModels/…``).
    """

    def __init__(
        self,
        *,
        name: str,
        base_url: str = DEFAULT_BASE_URL,
        model: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 600,
        max_retry_after_s: float = 60,
        max_connections: int = 8,
        api_version: str = "v1beta",
    ) -> None:
        self.api_version = api_version.strip("/")
        self._resource = model if "/" in model else f"models/{model}"
        all_headers = dict(headers or {})
        if api_key:
            all_headers = {k: v for k, v in all_headers.items() if k.lower() != KEY_HEADER}
            all_headers[KEY_HEADER] = api_key
        super().__init__(
            name=name,
            base_url=base_url.rstrip("/"),
            model=model,
            api_key=api_key,
            headers=all_headers,
            timeout_s=timeout_s,
            max_retry_after_s=max_retry_after_s,
            max_connections=max_connections,
        )

    def _where_of(self, url: URL) -> str:
        return str(url.with_user(None).with_query(None).with_fragment(None))

    def _url_secrets(self, url: URL) -> list[str]:
        secret = [v for k, v in url.query.items() if looks_secret(k)]
        return [*secret, url.password] if url.password else secret

    def _url(self, method: str) -> str:
        return f"{self.base_url}/{self.api_version}/{self._resource}:{method}"

    def _complete_url(self) -> str:
        return self._url("generateContent")

    # --- the Provider protocol -------------------------------------------------------------

    async def count_tokens(self, text: str) -> int:
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
        _, data, _ = await self._send(self._url("countTokens"), body)
        return self._total_tokens(data)

    async def count_prompt_tokens(self, messages: tuple[Message, ...]) -> int:
        """Tokens of the prompt as ``generateContent`` bills it: system instruction included."""
        inner: dict[str, Any] = {"model": self._resource, **self._contents(messages)}
        body = {"generateContentRequest": inner}
        _, data, _ = await self._send(self._url("countTokens"), body)
        return self._total_tokens(data)

    # --- request building ------------------------------------------------------------------

    def _contents(self, messages: tuple[Message, ...]) -> dict[str, Any]:
        """``contents`` (consecutive turns of one role merged) and ``systemInstruction``."""
        system: list[dict[str, str]] = []
        contents: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "system":
                system.append({"text": m.content})
                continue
            role = _ROLES.get(m.role)
            if role is None:
                raise ProviderError(
                    base.BAD_REQUEST,
                    f"model {self.name}: message role {m.role!r} has no Gemini equivalent "
                    "(use system, user or assistant)",
                )
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].append({"text": m.content})
            else:
                contents.append({"role": role, "parts": [{"text": m.content}]})
        out: dict[str, Any] = {"contents": contents}
        if system:
            out["systemInstruction"] = {"parts": system}
        return out

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        body = self._contents(request.messages)
        generation: dict[str, Any] = {}
        if request.temperature is not None:
            generation["temperature"] = request.temperature
        if request.max_tokens is not None:
            generation["maxOutputTokens"] = request.max_tokens
        nested: dict[str, Any] = {}
        for key, value in request.extra.items():
            field = _camel(key)
            if value is None:
                continue
            if field == "generationConfig" and isinstance(value, Mapping):
                nested.update(value)
            elif field in REQUEST_FIELDS:
                body[field] = value
            else:
                generation[field] = value
        generation.update(nested)
        if generation:
            body["generationConfig"] = generation
        return body

    # --- errors ----------------------------------------------------------------------------

    def _classify(self, status: int, headers: Mapping[str, str], text: str) -> HttpFailure:
        err = _error_object(text)
        kind = _kind(status, err, text)
        retryable = kind in base.RETRYABLE_KINDS
        wait = None
        if kind == base.RATE_LIMITED:
            if any("perday" in q.lower() for q in _quota_ids(err)):
                retryable = False  # a daily quota: waiting seconds or minutes does not help
            else:
                wait = _retry_delay(err, headers)
        return HttpFailure(kind, self._snippet(_detail(err, text)), retryable, wait)

    # --- reply parsing ---------------------------------------------------------------------

    def _total_tokens(self, data: Any) -> int:
        total = _dict(data).get("totalTokens", 0 if isinstance(data, dict) else None)
        if not isinstance(total, int) or isinstance(total, bool):  # proto3 JSON omits a 0
            snippet = self._snippet(json.dumps(data))
            raise self._bad(base.BAD_RESPONSE, f"countTokens sent no 'totalTokens': {snippet}")
        return total

    def _reply(self, status: int, data: Any, latency_s: float) -> Reply:
        where = f"HTTP {status} from {self._where}"
        if not isinstance(data, dict) or "error" in data:
            detail = _detail(_error_object(json.dumps(data)), json.dumps(data))
            msg = f"{where}: reply is not a generateContent response: {self._snippet(detail)}"
            raise self._bad(base.BAD_RESPONSE, msg, status)
        candidates = data.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            raise self._no_candidates(where, _dict(data.get("promptFeedback")), status)
        candidate = _dict(candidates[0])
        parts = _dict(candidate.get("content")).get("parts")
        text = "".join(
            p["text"]
            for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
        )
        finish = candidate.get("finishReason")
        if isinstance(finish, str):
            finish = _FINISH.get(finish, finish.lower())
        usage = data.get("usageMetadata")
        counts = usage if isinstance(usage, dict) else None
        return Reply(
            text=text,
            finish_reason=finish if isinstance(finish, str) else None,
            prompt_tokens=_count(counts, "promptTokenCount"),
            completion_tokens=_count(counts, "candidatesTokenCount"),
            reasoning_tokens=_count(counts, "thoughtsTokenCount"),
            latency_s=latency_s,
            model_version=data.get("modelVersion") or None,
        )

    def _no_candidates(self, where: str, feedback: dict[str, Any], status: int) -> ProviderError:
        reason = feedback.get("blockReason")
        if not reason:
            return self._bad(base.EMPTY_RESPONSE, f"{where}: reply has no candidates", status)
        why = feedback.get("blockReasonMessage")
        msg = f"{where}: prompt blocked ({reason})" + (
            f": {self._snippet(str(why))}" if why else ""
        )
        return ProviderError(
            base.EMPTY_RESPONSE,
            self._scrub(msg),
            retryable=str(reason) not in FINAL_BLOCKS,
            status=status,
        )


def _camel(key: str) -> str:
    """``top_p`` → ``topP``; camelCase keys are returned unchanged."""
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _count(usage: dict[str, Any] | None, field: str) -> int | None:
    """A usage count; proto3 JSON leaves a 0 out, so a missing field of a present usage is 0."""
    if usage is None:
        return None
    value = usage.get(field, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _error_object(text: str) -> dict[str, Any]:
    """Google's ``{"error": {"code", "message", "status", "details"}}``, or {} for other bodies."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if isinstance(data, list) and data:  # some Google front ends wrap the envelope in a list
        data = data[0]
    err = _dict(data).get("error")
    return err if isinstance(err, dict) else {}


def _details(err: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    details = err.get("details")
    return [
        d
        for d in (details if isinstance(details, list) else [])
        if isinstance(d, dict) and str(d.get("@type", "")).endswith(kind)
    ]


def _quota_ids(err: dict[str, Any]) -> list[str]:
    ids = []
    for failure in _details(err, "google.rpc.QuotaFailure"):
        violations = failure.get("violations")
        for v in violations if isinstance(violations, list) else []:
            quota = _dict(v).get("quotaId") or _dict(v).get("quotaMetric")
            if isinstance(quota, str):
                ids.append(quota)
    return ids


def _kind(status: int, err: dict[str, Any], text: str) -> str:
    reasons = {str(d.get("reason")) for d in _details(err, "google.rpc.ErrorInfo")}
    message = str(err.get("message") or text)
    if reasons & {"API_KEY_INVALID", "API_KEY_EXPIRED"} or "API key not valid" in message:
        return base.AUTH  # Gemini answers a wrong key with 400 INVALID_ARGUMENT
    if status in _STATUS_KINDS:
        return _STATUS_KINDS[status]
    if status < 500 and CONTEXT_TOO_LONG_RE.search(message):
        return base.CONTEXT_TOO_LONG
    if status >= 500:
        return base.SERVER_ERROR
    return base.BAD_REQUEST if status >= 400 else base.BAD_RESPONSE


def _detail(err: dict[str, Any], text: str) -> str:
    """``STATUS [quota]: message`` out of Google's error envelope, else the body itself."""
    if not err:
        return text
    message = str(err.get("message") or json.dumps(err))
    label = str(err.get("status") or err.get("code") or "")
    quotas = _quota_ids(err)
    if quotas:
        label += f" [{', '.join(dict.fromkeys(quotas))}]"
    return f"{label}: {message}" if label else message


def _retry_delay(err: dict[str, Any], headers: Mapping[str, str]) -> float | None:
    """Seconds to wait: the longest of RetryInfo's ``retryDelay``, ``Retry-After`` and the
    message's "Please retry in 7.5s"; None when none says."""
    waits = []
    for info in _details(err, "google.rpc.RetryInfo"):
        match = _DURATION_RE.match(str(info.get("retryDelay", "")))
        if match:
            waits.append(float(match.group(1)))
    header = _retry_after(headers)
    if header is not None:
        waits.append(header)
    if not waits:
        match = _RETRY_IN_RE.search(str(err.get("message", "")))
        if match:
            waits.append(float(match.group(1)) / (1000 if match.group(2) == "ms" else 1))
    return max(waits) if waits else None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a ``Retry-After`` header (seconds or an HTTP-date)."""
    return retry_after_value(headers.get("Retry-After"))
