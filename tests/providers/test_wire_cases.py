"""Every wire case, sent through needlescope's own client to the fake that serves it: what is
stored (text, tokens, reasoning and cached tokens, finish reason, validity, error kind),
whether the failure is retried, how many requests went out and how long the client waited.

The cases (tests.support.wire_*) reproduce the recorded replies of
``../shared/data/wire-examples/`` and the SDKs' finish/stop reasons; ``test_wire_examples``
checks the fakes against the recorded replies themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from needlescope.config._sweep import ModelConfig, parse_config
from needlescope.errors import ProviderError
from needlescope.grading.validity import VALUES, validity_of
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.base import Context
from needlescope.probes.build import build_context
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.providers.base import Reply
from needlescope.providers.open import open_provider
from needlescope.warehouse.store.rows import error_row, graded_row
from tests.support import (
    anthropic_server,
    gemini_server,
    openai_server,
    wire_anthropic,
    wire_cases,
    wire_gemini,
    wire_openai,
)
from tests.support.wire_cases import Case, CaseBook

CASES = (*wire_openai.CASES, *wire_anthropic.CASES, *wire_gemini.CASES)
SERVERS: dict[str, Any] = {
    "openai": openai_server.FakeOpenAIServer,
    "anthropic": anthropic_server.FakeAnthropicServer,
    "gemini": gemini_server.FakeGeminiServer,
}
COUNTERS: dict[str, Any] = {
    "openai": openai_server.prompt_tokens,
    "anthropic": anthropic_server.count_input_tokens,
    "gemini": gemini_server.prompt_tokens,
}


def recall_context() -> Context:
    """A real recall prompt (pattern haystack, two needles) to send every case with."""
    config = parse_config(
        {
            "name": "wire",
            "models": [{"name": "m", "provider": "local"}],
            "probes": [
                {"probe": "recall", "lengths": [600], "length_unit": "chars", "needle_counts": [2]}
            ],
        }
    )
    cell = expand_grid(config)[0]
    spec = config.filler_spec("pattern")

    async def chars(text: str) -> int:
        return len(text)

    return asyncio.run(build_context(recall, cell, filler_from_spec(spec), spec.kind, chars))


CONTEXT = recall_context()


@contextlib.asynccontextmanager
async def served(case: Case) -> AsyncIterator[tuple[Any, CaseBook]]:
    book = CaseBook(case.api, [case], COUNTERS[case.api])
    async with SERVERS[case.api](book) as server:
        yield server, book


def model_config(case: Case, server: Any) -> ModelConfig:
    settings = {"name": "m", "provider": case.api, "base_url": server.base_url, **case.model}
    return ModelConfig.model_validate(settings)


async def send(case: Case, server: Any) -> tuple[Reply | ProviderError, list[float]]:
    """The case's request as a sweep sends it, through open_provider; the waits it made."""
    model = model_config(case, server)
    waits: list[float] = []

    async def pause(seconds: float) -> None:
        waits.append(seconds)

    async with contextlib.AsyncExitStack() as stack:
        provider: Any = await open_provider(stack, model, ctx_per_slot=0)
        provider._pause = pause  # record the wait instead of sleeping it
        request = model.generation.request(CONTEXT.messages, CONTEXT.max_tokens)
        try:
            return await provider.complete(request), waits
        except ProviderError as exc:
            return exc, waits


def stored(outcome: Reply | ProviderError) -> dict[str, Any]:
    """The answers row needlescope writes for the outcome (as tasks.grade does)."""
    if isinstance(outcome, ProviderError):
        return error_row(CONTEXT.cell, outcome, "run", "epoch", 1)
    grade = probe_module("recall").grade(CONTEXT.expected, CONTEXT.rendered.facts, outcome.text)
    return graded_row(CONTEXT, outcome, grade, "run", "epoch", 1)


