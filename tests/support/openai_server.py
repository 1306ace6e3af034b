"""A fake OpenAI chat-completions server: scriptable replies, injectable faults, request counts.

It serves ``POST /v1/chat/completions``; ``srv.base_url`` ends in ``/v1``. How it runs (``async
with`` or ``with``) and where its faults come from (``script``, then ``rates``) is
``tests.support.fake_server``'s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.support.fake_server import (
    GARBAGE,
    RESET,
    SLOW,
    TRUNCATED,
    UNAUTHORIZED,  # 401 invalid_api_key, echoing the key sent
    FakeServer,
    FaultBase,
    Responder,
    default_responder,
)

RATE_LIMIT = "rate_limit"  # 429 with Retry-After
SERVER_ERROR = "server_error"  # 500
UNAVAILABLE = "unavailable"  # 503
CONTEXT_LENGTH = "context_length"  # 400 context_length_exceeded
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


@dataclass(frozen=True)
class Fault(FaultBase):
    kinds = FAULT_KINDS

    kind: str
    retry_after: str | None = "1"  # Retry-After header of a rate_limit; None sends none
    retry_after_ms: str | None = None  # retry-after-ms header of a rate_limit
    delay_s: float = 1.0  # how long a slow reply waits


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


class FakeOpenAIServer(FakeServer[Fault]):
    name = "OpenAI"
    fault_type = Fault

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
        super().__init__(
            responder, script=script, rates=rates, seed=seed, delay_s=delay_s, api_key=api_key
        )
        self.model = model

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/v1/chat/completions", self._handle)

    def _parse(self, request: web.Request, raw: bytes) -> dict[str, Any] | web.StreamResponse:
        try:
            body = json.loads(raw)
            assert isinstance(body["messages"], list) and isinstance(body["model"], str)
        except (ValueError, KeyError, TypeError, AssertionError):
            return _error(
                400, "We could not parse the JSON body of your request.", "invalid_request_error"
            )
        return body

    def _key(self, request: web.Request) -> str:
        return request.headers.get("Authorization", "").removeprefix("Bearer ")

    def _fault_response(
        self, request: web.Request, body: dict[str, Any], fault: Fault
    ) -> web.StreamResponse | None:
        if fault.kind == RATE_LIMIT:
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
        if fault.kind == UNAUTHORIZED:  # echoes the key unmasked, so clients must scrub it
            return _error(
                401,
                f"Incorrect API key provided: {self._key(request)}.",
                "invalid_request_error",
                code="invalid_api_key",
            )
        if fault.kind in _ERRORS:
            return _error(*_ERRORS[fault.kind])
        return None

    async def _payload(
        self, request: web.Request, body: dict[str, Any], fault: Fault | None
    ) -> dict[str, Any]:
        reply = await self._reply(body)
        payload = reply if isinstance(reply, dict) else self.completion(body, reply)
        if fault is not None and fault.kind == EMPTY_CHOICES:
            payload["choices"] = []
        return payload

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


_ERRORS: dict[str, tuple[Any, ...]] = {  # fault → the _error arguments of its response
    SERVER_ERROR: (
        500,
        "The server had an error while processing your request. Sorry!",
        "server_error",
    ),
    UNAVAILABLE: (
        503,
        "The engine is currently overloaded, please try again later",
        "server_error",
    ),
    CONTEXT_LENGTH: (
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "messages",
        "context_length_exceeded",
    ),
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
