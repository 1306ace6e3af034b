"""A fake Anthropic Messages API: scriptable replies, injectable faults, request counts.

``async with FakeAnthropicServer() as srv`` runs it on the current event loop; ``with
FakeAnthropicServer() as srv`` runs it on its own loop in a background thread (for sync tests).
Either way it listens on 127.0.0.1 on a free port; ``srv.base_url`` is the host root (the
client appends ``/v1/messages``). It serves ``POST /v1/messages`` and
``POST /v1/messages/count_tokens`` in Anthropic's wire format: the ``anthropic-version`` header
is required, ``x-api-key`` is checked when ``api_key`` is set, unknown body fields are refused
as the real API refuses them, every reply carries a ``request-id`` header and errors come in
the ``{"type": "error", "error": {"type", "message"}, "request_id"}`` envelope.

A request that enables thinking gets a ``thinking`` block (with a ``signature``) before its
``text`` block, and is held to the API's thinking rules (budget_tokens ≥ 1024 and below
max_tokens, no temperature but 1).

Tokens are counted as words: a message costs its words + 3, the system prompt its words + 3,
so ``count_tokens`` and a reply's ``usage.input_tokens`` agree for the same prompt.

Faults come from ``script`` (one entry per request in arrival order, ``None`` = answer normally)
and, once the script is used up, from ``rates`` ({fault kind: probability}). A rate draw is
seeded by (seed, request body, how often that body was seen), so a sweep sees the same faults
whatever order its concurrent requests arrive in, and a retried request gets a fresh draw.
Script and rates apply to both endpoints.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import threading
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

RATE_LIMIT = "rate_limit"  # 429 rate_limit_error with retry-after
SPEND_LIMIT = "spend_limit"  # 429 rate_limit_error for a spent monthly limit: no retry-after
OVERLOADED = "overloaded"  # 529 overloaded_error
SERVER_ERROR = "server_error"  # 500 api_error
PROMPT_TOO_LONG = "prompt_too_long"  # 400 invalid_request_error "prompt is too long: …"
TOO_LARGE = "too_large"  # 413 request_too_large
UNAUTHORIZED = "unauthorized"  # 401 authentication_error (also sent for a wrong/missing key)
FORBIDDEN = "forbidden"  # 403 permission_error
SLOW = "slow"  # waits delay_s, then answers normally
RESET = "reset"  # drops the connection without answering
TRUNCATED = "truncated"  # a 200 whose body stops half way
GARBAGE = "garbage"  # a 200 whose body is not JSON
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

Responder = Callable[[dict[str, Any]], "str | dict[str, Any] | Awaitable[str | dict[str, Any]]"]


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: str | None = "1"  # retry-after header of a rate_limit; None sends none
    delay_s: float = 1.0  # how long a slow reply waits
    message: str | None = None  # replaces the error message of an error fault

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault {self.kind!r}; known: {', '.join(sorted(FAULT_KINDS))}"
            )


def default_responder(body: dict[str, Any]) -> str:
    return "ok"


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


def count_input_tokens(body: dict[str, Any]) -> int:
    """The fake's token count of a prompt: words + 3 per message, and the system's words + 3."""
    tokens = sum(_words(_text(m.get("content"))) + 3 for m in body["messages"])
    system = body.get("system")
    if system:
        tokens += _words(_text(system)) + 3
    return tokens


class FakeAnthropicServer:
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
        self.responder = responder
        self.script: deque[Fault | None] = deque(self._fault(f) for f in script)
        self.rates = {Fault(k).kind: p for k, p in (rates or {}).items()}
        self.seed = seed
        self.delay_s = delay_s  # added to every request
        self.model = model
        self.api_key = api_key
        self.context_window = context_window  # a longer prompt gets the real "prompt is too long"
        self.requests = 0  # both endpoints
        self.message_requests = 0
        self.count_requests = 0
        self.fault_counts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.last_body: dict[str, Any] | None = None
        self.last_headers: CIMultiDict[str] | None = None  # case-insensitive keys
        self.last_path: str | None = None
        self.port = 0
        self._seen: Counter[bytes] = Counter()
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url  # Anthropic's base URL is the host root: https://api.anthropic.com

    @staticmethod
    def _fault(f: str | Fault | None) -> Fault | None:
        return Fault(f) if isinstance(f, str) else f

    def add_faults(self, *faults: str | Fault | None) -> None:
        """Queue faults for the next requests (thread-safe enough: deque appends are atomic)."""
        self.script.extend(self._fault(f) for f in faults)

    def reset_counts(self) -> None:
        self.requests, self.message_requests, self.count_requests = 0, 0, 0
        self.max_in_flight = 0
        self.fault_counts.clear()

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> FakeAnthropicServer:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeAnthropicServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_in_thread(self) -> FakeAnthropicServer:
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start())
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.close())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="fake-anthropic-server", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("fake Anthropic server did not start within 10 s")
        return self

    def stop_thread(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.stop_thread()

    # --- request handling ------------------------------------------------------------------

    def _pick(self, raw: bytes) -> Fault | None:
        if self.script:
            return self.script.popleft()
        if not self.rates:
            return None
        digest = hashlib.blake2b(raw, digest_size=8).digest()
        nth = self._seen[digest]
        self._seen[digest] += 1
        u = random.Random(f"{self.seed}:{digest.hex()}:{nth}").random()
        for kind, p in self.rates.items():
            if u < p:
                return Fault(kind)
            u -= p
        return None

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.message_requests += 1
        return await self._handle(request, counting=False)

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        self.count_requests += 1
        return await self._handle(request, counting=True)

    async def _handle(self, request: web.Request, *, counting: bool) -> web.StreamResponse:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        request_id = f"req_fake{self.requests:016d}"
        try:
            resp = await self._answer(request, request_id, counting=counting)
        finally:
            self.in_flight -= 1
        if not resp.prepared:
            resp.headers["request-id"] = request_id
        return resp

    async def _answer(
        self, request: web.Request, request_id: str, *, counting: bool
    ) -> web.StreamResponse:
        raw = await request.read()
        self.last_headers = CIMultiDict(request.headers)
        self.last_path = request.path

        def error(status: int, type_: str, message: str, **kw: Any) -> web.Response:
            return _error(status, type_, message, request_id, **kw)

        if "anthropic-version" not in request.headers:
            return error(400, "invalid_request_error", "anthropic-version: header is required")
        try:
            body = json.loads(raw)
        except ValueError:
            return error(400, "invalid_request_error", "There was an error parsing the body.")
        problem = _invalid(body, counting)
        if problem is not None:
            return error(400, "invalid_request_error", problem)
        self.last_body = body
        fault = self._pick(raw)
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            fault = Fault(UNAUTHORIZED)
        if fault is not None:
            self.fault_counts[fault.kind] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        kind = fault.kind if fault else None
        if fault is not None and kind in _ERRORS:
            status, type_, message = _ERRORS[fault.kind]
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
            return error(status, type_, fault.message or message, headers=headers, details=details)
        if kind == SLOW:
            await asyncio.sleep(fault.delay_s)  # type: ignore[union-attr]
        if kind == RESET:
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        if kind == GARBAGE:
            return web.Response(
                body=b"<html>\x00upstream sent garbage{", content_type="application/json"
            )
        input_tokens = count_input_tokens(body)
        if input_tokens > self.context_window:
            message = f"prompt is too long: {input_tokens} tokens > {self.context_window} maximum"
            return error(400, "invalid_request_error", message)
        if counting:
            payload: dict[str, Any] = {"input_tokens": input_tokens}
        else:
            reply = self.responder(body)
            if inspect.isawaitable(reply):
                reply = await reply
            payload = reply if isinstance(reply, dict) else self.message(body, reply)
            if kind == EMPTY_CONTENT:
                payload["content"], payload["stop_reason"] = [], "end_turn"
                payload["usage"]["output_tokens"] = 0
        if kind == TRUNCATED:
            data = json.dumps(payload).encode()
            resp = web.StreamResponse(
                headers={"Content-Type": "application/json", "request-id": request_id}
            )
            resp.content_length = len(data)
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()
            return resp
        return web.json_response(payload)

    def message(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The Message object Anthropic sends for ``text``; tokens are counted as words.

        Thinking words count against max_tokens first; what is left bounds the text, as with
        the real API. A stop sequence in the text ends it there.
        """
        thinking = body.get("thinking")
        thinking = thinking if isinstance(thinking, dict) else {}
        blocks: list[dict[str, Any]] = []
        budget = body["max_tokens"]
        if thinking.get("type") in ("enabled", "adaptive"):
            words = THINKING_TEXT.split()[:budget]
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
                "input_tokens": count_input_tokens(body),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": body["max_tokens"] - budget + _words(text),
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
    status: int,
    type_: str,
    message: str,
    request_id: str,
    headers: dict[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> web.Response:
    error: dict[str, Any] = {"type": type_, "message": message}
    if details is not None:
        error["details"] = details
    payload = {"type": "error", "error": error, "request_id": request_id}
    return web.json_response(payload, status=status, headers=headers)
