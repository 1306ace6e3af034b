"""SDK-free client for Google's Gemini API (``generativelanguage.googleapis.com``), aiohttp only.
One module of nearly 400 lines on purpose: the whole wire format (request, reply, finish
reasons, errors) in one place, as every provider's is.

``POST {base_url}/{api_version}/models/{model}:generateContent``, the key in the
``x-goog-api-key`` header. A config's ``generation`` becomes ``generationConfig`` (a thinking
model's ``maxOutputTokens`` holds its thinking budget too), ``generation.extra`` merged in key
by key; the reply's text is the first candidate's parts that are not thoughts; every error is a
one-line ``ProviderError`` whose kind the orchestrator stores and retries on.

Design: docs/design/providers.md#gemini
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
from needlescope.providers.reasoning import DEFAULT_REASONING_BUDGET, thinks_by_default
from needlescope.providers.registry import register

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
KEY_HEADER = "x-goog-api-key"

# "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."
CONTEXT_TOO_LONG_RE = re.compile(
    r"exceeds the maximum number of tokens|input token count"
    r"|too many tokens|too long|context (?:length|window)",
    re.IGNORECASE,
)
# "Request payload size exceeds the limit: 20971520 bytes." (a prompt too big to even send)
REQUEST_TOO_LARGE_RE = re.compile(r"payload size exceeds", re.IGNORECASE)
# Request-level fields of GenerateContentRequest that ``extra`` may set; all else is generation.
REQUEST_FIELDS = frozenset(
    {"safetySettings", "tools", "toolConfig", "cachedContent", "serviceTier"}
)
_ROLES = {"user": "user", "assistant": "model", "model": "model"}
_STATUS_KINDS = {
    429: base.RATE_LIMITED,
    401: base.AUTH,
    403: base.AUTH,
    408: base.TIMEOUT,
    413: base.REQUEST_TOO_LARGE,
    504: base.TIMEOUT,
}
_FILTERS = (  # reasons a filter stopped the reply (or blocked the prompt)
    "SAFETY",
    "RECITATION",
    "LANGUAGE",  # an unsupported language
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "MODEL_ARMOR",
    "JAILBREAK",
)
_TOOLS = ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS")
_FINISH: dict[str, str | None] = {  # every FinishReason of the API's types
    "STOP": base.STOP,
    "MAX_TOKENS": base.LENGTH,
    **dict.fromkeys(_FILTERS, base.CONTENT_FILTER),
    **dict.fromkeys(_TOOLS, base.TOOL_CALLS),
    "OTHER": base.OTHER,
    "IMAGE_OTHER": base.OTHER,
    "NO_IMAGE": base.OTHER,
    "FINISH_REASON_UNSPECIFIED": None,
}
# BlockedReason: every one of them (OTHER and BLOCKED_REASON_UNSPECIFIED too) means the
# prompt was refused, so the reply is filtered content.
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

    kind = "gemini"

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
        reasoning: bool | None = None,
        reasoning_budget: int = DEFAULT_REASONING_BUDGET,
        service_tier: str | None = None,
    ) -> None:
        self.service_tier = service_tier  # "flex": batch prices, slower answers
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
            reasoning=thinks_by_default("gemini", model) if reasoning is None else reasoning,
            reasoning_budget=reasoning_budget,
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
        limit = self.output_limit(request)
        if limit is not None:
            generation["maxOutputTokens"] = limit
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
        if self.service_tier is not None:
            body.setdefault("serviceTier", self.service_tier)
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

    def _reply(self, status: int, data: Any, latency_s: float | None) -> Reply:
        where = f"HTTP {status} from {self._where}"
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            raise self._body_error(status, data)
        if not isinstance(data, dict):
            msg = f"{where}: reply is not a generateContent response: {self._snippet(str(data))}"
            raise self._bad(base.BAD_RESPONSE, msg, status)
        usage = data.get("usageMetadata")
        counts = usage if isinstance(usage, dict) else None
        candidates = data.get("candidates")
        feedback = _dict(data.get("promptFeedback"))
        if not isinstance(candidates, list) or not candidates:
            if not feedback.get("blockReason"):
                raise self._bad(base.EMPTY_RESPONSE, f"{where}: reply has no candidates", status)
            candidate: dict[str, Any] = {}
            finish: str | None = base.CONTENT_FILTER  # the prompt itself was blocked
        else:
            candidate = _dict(candidates[0])
            reason = candidate.get("finishReason")
            finish = _FINISH.get(reason, reason) if isinstance(reason, str) else None
        parts = _dict(candidate.get("content")).get("parts")
        parts = [p for p in (parts if isinstance(parts, list) else []) if isinstance(p, dict)]
        text = "".join(
            p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought")
        )
        thoughts = _count(counts, "thoughtsTokenCount")
        answer = _count(counts, "candidatesTokenCount")
        return Reply(
            text=text,
            finish_reason=finish,
            prompt_tokens=_count(counts, "promptTokenCount"),
            completion_tokens=None if answer is None else answer + (thoughts or 0),
            reasoning_tokens=thoughts,
            latency_s=latency_s,
            model_version=data.get("modelVersion") or None,
            cached_tokens=_count(counts, "cachedContentTokenCount"),
            reasoned=any(p.get("thought") for p in parts),
        )

    def _body_error(self, status: int, data: dict[str, Any]) -> ProviderError:
        """A 2xx whose body is Google's error envelope: the kind its code says."""
        err = _dict(data.get("error"))
        text = json.dumps(data)
        code = err.get("code")
        if isinstance(code, int) and not isinstance(code, bool) and code >= 400:
            failure = self._classify(code, {}, text)
            kind, retryable = failure.kind, failure.retryable
        else:
            kind, retryable = base.PROVIDER_ERROR, True
        detail = self._snippet(_detail(err, text))
        message = f"HTTP {status} from {self._where}: error in the reply: {detail}"
        return ProviderError(kind, self._scrub(message), retryable=retryable, status=status)


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
    if status < 500 and REQUEST_TOO_LARGE_RE.search(message):
        return base.REQUEST_TOO_LARGE
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
