"""A fake OpenAI chat-completions server: scriptable replies, injectable faults, request counts.

``async with FakeOpenAIServer() as srv`` runs it on the current event loop; ``with
FakeOpenAIServer() as srv`` runs it on its own loop in a background thread (for sync tests).
Either way it listens on 127.0.0.1 on a free port and ``srv.base_url`` ends in ``/v1``.

Faults come from ``script`` (one entry per request in arrival order, ``None`` = answer normally)
and, once the script is used up, from ``rates`` ({fault kind: probability}). A rate draw is
seeded by (seed, request body, how often that body was seen), so a sweep sees the same faults
whatever order its concurrent requests arrive in, and a retried request gets a fresh draw.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

RATE_LIMIT = "rate_limit"  # 429 with Retry-After
SERVER_ERROR = "server_error"  # 500
UNAVAILABLE = "unavailable"  # 503
CONTEXT_LENGTH = "context_length"  # 400 context_length_exceeded
UNAUTHORIZED = "unauthorized"  # 401 (also sent when api_key is set and the request lacks it)
SLOW = "slow"  # waits delay_s, then answers normally
RESET = "reset"  # drops the connection without answering
TRUNCATED = "truncated"  # a 200 whose body stops half way
GARBAGE = "garbage"  # a 200 whose body is not JSON
EMPTY_CHOICES = "empty_choices"  # a valid completion with "choices": []
FAULT_KINDS = frozenset(
    {
        RATE_LIMIT,
        SERVER_ERROR,
        UNAVAILABLE,
        CONTEXT_LENGTH,
        UNAUTHORIZED,
        SLOW,
        RESET,
        TRUNCATED,
        GARBAGE,
        EMPTY_CHOICES,
    }
)

Responder = Callable[[dict[str, Any]], "str | dict[str, Any] | Awaitable[str | dict[str, Any]]"]


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: str | None = "1"  # Retry-After header of a rate_limit; None sends none
    retry_after_ms: str | None = None  # retry-after-ms header of a rate_limit
    delay_s: float = 1.0  # how long a slow reply waits

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault {self.kind!r}; known: {', '.join(sorted(FAULT_KINDS))}"
            )


def default_responder(body: dict[str, Any]) -> str:
    return "ok"


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


class FakeOpenAIServer:
    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        script: Iterable[str | Fault | None] = (),
        rates: Mapping[str, float] | None = None,
        seed: int = 0,
        delay_s: float = 0.0,
        model: str = "fake-model",
        api_key: str | None = None,
    ) -> None:
        self.responder = responder
        self.script: deque[Fault | None] = deque(self._fault(f) for f in script)
        self.rates = {Fault(k).kind: p for k, p in (rates or {}).items()}
        self.seed = seed
        self.delay_s = delay_s  # added to every request
        self.model = model
        self.api_key = api_key
        self.requests = 0
        self.fault_counts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.last_body: dict[str, Any] | None = None
        self.last_headers: dict[str, str] | None = None
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
        return f"{self.url}/v1"

    @staticmethod
    def _fault(f: str | Fault | None) -> Fault | None:
        return Fault(f) if isinstance(f, str) else f

    def add_faults(self, *faults: str | Fault | None) -> None:
        """Queue faults for the next requests (thread-safe enough: deque appends are atomic)."""
        self.script.extend(self._fault(f) for f in faults)

    def reset_counts(self) -> None:
        self.requests, self.max_in_flight = 0, 0
        self.fault_counts.clear()

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> FakeOpenAIServer:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
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

    async def __aenter__(self) -> FakeOpenAIServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_in_thread(self) -> FakeOpenAIServer:
        started = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start())
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.close())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai-server", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("fake OpenAI server did not start within 10 s")
        return self

    def stop_thread(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
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

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.last_headers = dict(request.headers)
        try:
            body = json.loads(raw)
            assert isinstance(body["messages"], list) and isinstance(body["model"], str)
        except (ValueError, KeyError, TypeError, AssertionError):
            return _error(
                400, "We could not parse the JSON body of your request.", "invalid_request_error"
            )
        self.last_body = body
        fault = self._pick(raw)
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.api_key is not None and key != self.api_key:
            fault = Fault(UNAUTHORIZED)
        if fault is not None:
            self.fault_counts[fault.kind] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        kind = fault.kind if fault else None
        if kind == RATE_LIMIT:
            headers = {"x-ratelimit-remaining-requests": "0"}
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
            if fault.retry_after_ms is not None:
                headers["retry-after-ms"] = fault.retry_after_ms
            return _error(
                429,
                f"Rate limit reached for {body['model']} on requests per min (RPM)",
                "requests",
                code="rate_limit_exceeded",
                headers=headers,
            )
        if kind == SERVER_ERROR:
            return _error(
                500, "The server had an error while processing your request. Sorry!", "server_error"
            )
        if kind == UNAVAILABLE:
            return _error(
                503, "The engine is currently overloaded, please try again later", "server_error"
            )
        if kind == CONTEXT_LENGTH:
            return _error(
                400,
                "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens. Please reduce the length of the "
                "messages.",
                "invalid_request_error",
                "messages",
                "context_length_exceeded",
            )
        if kind == UNAUTHORIZED:  # echoes the key unmasked, so clients must scrub it themselves
            return _error(
                401,
                f"Incorrect API key provided: {key}.",
                "invalid_request_error",
                code="invalid_api_key",
            )
        if kind == SLOW:
            await asyncio.sleep(fault.delay_s)
        if kind == RESET:
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        if kind == GARBAGE:
            return web.Response(
                body=b"<html>\x00upstream sent garbage{", content_type="application/json"
            )
        reply = self.responder(body)
        if inspect.isawaitable(reply):
            reply = await reply
        payload = reply if isinstance(reply, dict) else self.completion(body, reply)
        if kind == EMPTY_CHOICES:
            payload["choices"] = []
        if kind == TRUNCATED:
            data = json.dumps(payload).encode()
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = len(data)
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()
            return resp
        return web.json_response(payload)

    def completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The chat.completion object OpenAI sends for ``text``; tokens are counted as words."""
        words, finish = text.split(), "stop"
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        if max_tokens is not None and len(words) > max_tokens:
            text, finish = " ".join(words[:max_tokens]), "length"
        prompt_tokens = sum(_words(m.get("content")) + 3 for m in body["messages"])
        completion_tokens = _words(text)
        return {
            "id": f"chatcmpl-fake{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"] or self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }


def _error(
    status: int,
    message: str,
    type_: str,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    err = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return web.json_response(err, status=status, headers=headers)
