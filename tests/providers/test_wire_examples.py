"""The recorded replies of ``../shared/data/wire-examples/``: the fakes reproduce each one, and
needlescope reads each one, replayed verbatim, as the service means it.

Skipped only when the shared folder is absent (the product never reads it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from needlescope.errors import ProviderError
from needlescope.grading.validity import validity_of
from needlescope.providers.base import Reply
from tests.providers.test_wire_cases import CASES, CONTEXT, SERVERS, requests_of, send, stored
from tests.support.fake_server import WireReply
from tests.support.wire_cases import Case, CaseBook, Request, header_names, shape

EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "wire-examples"
needs_examples = pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} is absent")
BY_EXAMPLE = {c.example: c for c in CASES if c.example}
ANSWER = '{"1": 4821, "2": 7730}'

# What needlescope stores for each recorded reply, replayed as it was recorded.
READ: dict[str, dict[str, Any]] = {
    "openai-reasoning-usage.json": {
        "response": ANSWER,
        "finish_reason": "stop",
        "validity": "valid",
        "prompt_tokens": 2006,
        "completion_tokens": 1214,
        "reasoning_tokens": 1088,
        "cached_tokens": 1920,
    },
    "openai-finish-length.json": {
        "response": '{"',
        "finish_reason": "length",
        "validity": "truncated",
        "completion_tokens": 1,
        "reasoning_tokens": 0,
    },
    "openai-refusal.json": {
        "response": "I'm very sorry, but I can't assist with that.",
        "finish_reason": "refusal",
        "validity": "refused",
    },
    "deepseek-reasoning-content.json": {
        "response": "\n\n" + ANSWER,
        "finish_reason": "stop",
        "validity": "valid",
        "prompt_tokens": 2006,
        "completion_tokens": 254,
        "reasoning_tokens": 231,
        "cached_tokens": 1984,
    },
    "openrouter-200-finish-error.json": {"error_kind": "provider_error", "validity": None},
    "openai-429-request-too-large.json": {"error_kind": "request_too_large"},
    "openai-400-max-tokens-on-reasoning-model.json": {"error_kind": "bad_request"},
    "openai-400-temperature-on-reasoning-model.json": {"error_kind": "bad_request"},
    "anthropic-thinking-max-tokens.json": {
        "response": '{"1": 4821, "2": 77',
        "finish_reason": "length",
        "validity": "truncated",
        "prompt_tokens": 95 + 1500 + 12000,
        "completion_tokens": 1116,
        "reasoning_tokens": 1024,
        "cached_tokens": 12000,
    },
    "anthropic-429-retry-after.json": {"validity": "valid", "error_kind": None},
    "anthropic-529-overloaded.json": {"error_kind": "server_error"},
    "gemini-thoughts-usage.json": {
        "response": ANSWER,
        "finish_reason": "stop",
        "validity": "valid",
        "prompt_tokens": 1180,
        "completion_tokens": 14 + 889,
        "reasoning_tokens": 889,
    },
    "gemini-max-tokens-no-parts.json": {
        "response": "",
        "finish_reason": "length",
        "validity": "thinking_exhausted",
        "prompt_tokens": 1706,
        "completion_tokens": 2999,
        "reasoning_tokens": 2999,
    },
    "gemini-safety.json": {
        "response": "",
        "finish_reason": "content_filter",
        "validity": "content_filtered",
        "prompt_tokens": 1180,
    },
    "gemini-429-retry-info.json": {"validity": "valid", "error_kind": None},
}
# (requests sent, seconds waited, retried by the orchestrator) for each replayed failure or wait
SENT: dict[str, tuple[int, tuple[float, ...], bool | None]] = {
    "openrouter-200-finish-error.json": (1, (), True),
    "openai-429-request-too-large.json": (1, (), False),
    "openai-400-max-tokens-on-reasoning-model.json": (1, (), False),
    "openai-400-temperature-on-reasoning-model.json": (1, (), False),
    "anthropic-429-retry-after.json": (2, (19.0,), None),
    "anthropic-529-overloaded.json": (1, (), True),
    "gemini-429-retry-info.json": (2, (26.0,), None),
}


def recorded(name: str) -> dict[str, Any]:
    return dict(json.loads((EXAMPLES / name).read_text(encoding="utf-8")))


def example_names() -> list[str]:
    return sorted(p.name for p in EXAMPLES.glob("*.json")) if EXAMPLES.is_dir() else []


@needs_examples
def test_every_example_has_a_case_and_an_expectation() -> None:
    assert example_names(), "no examples found"
    assert set(example_names()) == set(BY_EXAMPLE) == set(READ)


@needs_examples
@pytest.mark.parametrize("name", example_names())
def test_the_fake_reproduces_the_recorded_reply(name: str) -> None:
    """Same status, the recorded headers, and the same fields of the same JSON types."""
    example, case = recorded(name), BY_EXAMPLE[name]
    body = {
        "model": case.model.get("model", "m"),
        "max_completion_tokens": 64,
        "max_tokens": 64,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "generationConfig": {"maxOutputTokens": 64},
        "messages": [{"role": "user", "content": "x"}],
    }
    reply = case.replies[0](Request(body, ANSWER, 42))
    assert reply.status == example["status"]
    assert header_names(example["headers"]) <= header_names(reply.headers)
    assert shape(reply.body) == shape(example["body"])


@needs_examples
@pytest.mark.parametrize("name", example_names())
async def test_the_recorded_reply_is_read_as_the_service_means_it(name: str) -> None:
    example, case = recorded(name), BY_EXAMPLE[name]
    replay = WireReply(example["status"], example["body"], example["headers"])
    as_recorded = Case(case.name, case.api, (lambda r: replay,), {}, model=case.model)
    book = CaseBook(case.api, [as_recorded], lambda body: 0)
    async with SERVERS[case.api](book) as server:
        outcome, waits = await send(as_recorded, server)
        sent = requests_of(server)
    requests, waited, retryable = SENT.get(name, (1, (), None))
    assert (sent, tuple(waits)) == (requests, waited)
    row = stored(outcome)
    expected = READ[name]
    assert {k: row.get(k) for k in expected} == expected, row
    if isinstance(outcome, ProviderError):
        assert outcome.retryable is retryable
    else:
        assert isinstance(outcome, Reply) and row["validity"] == validity_of(outcome)


def test_context_is_a_recall_prompt() -> None:
    assert CONTEXT.cell.probe == "recall" and CONTEXT.max_tokens > 0
