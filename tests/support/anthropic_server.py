"""A fake Anthropic Messages API: scriptable replies, injectable faults, request counts.

It serves ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` in Anthropic's wire
format; ``srv.base_url`` is the host root (the client appends ``/v1/messages``). The
``anthropic-version`` header is required, ``x-api-key`` is checked when ``api_key`` is set,
unknown body fields are refused as the real API refuses them, every reply carries a
``request-id`` header and errors come in the ``{"type": "error", "error": {"type", "message"},
"request_id"}`` envelope.

A request that enables thinking gets a ``thinking`` block (with a ``signature``) before its
``text`` block, its tokens in ``usage.output_tokens_details.thinking_tokens``, and is held to
the API's thinking rules (budget_tokens ≥ 1024 and below max_tokens, no temperature but 1). A
responder may answer with a whole ``WireReply`` (tests.support.wire_anthropic's cases).

Tokens are counted as words: a message costs its words + 3, the system prompt its words + 3,
so ``count_tokens`` and a reply's ``usage.input_tokens`` agree for the same prompt. ``words``
replaces the word count (a test's "new tokenizer"); ``counted`` and ``sent`` log the sha256 of
every prompt counted and sent (its messages' and system's text, as ``prompt_sha``).

How it runs (``async with`` or ``with``) and where its faults come from (``script``, then
``rates``) is ``tests.support.fake_server``'s; script and rates apply to both endpoints.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tests.support.fake_server import (
    GARBAGE,
    RESET,
    SLOW,
    TRUNCATED,
    UNAUTHORIZED,  # 401 authentication_error (also sent for a wrong/missing key)
    FakeServer,
    FaultBase,
    Responder,
    WireReply,
    default_responder,
)

RATE_LIMIT = "rate_limit"  # 429 rate_limit_error with retry-after
SPEND_LIMIT = "spend_limit"  # 429 rate_limit_error for a spent monthly limit: no retry-after
OVERLOADED = "overloaded"  # 529 overloaded_error
SERVER_ERROR = "server_error"  # 500 api_error
PROMPT_TOO_LONG = "prompt_too_long"  # 400 invalid_request_error "prompt is too long: …"
TOO_LARGE = "too_large"  # 413 request_too_large
FORBIDDEN = "forbidden"  # 403 permission_error
EMPTY_CONTENT = "empty_content"  # a valid message with "content": [] and stop_reason end_turn
FAULT_KINDS = frozenset(
    {
        RATE_LIMIT,
        SPEND_LIMIT,
        OVERLOADED,
        SERVER_ERROR,
        PROMPT_TOO_LONG,
        TOO_LARGE,
        UNAUTHORIZED,
        FORBIDDEN,
        SLOW,
        RESET,
        TRUNCATED,
        GARBAGE,
        EMPTY_CONTENT,
    }
)

# Top-level fields the Messages API accepts; any other is a 400 "Extra inputs are not permitted".
MESSAGE_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "metadata",
        "thinking",
        "tools",
        "tool_choice",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "output_config",
    }
)
COUNT_FIELDS = frozenset(
    {"model", "messages", "system", "thinking", "tools", "tool_choice", "context_management"}
)
THINKING_TEXT = "Let me look for the answer in the text before replying."

REQUEST_ID = web.RequestKey("request_id", str)
COUNTING = web.RequestKey("counting", bool)  # a count_tokens request


@dataclass(frozen=True)
class Fault(FaultBase):
    kinds = FAULT_KINDS

    kind: str
    retry_after: str | None = "1"  # retry-after header of a rate_limit; None sends none
    delay_s: float = 1.0  # how long a slow reply waits
    message: str | None = None  # replaces the error message of an error fault


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _text(content: Any) -> str:
    """The text of a message's content: a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(b.get("text") or b.get("thinking") or "") for b in content if isinstance(b, dict)
        )
    return ""


def count_input_tokens(body: dict[str, Any], words: Callable[[str], int] = _words) -> int:
    """The fake's token count of a prompt: words + 3 per message, and the system's words + 3."""
    tokens = sum(words(_text(m.get("content"))) + 3 for m in body["messages"])
    system = body.get("system")
    if system:
        tokens += words(_text(system)) + 3
    return tokens


