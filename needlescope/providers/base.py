"""What every model provider offers: one async ``complete`` and, where it can, token counting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from needlescope.provenance import Fingerprint

# Error kinds stored in the warehouse's ``error_kind`` column. Stable strings: users query them.
RATE_LIMITED = "rate_limited"
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"
CONNECTION = "connection"
CONTEXT_TOO_LONG = "context_too_long"
BAD_REQUEST = "bad_request"
AUTH = "auth"
BAD_RESPONSE = "bad_response"
EMPTY_RESPONSE = "empty_response"
# A 2xx reply whose body is an error without a status code of its own (OpenRouter's
# `finish_reason: "error"`, an error envelope with no code).
PROVIDER_ERROR = "provider_error"
# The request alone is larger than a limit ("Request too large … must be reduced", HTTP 413):
# re-sending it as it is can never succeed.
REQUEST_TOO_LARGE = "request_too_large"

RETRYABLE_KINDS = frozenset(
    {RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE, EMPTY_RESPONSE, PROVIDER_ERROR}
)

# Finish reasons as needlescope stores them: every API's own reasons map onto these (an
# unknown one is stored verbatim). See each provider's table.
STOP = "stop"  # a natural end or a stop sequence
LENGTH = "length"  # the output limit cut the reply
CONTENT_FILTER = "content_filter"  # the service's filters blocked the reply or the prompt
TOOL_CALLS = "tool_calls"  # the model called (or tried to call) a tool instead of answering
REFUSAL = "refusal"  # the model declined to answer
CONTEXT_EXCEEDED = "context_exceeded"  # prompt and reply outgrew the model's context window
PAUSE_TURN = "pause_turn"  # the service paused a long turn before it ended
OTHER = "other"  # the service says only that it stopped for another reason


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class CachePrefix:
    """The prompt's prefix other cells share (needlescope.providers.caching): up to ``chars``
    characters of message ``message``. Anthropic caches it (``cache_control`` with ``ttl``);
    OpenAI routes requests with the same ``key`` (``prompt_cache_key``) to the same cache."""

    message: int
    chars: int
    key: str
    ttl: str = "5m"


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    max_tokens: int | None = None
    temperature: float | None = None
    # Provider-specific settings passed through verbatim (top_p, seed, reasoning_effort…).
    extra: dict[str, Any] = field(default_factory=dict)
    cache: CachePrefix | None = None  # ``cache: auto``: the prefix to cache


@dataclass(frozen=True)
class Reply:
    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    latency_s: float | None  # None: answered in a batch, where no latency is measured
    model_version: str | None = None  # the provider's fingerprint / version string
    cached_tokens: int | None = None  # prompt tokens read from the provider's cache
    # Prompt tokens written to the provider's cache (Anthropic), and of them those kept an hour.
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    # The reply carried reasoning (thinking blocks, thought parts, a reasoning_content field),
    # whether or not its tokens were counted.
    reasoned: bool = False
    # What served the reply: the model, backend and sampling sent
    # (needlescope.provenance.fingerprint); the flow adds the local model's file, chat template
    # and engine.
    fingerprint: Fingerprint | None = None

    @property
    def thought(self) -> bool:
        """Whether any of the reply's output went to reasoning."""
        return self.reasoned or bool(self.reasoning_tokens)


@runtime_checkable
class Provider(Protocol):
    name: str

    async def complete(self, request: ChatRequest) -> Reply: ...

    async def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` with the model's own tokenizer, or None when the provider has none."""
        ...

    async def count_prompt_tokens(self, messages: tuple[Message, ...]) -> int | None:
        """Tokens of the whole prompt as the model sees it (chat template included), or None."""
        ...

    async def aclose(self) -> None: ...
