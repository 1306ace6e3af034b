"""A fake Gemini API (generateContent, countTokens): scriptable replies, faults, request counts.

``srv.base_url`` is what a client's ``base_url`` takes (the API version and
``models/…:generateContent`` follow it). It speaks Gemini's wire format:
``contents``/``systemInstruction``/``generationConfig`` in,
``candidates``/``usageMetadata``/``modelVersion`` out, Google's error envelope
``{"error": {"code", "message", "status", "details"}}`` on failure, a ``RetryInfo`` detail
on a 429, unknown fields refused with 400 as the real API does. Tokens are counted as
whitespace-separated words, the same way for ``promptTokenCount`` and ``countTokens``
(``words`` replaces that count: a test's "new tokenizer"); ``counted`` and ``sent`` log the
sha256 of every prompt counted and sent (``prompt_sha``).
Thinking: a request's ``thinkingConfig.thinkingBudget`` (or, without one, the server's
``thinking_tokens``) is what the model "thinks"; thoughts count against ``maxOutputTokens``
as they do on Gemini 2.5, and ``includeThoughts`` adds a thought-summary part.

How it runs (``async with`` or ``with``) and where its faults come from (``script``, then
``rates``) is ``tests.support.fake_server``'s; script and rates apply to both methods. A
responder may answer with a whole ``WireReply`` (tests.support.wire_gemini's cases).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiohttp import web

from tests.support.fake_server import (
    GARBAGE,
    RESET,
    SLOW,
    TRUNCATED,
    UNAUTHORIZED,  # 401 UNAUTHENTICATED (also sent when api_key is set and differs)
    FakeServer,
    FaultBase,
    Responder,
    WireReply,
    default_responder,
)

RATE_LIMIT = "rate_limit"  # 429 RESOURCE_EXHAUSTED, per-minute quota, RetryInfo retryDelay
DAILY_QUOTA = "daily_quota"  # 429 RESOURCE_EXHAUSTED naming a per-day quota
SERVER_ERROR = "server_error"  # 500 INTERNAL
UNAVAILABLE = "unavailable"  # 503 UNAVAILABLE ("The model is overloaded")
DEADLINE = "deadline"  # 504 DEADLINE_EXCEEDED
CONTEXT_LENGTH = "context_length"  # 400 INVALID_ARGUMENT "The input token count … exceeds …"
KEY_INVALID = "key_invalid"  # 400 INVALID_ARGUMENT, ErrorInfo API_KEY_INVALID (a wrong key)
FORBIDDEN = "forbidden"  # 403 PERMISSION_DENIED
BLOCKED = "blocked"  # 200 with promptFeedback.blockReason and no candidates
FAULT_KINDS = frozenset(
    {
        RATE_LIMIT,
        DAILY_QUOTA,
        SERVER_ERROR,
        UNAVAILABLE,
        DEADLINE,
        CONTEXT_LENGTH,
        UNAUTHORIZED,
        KEY_INVALID,
        FORBIDDEN,
        BLOCKED,
        SLOW,
        RESET,
        TRUNCATED,
        GARBAGE,
    }
)

GENERATION_FIELDS = frozenset(
    {
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "candidateCount",
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseLogprobs",
        "logprobs",
        "enableEnhancedCivicAnswers",
        "speechConfig",
        "thinkingConfig",
        "mediaResolution",
        "imageConfig",
    }
)
THINKING_FIELDS = frozenset({"thinkingBudget", "includeThoughts", "thinkingLevel"})
REQUEST_FIELDS = frozenset(
    {"contents", "systemInstruction", "generationConfig", "safetySettings", "tools", "toolConfig"}
    | {"cachedContent", "model"}
    # google-genai's _GenerateContentConfig_to_mldev puts service_tier at the request's top.
    | {"serviceTier"}
)
DYNAMIC_THOUGHTS = 32  # thoughts of a dynamic budget (-1) or a thinkingLevel
THOUGHT_SUMMARY = "**Scanning the context** I read the text for the requested values."
DAILY_QUOTA_ID = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
MINUTE_QUOTA_ID = "GenerateRequestsPerMinutePerProjectPerModel"
API_VERSIONS = ("v1beta", "v1", "v1alpha")


@dataclass(frozen=True)
class Fault(FaultBase):
    kinds = FAULT_KINDS

    kind: str
    retry_delay: str | None = "1s"  # RetryInfo.retryDelay of a rate_limit; None sends none
    retry_after: str | None = None  # Retry-After header of a rate_limit (Gemini sends none)
    delay_s: float = 1.0  # how long a slow reply waits
    block_reason: str = "SAFETY"  # promptFeedback.blockReason of a blocked prompt


class BadRequest(Exception):
    """A request the real API refuses with 400 INVALID_ARGUMENT; the message is Google's."""


