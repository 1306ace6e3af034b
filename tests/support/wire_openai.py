"""Wire cases of the chat-completions format (OpenAI, DeepSeek/vLLM, OpenRouter).

Layouts follow the recorded replies of ``wire-examples`` (``example=``) and openai-python's
``ChatCompletion`` types: ``Choice.finish_reason`` is one of stop, length, tool_calls,
content_filter, function_call; ``CompletionUsage`` has ``prompt_tokens_details.cached_tokens``
and ``completion_tokens_details.reasoning_tokens``; ``ChatCompletionMessage`` has ``refusal``.
"""

from __future__ import annotations

import time
from typing import Any

from tests.support.fake_server import WireReply
from tests.support.openai_server import error_reply, unsupported
from tests.support.wire_cases import Case, Derived, Request

REASONING_TOKENS = 96  # what the fake's reasoning models think, a reply
REFUSAL = "I'm very sorry, but I can't assist with that."
THOUGHTS = "The user wants the numbers in order. I see them in the text."
OPENAI = "openai-python types/chat/chat_completion.py"


def words(text: str | None) -> int:
    return len(text.split()) if text else 0


def half(text: str) -> str:
    """The first half of an answer: what a cut-off reply holds."""
    return text[: max(1, len(text) // 2)]


def completion(
    r: Request,
    content: str | None,
    finish: str,
    *,
    layout: str = "chat",
    reasoning: int = 0,
    cached: int = 0,
    message: dict[str, Any] | None = None,
) -> WireReply:
    """A chat.completion in one of the layouts the examples show: ``chat`` (gpt-4o),
    ``reasoning`` (o-series), ``vllm`` (vLLM / DeepSeek), ``router`` (OpenRouter)."""
    model = str(r.body.get("model"))
    out = words(content) + reasoning
    usage: dict[str, Any] = {
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": out,
        "total_tokens": r.prompt_tokens + out,
    }
    msg: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    choice: dict[str, Any] = {"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}
    body: dict[str, Any] = {
        "id": f"chatcmpl-fake{time.monotonic_ns() % 10**12}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage,
    }
    if layout in ("chat", "reasoning"):
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        body["system_fingerprint"] = "fp_fake01"
    if layout == "reasoning":
        msg["annotations"] = []
        usage["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
        usage["completion_tokens_details"] |= {
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
        body["service_tier"] = "default"
    elif layout == "vllm":
        del body["choices"][0]["message"]["refusal"]
        choice["stop_reason"] = None
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    elif layout == "router":
        del msg["refusal"], choice["logprobs"]
        usage.update(prompt_tokens=None, completion_tokens=None, total_tokens=0)
    msg.update(message or {})
    return WireReply(200, body)


def _vllm_reasoning(r: Request) -> WireReply:
    reply = completion(
        r,
        "\n\n" + r.answer,
        "stop",
        layout="vllm",
        reasoning=words(THOUGHTS),
        cached=r.prompt_tokens // 2,
        message={"reasoning_content": THOUGHTS, "tool_calls": []},
    )
    message = reply.body["choices"][0]["message"]  # the example's key order
    reply.body["choices"][0]["message"] = {
        "role": "assistant",
        "reasoning_content": message["reasoning_content"],
        "content": message["content"],
        "tool_calls": [],
    }
    return reply


def _rate_limited(retry_after: str) -> WireReply:
    return error_reply(
        429,
        "Rate limit reached for o3-mini on requests per min (RPM): Limit 500, Used 500.",
        "requests",
        None,
        "rate_limit_exceeded",
        {"Retry-After": retry_after},
    )


def _too_large(r: Request) -> WireReply:
    return error_reply(
        429,
        f"Request too large for {r.body.get('model')} in organization org-fake on tokens per min"
        f" (TPM): Limit 30000, Requested {30000 + r.prompt_tokens}. The input or output tokens"
        " must be reduced in order to run successfully. Visit"
        " https://platform.openai.com/account/rate-limits to learn more.",
        "tokens",
        None,
        "rate_limit_exceeded",
    )


def _refused_parameter(**sent: Any) -> Any:
    """The fake's own reasoning-model rule, answering a request that sent ``sent``."""

    def build(r: Request) -> WireReply:
        reply = unsupported({**r.body, "model": "o3-mini", **sent})
        assert reply is not None
        return reply

    return build


VALID = {"validity": "valid", "error_kind": None}
TOKENS = {
    "prompt_tokens": Derived(lambda r: r.prompt_tokens),
    "completion_tokens": Derived(lambda r: words(r.answer)),
    "reasoning_tokens": 0,
    "cached_tokens": 0,  # the fake's normal reply reports no cache hit
}

CASES: tuple[Case, ...] = (
    Case(
        "openai-reasoning-usage",
        "openai",
        (
            lambda r: completion(
                r,
                r.answer,
                "stop",
                layout="reasoning",
                reasoning=REASONING_TOKENS,
                cached=r.prompt_tokens // 2,
            ),
        ),
        {
            **VALID,
            "response": Derived(lambda r: r.answer),
            "finish_reason": "stop",
            "prompt_tokens": Derived(lambda r: r.prompt_tokens),
            "completion_tokens": Derived(lambda r: words(r.answer) + REASONING_TOKENS),
            "reasoning_tokens": REASONING_TOKENS,
            "cached_tokens": Derived(lambda r: r.prompt_tokens // 2),
            "accuracy": 100.0,
        },
        example="openai-reasoning-usage.json",
        model={"model": "o3-mini"},
    ),
    Case(
        "openai-finish-length",
        "openai",
        (lambda r: completion(r, half(r.answer), "length"),),
        {
            "validity": "truncated",
            "response": Derived(lambda r: half(r.answer)),
            "finish_reason": "length",
            "completion_tokens": Derived(lambda r: words(half(r.answer))),
            "reasoning_tokens": 0,
            "truncated": True,
            "error_kind": None,
        },
        example="openai-finish-length.json",
        model={"model": "gpt-4o"},
    ),
    Case(
        "openai-refusal",
        "openai",
        (lambda r: completion(r, None, "stop", message={"refusal": REFUSAL}),),
        {
            "validity": "refused",
            "response": REFUSAL,
            "finish_reason": "refusal",
            "error_kind": None,
        },
        example="openai-refusal.json",
        model={"model": "gpt-4o"},
    ),
    Case(
        "deepseek-reasoning-content",
        "openai",
        (_vllm_reasoning,),
        {
            **VALID,
            "response": Derived(lambda r: "\n\n" + r.answer),
            "finish_reason": "stop",
            "reasoning_tokens": words(THOUGHTS),
            "completion_tokens": Derived(lambda r: words(r.answer) + words(THOUGHTS)),
            "cached_tokens": Derived(lambda r: r.prompt_tokens // 2),
            "accuracy": 100.0,
        },
        example="deepseek-reasoning-content.json",
        model={"model": "Qwen/Qwen3-8B"},
    ),
    Case(
        "openrouter-200-finish-error",
        "openai",
        (lambda r: completion(r, half(r.answer), "error", layout="router"),),
        {"error_kind": "provider_error", "validity": None},
        example="openrouter-200-finish-error.json",
        model={"model": "google/gemini-3.1-flash-lite"},
        retryable=True,
    ),
    Case(
        "openai-429-request-too-large",
        "openai",
        (_too_large,),
        {"error_kind": "request_too_large", "validity": None},
        example="openai-429-request-too-large.json",
        model={"model": "gpt-4o"},
        retryable=False,
    ),
    Case(
        "openai-400-max-tokens-on-reasoning-model",
        "openai",
        (_refused_parameter(max_tokens=100),),
        {"error_kind": "bad_request", "validity": None},
        example="openai-400-max-tokens-on-reasoning-model.json",
        # what an older needlescope sent: max_tokens to o3 (the fake refuses it by its rule)
        model={"model": "o3-mini", "openai_reasoning_params": False},
        retryable=False,
    ),
    Case(
        "openai-400-temperature-on-reasoning-model",
        "openai",
        (_refused_parameter(temperature=0.0),),
        {"error_kind": "bad_request", "validity": None},
        example="openai-400-temperature-on-reasoning-model.json",
        model={
            "model": "o3-mini",
            "openai_reasoning_params": False,
            "generation": {"temperature": 0.0, "max_tokens": "omit"},
        },
        retryable=False,
    ),
    Case(
        "openai-content-filter",
        "openai",
        (lambda r: completion(r, None, "content_filter"),),
        {"validity": "content_filtered", "finish_reason": "content_filter", "response": ""},
        source=OPENAI,
        model={"model": "gpt-4o"},
    ),
    Case(
        "openai-tool-calls",
        "openai",
        (
            lambda r: completion(
                r,
                None,
                "tool_calls",
                message={
                    "tool_calls": [
                        {
                            "id": "call_fake1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "numbers"}'},
                        }
                    ]
                },
            ),
        ),
        {"validity": "empty", "finish_reason": "tool_calls", "response": ""},
        source=OPENAI,
        model={"model": "gpt-4o"},
    ),
    Case(
        "openai-function-call",
        "openai",
        (
            lambda r: completion(
                r,
                None,
                "function_call",
                message={"function_call": {"name": "lookup", "arguments": "{}"}},
            ),
        ),
        {"validity": "empty", "finish_reason": "tool_calls", "response": ""},
        source=OPENAI + " (function_call, deprecated)",
        model={"model": "gpt-4o"},
    ),
    Case(
        "deepseek-insufficient-system-resource",
        "openai",
        (lambda r: completion(r, half(r.answer), "insufficient_system_resource", layout="vllm"),),
        {
            "validity": "unknown",  # a reason no type lists: kept verbatim, never guessed
            "finish_reason": "insufficient_system_resource",
            "response": Derived(lambda r: half(r.answer)),
        },
        source="DeepSeek API reference (finish_reason insufficient_system_resource)",
        model={"model": "deepseek-chat"},
    ),
    Case(
        "openai-reasoning-exhausted",
        "openai",
        (
            lambda r: completion(
                r,
                "",
                "length",
                layout="reasoning",
                reasoning=int(r.body.get("max_completion_tokens") or 0),
            ),
        ),
        {
            "validity": "thinking_exhausted",
            "finish_reason": "length",
            "response": "",
            "reasoning_tokens": Derived(lambda r: r.body["max_completion_tokens"]),
            "completion_tokens": Derived(lambda r: r.body["max_completion_tokens"]),
        },
        source=OPENAI + " (an o-series reply whose limit went to reasoning)",
        model={"model": "o4-mini"},
    ),
    Case(
        "think-tags-in-content",
        "openai",
        (lambda r: completion(r, f"<think>\n{THOUGHTS}\n</think>\n\n{r.answer}", "stop"),),
        {**VALID, "response": Derived(lambda r: f"\n\n{r.answer}"), "accuracy": 100.0},
        source="llama.cpp / vLLM without a reasoning parser (Qwen3, DeepSeek-R1 distills)",
        model={"model": "qwen3-4b"},
    ),
    Case(
        "openrouter-200-error-object",
        "openai",
        (
            lambda r: WireReply(
                200,
                {
                    "error": {
                        "code": 502,
                        "message": "Provider returned error",
                        "metadata": {"provider_name": "Fake"},
                    }
                },
            ),
        ),
        {"error_kind": "server_error", "validity": None},
        source="OpenRouter: an error envelope in an HTTP 200",
        model={"model": "openai/gpt-4o"},
        retryable=True,
    ),
    Case(
        "openai-429-retry-after",
        "openai",
        (lambda r: _rate_limited("2"),),
        {**VALID, **TOKENS, "response": Derived(lambda r: r.answer), "accuracy": 100.0},
        source="OpenAI rate limits (Retry-After, waited once)",
        model={"model": "gpt-4o"},
        requests=2,
        waited=(2.0,),
    ),
)
# Answered by the fake's own rules (reasoning-model parameters), not by a responder.
BY_RULE = frozenset(
    {"openai-400-max-tokens-on-reasoning-model", "openai-400-temperature-on-reasoning-model"}
)
