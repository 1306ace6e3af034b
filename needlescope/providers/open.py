"""A configured model's provider client, opened on an exit stack that closes it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from needlescope.config import ModelConfig, SweepConfig, resolve_api_key
from needlescope.errors import ConfigError
from needlescope.providers.base import Provider
from needlescope.providers.reachability import check_reachable
from needlescope.providers.registry import create_provider


async def open_provider(
    stack: contextlib.AsyncExitStack,
    model: ModelConfig,
    *,
    ctx_per_slot: int,
    api_key: str | None = None,
    offline: bool = False,
) -> Provider:
    """The model's provider client, made by the registry and closed by ``stack``. A local
    model's client starts its llama.cpp server (slots of ``ctx_per_slot`` tokens; stopped when
    the client closes); a remote one is checked reachable first. ``api_key`` (e.g. from a
    Prefect Secret block) wins over the model's ``api_key_env``. ``offline``: nothing will be
    sent (prompts are only built), so the endpoint is not checked and a key need not be set."""
    if model.provider != "local":
        if not offline:
            await check_reachable(model)
        elif api_key is None and model.api_key_env and not os.environ.get(model.api_key_env):
            api_key = ""
    settings = _settings(model, ctx_per_slot=ctx_per_slot, api_key=api_key)
    # Starting a local server takes seconds: off the event loop.
    provider = await asyncio.to_thread(create_provider, model.provider, **settings)
    stack.push_async_callback(provider.aclose)
    return provider


def _settings(model: ModelConfig, *, ctx_per_slot: int, api_key: str | None) -> dict[str, Any]:
    """What the registry's factory of the model's kind takes."""
    settings: dict[str, Any] = {
        "name": model.name,
        "timeout_s": model.timeout_s,
        "reasoning": model.thinks,
        "reasoning_budget": model.reasoning_budget,
    }
    if model.provider == "local":
        return settings | {
            "model_path": model.model,
            "ctx_per_slot": ctx_per_slot,
            "parallel": model.concurrency,
            "n_threads": model.threads,
        }
    if model.provider == "openai":
        settings["reasoning_params"] = model.sends_reasoning_params
    if model.tier is not None:
        settings["service_tier"] = model.tier
    return settings | {
        "base_url": model.endpoint(),
        "model": str(model.model),
        "api_key": api_key if api_key is not None else resolve_api_key(model),
        "headers": dict(model.headers),
        "max_retry_after_s": model.max_retry_after_s,
        "max_connections": model.concurrency,
    }


# Providers whose token counts come from their API (a request each): Anthropic's count_tokens,
# Gemini's countTokens. The others count locally (llama.cpp) or estimate (OpenAI-compatible).
REMOTE_TOKENIZERS = {"anthropic": "count_tokens", "gemini": "countTokens"}


def check_offline_lengths(config: SweepConfig) -> None:
    """Building prompts without sending anything (``--only-context``) cannot count tokens by a
    provider's API: say so in one line, before anything starts."""
    token_sized = any(getattr(p, "length_unit", None) == "tokens" for p in config.probes)
    for model in config.tested_models():
        endpoint = REMOTE_TOKENIZERS.get(model.provider)
        if endpoint and token_sized:
            raise ConfigError(
                f"--only-context sends nothing, but model {model.name}'s token lengths are"
                f" counted by its API ({endpoint}): size its cells in chars or bytes, or run"
                " without --only-context"
            )
