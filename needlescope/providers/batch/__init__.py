"""The providers' batch APIs (OpenAI's Batch API, Anthropic's Message Batches, Gemini's batch
mode) behind one ``BatchClient``: half the price, answered within 24 hours."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from needlescope._exports import lazy_exports
from needlescope.errors import ConfigError

if TYPE_CHECKING:
    from needlescope.providers.batch.base import (
        BATCH_CANCELED,
        BATCH_EXPIRED,
        BATCH_FAILED,
        BatchClient,
        BatchLimits,
        BatchRequest,
        BatchResult,
        BatchState,
        content_sha256,
        counts_text,
        created_batch,
    )

__all__ = [
    "BATCH_CANCELED",
    "BATCH_EXPIRED",
    "BATCH_FAILED",
    "BATCH_KINDS",
    "BatchClient",
    "BatchLimits",
    "BatchRequest",
    "BatchResult",
    "BatchState",
    "batch_client",
    "content_sha256",
    "counts_text",
    "created_batch",
]

# Provider kind -> (module, class) of its batch client.
_CLIENTS = {
    "openai": ("needlescope.providers.batch.openai", "OpenAIBatches"),
    "anthropic": ("needlescope.providers.batch.anthropic", "AnthropicBatches"),
    "gemini": ("needlescope.providers.batch.gemini", "GeminiBatches"),
}
BATCH_KINDS = tuple(_CLIENTS)


def batch_client(provider: Any) -> BatchClient:
    """The batch client over ``provider`` (an ``HttpProvider`` of a kind in BATCH_KINDS)."""
    kind = getattr(provider, "kind", None)
    if kind not in _CLIENTS:
        raise ConfigError(
            f"provider {kind!r} has no batch API; batch: true works with {', '.join(BATCH_KINDS)}"
        )
    module, name = _CLIENTS[kind]
    client: BatchClient = getattr(importlib.import_module(module), name)(provider)
    return client


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BATCH_CANCELED": ".base",
        "BATCH_EXPIRED": ".base",
        "BATCH_FAILED": ".base",
        "BatchClient": ".base",
        "BatchLimits": ".base",
        "BatchRequest": ".base",
        "BatchResult": ".base",
        "BatchState": ".base",
        "content_sha256": ".base",
        "counts_text": ".base",
        "created_batch": ".base",
    },
)