def _words(text: Any) -> int:
    return len(text.split()) if isinstance(text, str) else 0


def _content_words(content: Any, words: Callable[[Any], int] = _words) -> int:
    parts = content.get("parts") if isinstance(content, dict) else None
    return sum(words(p.get("text")) for p in parts or [] if isinstance(p, dict))


def prompt_tokens(request: Mapping[str, Any], words: Callable[[Any], int] = _words) -> int:
    """The fake's token count of a GenerateContentRequest: words of contents + system."""
    contents = request.get("contents") or []
    return sum(_content_words(c, words) for c in contents) + _content_words(
        request.get("systemInstruction"), words
    )


def prompt_sha(request: Mapping[str, Any]) -> str:
    """A prompt's identity in the logs: its system instruction's text, then each content's."""

    def text(content: Any) -> str:
        parts = content.get("parts") if isinstance(content, dict) else None
        return " ".join(str(p.get("text")) for p in parts or [] if isinstance(p, dict))

    texts = [text(request.get("systemInstruction"))]
    texts += [text(c) for c in request.get("contents") or []]
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()


class FakeGeminiServer(FakeServer[Fault]):
    name = "Gemini"
    fault_type = Fault

    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        script: Iterable[str | Fault | None] = (),
        rates: Mapping[str, float] | None = None,
        seed: int = 0,
        delay_s: float = 0.0,
        models: Collection[str] | None = None,
        model_version: str | None = None,
        api_key: str | None = None,
        thinking_tokens: int = 0,
        max_input_tokens: int | None = None,
    ) -> None:
        super().__init__(
            responder, script=script, rates=rates, seed=seed, delay_s=delay_s, api_key=api_key
        )
        self.models = set(models) if models is not None else None  # None: any model exists
        self.model_version = model_version  # modelVersion sent; None: the model id asked for
        self.thinking_tokens = thinking_tokens  # thoughts of a request that sets no budget
        self.max_input_tokens = max_input_tokens  # longer prompts get the real 400
        self.count_requests = 0  # countTokens requests; requests counts generateContent ones
        self.last_count_body: dict[str, Any] | None = None  # last_body is generateContent's
        self.last_path: str | None = None
        self.words: Callable[[Any], int] = _words  # the "tokenizer"
        self.counted: list[str] = []  # prompt_sha of each prompt counted, in order
        self.sent: list[str] = []  # prompt_sha of each generateContent request

    def reset_counts(self) -> None:
        super().reset_counts()
        self.count_requests = 0
        self.counted, self.sent = [], []

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/{version}/{collection}/{target}", self._handle)

    def _route(self, request: web.Request) -> web.StreamResponse | None:
        target = _Target.of(request)
        if (
            target.version not in API_VERSIONS
            or target.collection not in ("models", "tunedModels")
            or not target.model
        ):
            return web.Response(status=404, text="<html><body>Error 404 (Not Found)</body></html>")
        if target.method not in ("generateContent", "countTokens"):
            return _error(404, f"Method not found: {target.method}.", "NOT_FOUND")
        if target.counting:
            self.count_requests += 1
        else:
            self.requests += 1
        return None

    def _record(self, request: web.Request) -> None:
        super()._record(request)
        self.last_path = request.path_qs

    def _parse(self, request: web.Request, raw: bytes) -> dict[str, Any] | web.StreamResponse:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "Invalid JSON payload received.", "INVALID_ARGUMENT")
        return body

    def _keep(self, request: web.Request, body: dict[str, Any]) -> None:
        if _Target.of(request).counting:
            self.last_count_body = body
        else:
            self.last_body = body

    def _key(self, request: web.Request) -> str:
        return request.headers.get("x-goog-api-key", "")

    def _fault_response(
        self, request: web.Request, body: dict[str, Any], fault: Fault
    ) -> web.StreamResponse | None:
        if fault.kind in (RATE_LIMIT, DAILY_QUOTA):
            return _rate_limited(_Target.of(request).model, fault)
        if fault.kind == CONTEXT_LENGTH:
            return _too_long(2_000_000, 1_048_576)
        if fault.kind == UNAUTHORIZED:  # echoes the key unmasked, so clients must scrub it
            return _error(
                401,
                f"Request had invalid authentication credentials ({self._key(request) or 'none'}). "
                "Expected OAuth 2 access token, login cookie or other valid authentication "
                "credential.",
                "UNAUTHENTICATED",
            )
        if fault.kind == KEY_INVALID:
            return _error(
                400,
                "API key not valid. Please pass a valid API key.",
                "INVALID_ARGUMENT",
                [_info("API_KEY_INVALID")],
            )
        if fault.kind in _ERRORS:
            return _error(*_ERRORS[fault.kind])
        return None

    async def _payload(
        self, request: web.Request, body: dict[str, Any], fault: Fault | None
    ) -> dict[str, Any] | web.StreamResponse:
        target = _Target.of(request)
        if self.models is not None and target.model not in self.models:
            return _error(
                404,
                f"{target.resource} is not found for API version {target.version}, or is not "
                f"supported for {target.method}. Call ListModels to see the list of available "
                "models and their supported methods.",
                "NOT_FOUND",
            )
        try:
            if target.counting:
                return self.count(body, target.resource)
            generated = await self.generate(body, target.model, fault)
            return generated.response() if isinstance(generated, WireReply) else generated
        except BadRequest as e:
            return _error(400, str(e), "INVALID_ARGUMENT")
        except _TooLong as e:
            return _too_long(e.tokens, e.limit)

    # --- the two methods -------------------------------------------------------------------

    def count(self, body: dict[str, Any], resource: str) -> dict[str, Any]:
        """countTokens: ``contents`` or a whole ``generateContentRequest``, never both."""
        unknown = set(body) - {"contents", "generateContentRequest"}
        if unknown:
            raise BadRequest(_unknown_name(sorted(unknown)[0], ""))
        inner = body.get("generateContentRequest")
        if inner is not None and body.get("contents"):
            raise BadRequest("contents and generateContentRequest are mutually exclusive.")
        if inner is not None:
            if not isinstance(inner, dict):
                raise BadRequest("generateContentRequest must be an object.")
            if inner.get("model") != resource:
                raise BadRequest(
                    f"generateContentRequest.model ({inner.get('model')!r}) must match the "
                    f"model in the URL ({resource})."
                )
            _check_request(inner)
            self.counted.append(prompt_sha(inner))
            return {"totalTokens": prompt_tokens(inner, self.words)}
        _check_contents(body.get("contents"))
        self.counted.append(prompt_sha(body))
        return {"totalTokens": prompt_tokens(body, self.words)}

    async def generate(
        self, body: dict[str, Any], model: str, fault: Fault | None
    ) -> dict[str, Any] | WireReply:
        _check_request(body)
        n_prompt = prompt_tokens(body, self.words)
        self.sent.append(prompt_sha(body))
        if self.max_input_tokens is not None and n_prompt > self.max_input_tokens:
            raise _TooLong(n_prompt, self.max_input_tokens)
        version = self.model_version or model
        if fault is not None and fault.kind == BLOCKED:
            return {
                "promptFeedback": {
                    "blockReason": fault.block_reason,
                    "safetyRatings": [
                        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}
                    ],
                },
                "usageMetadata": {"promptTokenCount": n_prompt, "totalTokenCount": n_prompt},
                "modelVersion": version,
            }
        reply = await self._reply(body)
        if isinstance(reply, dict | WireReply):
            return reply
        return self.response(body, reply, n_prompt, version)

    def response(
        self, body: dict[str, Any], text: str, n_prompt: int, version: str
    ) -> dict[str, Any]:
        """The GenerateContentResponse Gemini sends for ``text``; tokens are counted as words."""
        config = body.get("generationConfig") or {}
        thinking = config.get("thinkingConfig") or {}
        budget = thinking.get("thinkingBudget")
        if budget is None:
            thoughts = DYNAMIC_THOUGHTS if "thinkingLevel" in thinking else self.thinking_tokens
        else:
            thoughts = budget if budget >= 0 else DYNAMIC_THOUGHTS
        words, finish = text.split(), "STOP"
        limit = config.get("maxOutputTokens")
        if limit is not None and thoughts + len(words) > limit:  # thoughts are spent first
            thoughts = min(thoughts, limit)
            words, finish = words[: limit - thoughts], "MAX_TOKENS"
        parts: list[dict[str, Any]] = []
        if thoughts and thinking.get("includeThoughts"):
            parts.append({"text": THOUGHT_SUMMARY, "thought": True})
        if words:
            parts.append({"text": " ".join(words)})
        content: dict[str, Any] = {"role": "model"}
        if parts:
            content["parts"] = parts
        usage: dict[str, Any] = {"promptTokenCount": n_prompt}
        if words:  # proto3 JSON leaves zero counts out
            usage["candidatesTokenCount"] = len(words)
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        usage["totalTokenCount"] = n_prompt + len(words) + thoughts
        usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": n_prompt}]
        return {
            "candidates": [{"content": content, "finishReason": finish, "index": 0}],
            "usageMetadata": usage,
            "modelVersion": version,
            "responseId": f"fake-{self.requests}",
        }


