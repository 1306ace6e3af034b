"""A configured model's provider client, opened on an exit stack that closes it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from needlescope.config import ModelConfig, resolve_api_key
from needlescope.providers.base import Provider
from needlescope.providers.reachability import check_reachable
from needlescope.providers.registry import create_provider


async def open_provider(
    stack: contextlib.AsyncExitStack,
    model: ModelConfig,
    *,
    ctx_per_slot: int,
    api_key: str | None = None,
) -> Provider:
    """A local model gets its llama.cpp server (slots of ``ctx_per_slot`` tokens) started;
    a remote one is checked reachable first. ``api_key`` (e.g. from a Prefect Secret block)
    wins over the model's ``api_key_env``."""
    if model.provider == "local":
        from needlescope.providers.local import LocalProvider, LocalServer

        server = LocalServer(
            model.model,
            ctx_per_slot=ctx_per_slot,
            parallel=model.concurrency,
            n_threads=model.threads,
        )
        await asyncio.to_thread(stack.enter_context, server)
        provider: Any = LocalProvider(name=model.name, server=server, timeout_s=model.timeout_s)
    else:
        await check_reachable(model)
        provider = create_provider(
            model.provider,
            name=model.name,
            base_url=model.endpoint(),
            model=str(model.model),
            api_key=api_key if api_key is not None else resolve_api_key(model),
            headers=dict(model.headers),
            timeout_s=model.timeout_s,
            max_retry_after_s=model.max_retry_after_s,
            max_connections=model.concurrency,
        )
    stack.push_async_callback(provider.aclose)
    return provider
