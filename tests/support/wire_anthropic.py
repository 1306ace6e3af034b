"""Wire cases of Anthropic's Messages API.

Layouts follow the recorded replies of ``wire-examples`` (``example=``) and
anthropic-sdk-python's types: ``StopReason`` is one of end_turn, max_tokens, stop_sequence,
tool_use, pause_turn, refusal, model_context_window_exceeded; ``Usage`` has
``cache_creation_input_tokens``, ``cache_read_input_tokens``, ``cache_creation``,
``output_tokens`` (inclusive of thinking) and ``output_tokens_details.thinking_tokens``.
"""

from __future__ import annotations

from typing import Any

from tests.support.anthropic_server import THINKING_TEXT
from tests.support.fake_server import WireReply
from tests.support.wire_cases import Case, Derived, Request

SDK = "anthropic-sdk-python types/stop_reason.py, types/usage.py"
THINKING = {"type": "enabled", "budget_tokens": 1024}
CLAUDE = {"model": "claude-sonnet-4-5", "generation": {"extra": {"thinking": THINKING}}}
PLAIN = {"model": "claude-haiku-4-5"}


def words(text: str | None) -> int:
    return len(text.split()) if text else 0


def half(text: str) -> str:
    return text[: max(1, len(text) // 2)]


def budget(r: Request) -> int:
    thinking = r.body.get("thinking") or {}
    return int(thinking.get("budget_tokens") or 0)


def message(
    r: Request,
    blocks: list[dict[str, Any]],
    stop_reason: str,
    *,
    thinking_tokens: int = 0,
    stop_sequence: str | None = None,
    cached: bool = False,
) -> WireReply:
    """A Message in the layout of the recorded reply: cache fields, ``cache_creation``,
    ``output_tokens_details`` and ``inference_geo`` in ``usage``."""
    read = r.prompt_tokens // 2 if cached else 0
    created = r.prompt_tokens // 4 if cached else 0
    text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    usage: dict[str, Any] = {
        "input_tokens": r.prompt_tokens - read - created,
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": created, "ephemeral_1h_input_tokens": 0},
        "output_tokens": thinking_tokens + words(text),
        "output_tokens_details": {"thinking_tokens": thinking_tokens},
        "service_tier": "standard",
        "inference_geo": "not_available",
    }
    body = {
        "model": r.body.get("model"),
        "id": "msg_fake0000000000000000001",
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage,
    }
    return WireReply(200, body, {"request-id": "req_fake000000000000000001"})


def thinking_block() -> dict[str, Any]:
    return {"type": "thinking", "thinking": THINKING_TEXT, "signature": "EqFakeSignature0001"}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _thinking_cut(r: Request) -> WireReply:
    blocks = [
        thinking_block(),
        {"type": "redacted_thinking", "data": "EmwKAhgBEgyFakeRedactedThinking"},
        text_block(half(r.answer)),
    ]
    return message(r, blocks, "max_tokens", thinking_tokens=budget(r), cached=True)


def error(status: str | int, type_: str, message_: str, headers: dict[str, str]) -> Any:
    def build(r: Request) -> WireReply:
        body = {"type": "error", "error": {"type": type_, "message": message_}}
        return WireReply(int(status), body, headers)

    return build


RATE_LIMIT_HEADERS = {
    "anthropic-ratelimit-requests-limit": "5",
    "anthropic-ratelimit-requests-remaining": "0",
    "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:00Z",
    "anthropic-ratelimit-tokens-limit": "25000",
    "anthropic-ratelimit-tokens-remaining": "16000",
    "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:00Z",
    "request-id": "req_fake000000000000000002",
    "x-should-retry": "true",
    "retry-after": "19",
}
OVERLOADED_HEADERS = {
    "cache-control": "no-store, no-cache",
    "content-type": "application/json",
    "request-id": "req_fake000000000000000003",
    "x-should-retry": "true",
}
# The fake's normal reply with thinking enabled: its thinking words are the reasoning tokens.
NORMAL = {
    "validity": "valid",
    "error_kind": None,
    "response": Derived(lambda r: r.answer),
    "finish_reason": "stop",
    "reasoning_tokens": words(THINKING_TEXT),
    "completion_tokens": Derived(lambda r: words(THINKING_TEXT) + words(r.answer)),
    "accuracy": 100.0,
}


def _stopped(stop_reason: str, text: str | None, finish: str, validity: str, **kw: Any) -> Case:
    blocks = (lambda r: [text_block(text or half(r.answer))]) if text != "" else (lambda r: [])
    return Case(
        f"anthropic-{stop_reason.replace('_', '-')}",
        "anthropic",
        (lambda r: message(r, blocks(r), stop_reason, **kw),),
        {"finish_reason": finish, "validity": validity, "error_kind": None},
        source=SDK,
        model=PLAIN,
    )


CASES: tuple[Case, ...] = (
    Case(
        "anthropic-thinking-max-tokens",
        "anthropic",
        (_thinking_cut,),
        {
            "validity": "truncated",
            "response": Derived(lambda r: half(r.answer)),
            "finish_reason": "length",
            "prompt_tokens": Derived(lambda r: r.prompt_tokens),  # uncached + written + read
            "cached_tokens": Derived(lambda r: r.prompt_tokens // 2),
            "reasoning_tokens": THINKING["budget_tokens"],
            "completion_tokens": Derived(
                lambda r: THINKING["budget_tokens"] + words(half(r.answer))
            ),
            "truncated": True,
            "error_kind": None,
        },
        example="anthropic-thinking-max-tokens.json",
        model=CLAUDE,
    ),
    Case(
        "anthropic-429-retry-after",
        "anthropic",
        (
            error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit; see the "
                "response headers for current usage. Please reduce the prompt length or the "
                "maximum tokens requested, or try again later.",
                RATE_LIMIT_HEADERS,
            ),
        ),
        NORMAL,
        example="anthropic-429-retry-after.json",
        model=CLAUDE,
        requests=2,
        waited=(19.0,),
    ),
    Case(
        "anthropic-529-overloaded",
        "anthropic",
        (
            error(529, "overloaded_error", "Overloaded", OVERLOADED_HEADERS),
            error(529, "overloaded_error", "Overloaded", OVERLOADED_HEADERS),
        ),
        {"error_kind": "server_error", "validity": None},
        example="anthropic-529-overloaded.json",
        model=CLAUDE,
        retryable=True,
    ),
    Case(
        "anthropic-end-turn-with-thinking",
        "anthropic",
        (lambda r: message(r, [thinking_block(), text_block(r.answer)], "end_turn"),),
        {**NORMAL, "reasoning_tokens": 0, "completion_tokens": Derived(lambda r: words(r.answer))},
        source=SDK,
        model=CLAUDE,
    ),
    Case(
        "anthropic-stop-sequence",
        "anthropic",
        (lambda r: message(r, [text_block(r.answer)], "stop_sequence", stop_sequence="</answer>"),),
        {"validity": "valid", "finish_reason": "stop", "accuracy": 100.0},
        source=SDK,
        model=PLAIN,
    ),
    Case(
        "anthropic-tool-use",
        "anthropic",
        (
            lambda r: message(
                r,
                [
                    text_block("I will look the numbers up."),
                    {"type": "tool_use", "id": "toolu_fake1", "name": "lookup", "input": {}},
                ],
                "tool_use",
            ),
        ),
        # a visible reply that is no answer: graded as it is (a parse failure), never dropped
        {"validity": "valid", "finish_reason": "tool_calls", "parse_ok": False},
        source=SDK,
        model=PLAIN,
    ),
    _stopped("pause_turn", None, "pause_turn", "truncated"),
    _stopped("refusal", "", "refusal", "refused"),
    _stopped("model_context_window_exceeded", None, "context_exceeded", "context_exceeded"),
    Case(
        "anthropic-thinking-only-max-tokens",
        "anthropic",
        (lambda r: message(r, [thinking_block()], "max_tokens", thinking_tokens=budget(r)),),
        {
            "validity": "thinking_exhausted",
            "finish_reason": "length",
            "response": "",
            "reasoning_tokens": THINKING["budget_tokens"],
        },
        source=SDK,
        model=CLAUDE,
    ),
    _stopped("a_future_stop_reason", None, "a_future_stop_reason", "unknown"),
    Case(
        "anthropic-200-error-envelope",
        "anthropic",
        (error(200, "overloaded_error", "Overloaded", {}),),
        {"error_kind": "server_error", "validity": None},
        source="anthropic-sdk-python types (ErrorResponse) in an HTTP 200",
        model=PLAIN,
        retryable=True,
    ),
    Case(
        "anthropic-413-request-too-large",
        "anthropic",
        (
            error(
                413,
                "request_too_large",
                "Request exceeds the maximum allowed number of bytes.",
                {"request-id": "req_fake000000000000000004"},
            ),
        ),
        {"error_kind": "request_too_large", "validity": None},
        source="Anthropic API errors (413 request_too_large)",
        model=PLAIN,
        retryable=False,
    ),
)