class _Target(NamedTuple):
    """What a request's URL ``/{version}/{collection}/{model}:{method}`` names."""

    version: str
    collection: str
    model: str
    method: str

    @classmethod
    def of(cls, request: web.Request) -> _Target:
        model, _, method = request.match_info["target"].rpartition(":")
        return cls(request.match_info["version"], request.match_info["collection"], model, method)

    @property
    def resource(self) -> str:
        return f"{self.collection}/{self.model}"

    @property
    def counting(self) -> bool:
        return self.method == "countTokens"


class _TooLong(Exception):
    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(tokens, limit)
        self.tokens, self.limit = tokens, limit


def _unknown_name(name: str, where: str) -> str:
    at = f" at '{where}'" if where else ""
    return f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.'


def _check_contents(contents: Any) -> None:
    if not isinstance(contents, list) or not contents:
        raise BadRequest("* GenerateContentRequest.contents: contents is not specified")
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise BadRequest(f"* GenerateContentRequest.contents[{i}].parts: must be a list")
        if content.get("role", "user") not in ("user", "model"):
            raise BadRequest("Please use a valid role: user, model.")
        for part in content["parts"]:
            if not isinstance(part, dict) or not isinstance(part.get("text"), str):
                raise BadRequest(f"* GenerateContentRequest.contents[{i}].parts: text expected")


