"""A fake OpenAI chat-completions server: scriptable replies, injectable faults, request counts.

It serves ``POST /v1/chat/completions``; ``srv.base_url`` ends in ``/v1``. How it runs (``async
with`` or ``with``) and where its faults come from (``script``, then ``rates``) is
``tests.support.fake_server``'s.

As OpenAI's API does, a reasoning model (an id starting o1, o3, o4 or gpt-5) refuses
``max_tokens`` and ``top_p`` (400 ``unsupported_parameter``) and any temperature but 1 (400
``unsupported_value``), with the bodies recorded in ``wire-examples``. Its reasoning
(``reasoning_tokens`` a reply) is spent from ``max_completion_tokens`` first and reported in
``completion_tokens_details.reasoning_tokens``: a small limit comes back empty, ``length``.
A responder may answer with a whole ``WireReply`` (tests.support.wire_openai's cases).
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
    WireReply,
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


REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def is_reasoning_model(model: str) -> bool:
    return model.rsplit("/", 1)[-1].startswith(REASONING_PREFIXES)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The fake's token count of a prompt: words + 3 per message."""
    return sum(_words(m.get("content")) + 3 for m in body["messages"])


def unsupported(body: dict[str, Any]) -> WireReply | None:
    """A reasoning model's 400 for a parameter it refuses (the API's own wording)."""
    if not is_reasoning_model(str(body.get("model", ""))):
        return None
    for name, instead in (("max_tokens", "max_completion_tokens"), ("top_p", None)):
        if name in body:
            use = f" Use '{instead}' instead." if instead else ""
            message = f"Unsupported parameter: '{name}' is not supported with this model.{use}"
            return error_reply(400, message, "invalid_request_error", name, "unsupported_parameter")
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        message = (
            f"Unsupported value: 'temperature' does not support {temperature:g} with this model."
            " Only the default (1) value is supported."
        )
        return error_reply(
            400, message, "invalid_request_error", "temperature", "unsupported_value"
        )
    return None


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
        reasoning_tokens: int = 0,
    ) -> None:
        super().__init__(
            responder, script=script, rates=rates, seed=seed, delay_s=delay_s, api_key=api_key
        )
        self.model = model
        self.reasoning_tokens = reasoning_tokens  # what a reasoning model thinks, a reply

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
    ) -> dict[str, Any] | web.StreamResponse:
        refused = unsupported(body)
        if refused is not None:
            return refused.response()
        reply = await self._reply(body)
        if isinstance(reply, WireReply):
            return reply.response()
        payload = reply if isinstance(reply, dict) else self.completion(body, reply)
        if fault is not None and fault.kind == EMPTY_CHOICES:
            payload["choices"] = []
        return payload

    def completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The chat.completion object OpenAI sends for ``text``; tokens are counted as words.
        A reasoning model thinks first, from the same limit."""
        words, finish = text.split(), "stop"
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        thoughts = self.reasoning_tokens if is_reasoning_model(str(body["model"])) else 0
        if max_tokens is not None:
            thoughts = min(thoughts, max_tokens)
            if thoughts + len(words) > max_tokens:
                words, finish = words[: max_tokens - thoughts], "length"
                text = " ".join(words)
        n_prompt = prompt_tokens(body)
        completion_tokens = _words(text) + thoughts
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
                "prompt_tokens": n_prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": n_prompt + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": thoughts},
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


def error_reply(
    status: int,
    message: str,
    type_: str,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> WireReply:
    """OpenAI's error envelope: ``{"error": {"message", "type", "param", "code"}}``."""
    err = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return WireReply(status, err, headers or {})


def _error(
    status: int,
    message: str,
    type_: str,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    return error_reply(status, message, type_, param, code, headers).response()