def prompt_sha(body: dict[str, Any]) -> str:
    """A prompt's identity in the logs: its system's and messages' text."""
    texts = [_text(body.get("system"))] + [_text(m.get("content")) for m in body["messages"]]
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()


class FakeAnthropicServer(FakeServer[Fault]):
    name = "Anthropic"
    fault_type = Fault
    last_headers: CIMultiDict[str] | None  # case-insensitive keys

    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        script: Iterable[str | Fault | None] = (),
        rates: Mapping[str, float] | None = None,
        seed: int = 0,
        delay_s: float = 0.0,
        model: str = "claude-fake-1",
        api_key: str | None = None,
        context_window: int = 200_000,
    ) -> None:
        super().__init__(
            responder, script=script, rates=rates, seed=seed, delay_s=delay_s, api_key=api_key
        )
        self.model = model
        self.context_window = context_window  # a longer prompt gets the real "prompt is too long"
        self.message_requests = 0  # requests counts both endpoints
        self.count_requests = 0
        self.last_path: str | None = None
        self.words: Callable[[str], int] = _words  # the "tokenizer"
        self.counted: list[str] = []  # prompt_sha of each prompt counted, in order
        self.sent: list[str] = []  # prompt_sha of each message request

    def reset_counts(self) -> None:
        super().reset_counts()
        self.message_requests, self.count_requests = 0, 0
        self.counted, self.sent = [], []

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/messages", self._handle)
        router.add_post("/v1/messages/count_tokens", self._handle, name="count_tokens")

    def _route(self, request: web.Request) -> None:
        request[COUNTING] = request.match_info.route.name == "count_tokens"
        if request[COUNTING]:
            self.count_requests += 1
        else:
            self.message_requests += 1
        super()._route(request)
        request[REQUEST_ID] = f"req_fake{self.requests:016d}"

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {"request-id": request[REQUEST_ID]}

    def _record(self, request: web.Request) -> None:
        self.last_headers = CIMultiDict(request.headers)
        self.last_path = request.path

    def _parse(self, request: web.Request, raw: bytes) -> dict[str, Any] | web.StreamResponse:
        if "anthropic-version" not in request.headers:
            return _error(
                request, 400, "invalid_request_error", "anthropic-version: header is required"
            )
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(
                request, 400, "invalid_request_error", "There was an error parsing the body."
            )
        problem = _invalid(body, request[COUNTING])
        if problem is not None:
            return _error(request, 400, "invalid_request_error", problem)
        return body

    def _key(self, request: web.Request) -> str | None:
        return request.headers.get("x-api-key")

    def _fault_response(
        self, request: web.Request, body: dict[str, Any], fault: Fault
    ) -> web.StreamResponse | None:
        kind = fault.kind
        if kind not in _ERRORS:
            return None
        status, type_, message = _ERRORS[kind]
        if kind == PROMPT_TOO_LONG:
            message = message.format(n=count_input_tokens(body), max=self.context_window)
        headers, details = {}, None
        if kind == RATE_LIMIT:
            headers = {
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
            }
            if fault.retry_after is not None:
                headers["retry-after"] = fault.retry_after
        if kind == SPEND_LIMIT:
            details = {"error_code": "enforced_spend_limit_reached"}
        message = fault.message or message
        return _error(request, status, type_, message, headers=headers, details=details)

    async def _payload(
        self, request: web.Request, body: dict[str, Any], fault: Fault | None
    ) -> dict[str, Any] | web.StreamResponse:
        input_tokens = count_input_tokens(body, self.words)
        (self.counted if request[COUNTING] else self.sent).append(prompt_sha(body))
        if input_tokens > self.context_window:
            message = f"prompt is too long: {input_tokens} tokens > {self.context_window} maximum"
            return _error(request, 400, "invalid_request_error", message)
        if request[COUNTING]:
            return {"input_tokens": input_tokens}
        reply = await self._reply(body)
        if isinstance(reply, WireReply):
            return reply.response()
        payload = reply if isinstance(reply, dict) else self.message(body, reply)
        if fault is not None and fault.kind == EMPTY_CONTENT:
            payload["content"], payload["stop_reason"] = [], "end_turn"
            payload["usage"]["output_tokens"] = 0
        return payload

    def message(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The Message object Anthropic sends for ``text``; tokens are counted as words.

        Thinking words count against max_tokens first; what is left bounds the text, as with
        the real API. A stop sequence in the text ends it there.
        """
        thinking = body.get("thinking")
        thinking = thinking if isinstance(thinking, dict) else {}
        blocks: list[dict[str, Any]] = []
        budget = body["max_tokens"]
        thought = 0
        if thinking.get("type") in ("enabled", "adaptive"):
            words = THINKING_TEXT.split()[:budget]
            thought = len(words)
            signature = hashlib.sha256(f"{self.seed}:{self.requests}".encode()).hexdigest()
            blocks.append(
                {"type": "thinking", "thinking": " ".join(words), "signature": f"Eq{signature}"}
            )
            budget -= len(words)
        stop_reason, stop_sequence = "end_turn", None
        for sequence in body.get("stop_sequences") or ():
            if sequence in text:
                text, stop_reason, stop_sequence = (
                    text.split(sequence)[0],
                    "stop_sequence",
                    sequence,
                )
                break
        words = text.split()
        if len(words) > budget:
            text, stop_reason, stop_sequence = " ".join(words[:budget]), "max_tokens", None
        if text:
            blocks.append({"type": "text", "text": text})
        return {
            "id": f"msg_fake{self.requests:08d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"] or self.model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": {
                "input_tokens": count_input_tokens(body, self.words),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": body["max_tokens"] - budget + _words(text),
                # the thinking's share of output_tokens, as the API reports it
                **({"output_tokens_details": {"thinking_tokens": thought}} if thought else {}),
                "service_tier": "standard",
            },
        }


_ERRORS = {  # fault → (status, error type, message)
    RATE_LIMIT: (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    SPEND_LIMIT: (
        429,
        "rate_limit_error",
        "You have reached your usage tier's monthly spend limit. Access resumes next month.",
    ),
    OVERLOADED: (529, "overloaded_error", "Overloaded"),
    SERVER_ERROR: (500, "api_error", "Internal server error"),
    PROMPT_TOO_LONG: (
        400,
        "invalid_request_error",
        "prompt is too long: {n} tokens > {max} maximum",
    ),
    TOO_LARGE: (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    UNAUTHORIZED: (401, "authentication_error", "invalid x-api-key"),
    FORBIDDEN: (403, "permission_error", "Your API key does not have permission to use this."),
}


def _invalid(body: Any, counting: bool) -> str | None:
    """The API's 400 message for a body it would refuse, or None."""
    if not isinstance(body, dict):
        return "Input should be a valid dictionary"
    for field in ("model", "messages") if counting else ("model", "messages", "max_tokens"):
        if field not in body:
            return f"{field}: Field required"
    allowed = COUNT_FIELDS if counting else MESSAGE_FIELDS
    for field in body:
        if field not in allowed:
            return f"{field}: Extra inputs are not permitted"
    if not isinstance(body["model"], str):
        return "model: Input should be a valid string"
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return "messages: Input should be a valid list"
    for i, m in enumerate(messages):
        if m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if not _text(m.get("content")).strip():
            return f"messages.{i}: all messages must have non-empty content"
    if counting:
        return None
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be a valid integer greater than or equal to 1"
    temperature = body.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        return "temperature: Input should be less than or equal to 1"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        if temperature is not None and temperature != 1:
            return (
                "`temperature` may only be set to 1 when thinking is enabled or in adaptive "
                "mode. Please consult our documentation at https://docs.claude.com/en/docs/"
                "build-with-claude/extended-thinking#feature-compatibility"
            )
        if thinking["type"] == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                return (
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                )
            if max_tokens <= budget:
                return "`max_tokens` must be greater than `thinking.budget_tokens`."
    return None


def _error(
    request: web.Request,
    status: int,
    type_: str,
    message: str,
    headers: dict[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> web.Response:
    error: dict[str, Any] = {"type": type_, "message": message}
    if details is not None:
        error["details"] = details
    payload = {"type": "error", "error": error, "request_id": request[REQUEST_ID]}
    return web.json_response(payload, status=status, headers=headers)