def _check_request(body: dict[str, Any]) -> None:
    for name in body:
        if name not in REQUEST_FIELDS:
            raise BadRequest(_unknown_name(name, ""))
    _check_contents(body.get("contents"))
    system = body.get("systemInstruction")
    if system is not None and not isinstance(_dict(system).get("parts"), list):
        raise BadRequest("* GenerateContentRequest.system_instruction.parts: must be a list")
    config = body.get("generationConfig") or {}
    if not isinstance(config, dict):
        raise BadRequest("Invalid value at 'generation_config': expected an object.")
    for name in config:
        if name not in GENERATION_FIELDS:
            raise BadRequest(_unknown_name(name, "generation_config"))
    thinking = config.get("thinkingConfig") or {}
    for name in thinking:
        if name not in THINKING_FIELDS:
            raise BadRequest(_unknown_name(name, "generation_config.thinking_config"))
    limit = config.get("maxOutputTokens")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise BadRequest(
            "* GenerateContentRequest.generation_config.max_output_tokens: must be > 0"
        )


_ERRORS: dict[str, tuple[int, str, str]] = {  # fault → (code, message, status)
    SERVER_ERROR: (500, "An internal error has occurred. Please retry.", "INTERNAL"),
    UNAVAILABLE: (503, "The model is overloaded. Please try again later.", "UNAVAILABLE"),
    DEADLINE: (504, "Deadline expired before operation could complete.", "DEADLINE_EXCEEDED"),
    FORBIDDEN: (
        403,
        "Method doesn't allow unregistered callers (callers without established identity). "
        "Please use API Key or other form of API consumer identity to call this API.",
        "PERMISSION_DENIED",
    ),
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _info(reason: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }


def _too_long(tokens: int, limit: int) -> web.Response:
    return _error(
        400,
        f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
        "INVALID_ARGUMENT",
    )


def _rate_limited(model: str, fault: Fault) -> web.Response:
    quota = DAILY_QUOTA_ID if fault.kind == DAILY_QUOTA else MINUTE_QUOTA_ID
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    message = (
        "You exceeded your current quota, please check your plan and billing details. For "
        "more information on this error, head to: https://ai.google.dev/gemini-api/docs/"
        f"rate-limits.\n* Quota exceeded for metric: {metric}, limit: 10, model: {model}"
    )
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": metric,
                    "quotaId": quota,
                    "quotaDimensions": {"location": "global", "model": model},
                    "quotaValue": "10",
                }
            ],
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [
                {
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                }
            ],
        },
    ]
    if fault.retry_delay is not None:
        message += f"\nPlease retry in {fault.retry_delay}."
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fault.retry_delay}
        )
    headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
    return _error(429, message, "RESOURCE_EXHAUSTED", details, headers)


def _error(
    code: int,
    message: str,
    status: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        err["details"] = details
    return web.json_response({"error": err}, status=code, headers=headers)
