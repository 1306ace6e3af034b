"""What every model provider offers: one async ``complete`` and, where it can, token counting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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

RETRYABLE_KINDS = frozenset(
    {RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE, EMPTY_RESPONSE}
)


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    max_tokens: int | None = None
    temperature: float | None = None
    # Provider-specific settings passed through verbatim (top_p, seed, reasoning_effort…).
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    latency_s: float
    model_version: str | None = None  # the provider's fingerprint / version string


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