def requests_of(server: Any) -> int:
    return server.message_requests if hasattr(server, "message_requests") else server.requests


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_each_case_is_stored_as_the_service_means_it(case: Case) -> None:
    async with served(case) as (server, book):
        outcome, waits = await send(case, server)
        sent = requests_of(server)
        request = book.request(server.last_body)
    row = stored(outcome)
    expected = case.expected(request)
    assert {k: row.get(k) for k in expected} == expected, (outcome, row)
    assert row.get("validity") in (None, *VALUES)
    assert sent == case.requests
    assert waits == list(case.waited)
    if case.fails:
        assert isinstance(outcome, ProviderError)
        assert outcome.retryable is case.retryable
        assert "\n" not in str(outcome)
        # the failure is the case's reply itself (or the fake's own rule), not a fake's crash
        assert outcome.status == (book.statuses[-1] if book.statuses else 400)
    else:
        assert isinstance(outcome, Reply)
    assert all(status != 500 for status in book.statuses)


# The reasons the SDKs' types define (openai-python ChatCompletion Choice.finish_reason,
# anthropic-sdk-python StopReason, google-genai FinishReason and BlockedReason).
SDK_REASONS = {
    "openai": {"stop", "length", "tool_calls", "content_filter", "function_call"},
    "anthropic": {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    },
    "gemini": {
        "FINISH_REASON_UNSPECIFIED",
        "STOP",
        "MAX_TOKENS",
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "OTHER",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "IMAGE_PROHIBITED_CONTENT",
        "NO_IMAGE",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
        *(
            f"block:{r}"
            for r in (
                "BLOCKED_REASON_UNSPECIFIED",
                "SAFETY",
                "OTHER",
                "BLOCKLIST",
                "PROHIBITED_CONTENT",
                "IMAGE_SAFETY",
                "MODEL_ARMOR",
                "JAILBREAK",
            )
        ),
    },
}


def sent_reason(api: str, body: Any) -> str | None:
    """The reason a 200 reply of ``api`` carries, as the wire spells it."""
    if api == "anthropic":
        return body.get("stop_reason")
    if api == "gemini":
        if not body.get("candidates"):
            return f"block:{(body.get('promptFeedback') or {}).get('blockReason')}"
        return body["candidates"][0].get("finishReason")
    choices = body.get("choices") or [{}]
    return choices[0].get("finish_reason")


def test_every_reason_of_the_sdks_types_is_served_by_a_case() -> None:
    request = wire_cases.Request({"model": "o3-mini", "max_completion_tokens": 9}, "{}", 10)
    sent: dict[str, set[str | None]] = {api: set() for api in SDK_REASONS}
    for case in CASES:
        for build in case.replies:
            reply = build(request)
            if reply.status == 200:
                sent[case.api].add(sent_reason(case.api, reply.body))
    for api, reasons in SDK_REASONS.items():
        assert reasons <= sent[api], (api, reasons - sent[api])


async def test_a_reasoning_model_gets_room_to_think_before_its_answer() -> None:
    """o3 sent the answer budget alone spends it thinking (an empty reply, cut off); sent
    reasoning_budget beside it, its answer comes back whole."""
    answer = wire_cases.answer_of(CONTEXT.prompt_text)
    async with openai_server.FakeOpenAIServer(
        lambda body: answer, reasoning_tokens=CONTEXT.max_tokens
    ) as server:
        case = wire_openai.CASES[0]  # o3-mini, default settings
        outcome, _ = await send(case, server)
        body = server.last_body
        starved = model_config(case, server).model_copy(update={"reasoning_budget": 1})
        async with contextlib.AsyncExitStack() as stack:
            provider = await open_provider(stack, starved, ctx_per_slot=0)
            request = starved.generation.request(CONTEXT.messages, CONTEXT.max_tokens)
            cut = await provider.complete(request)
    assert body["max_completion_tokens"] == CONTEXT.max_tokens + 16_384
    assert "max_tokens" not in body and "temperature" not in body
    assert isinstance(outcome, Reply) and outcome.text == answer
    assert validity_of(outcome) == "valid" and outcome.reasoning_tokens == CONTEXT.max_tokens
    assert validity_of(cut) == "truncated" and cut.finish_reason == "length"
