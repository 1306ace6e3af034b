"""Whether a remote model's endpoint answers at all: checked before a sweep sends anything."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from needlescope.config import ModelConfig, SweepConfig
from needlescope.errors import ProviderError
from needlescope.providers.base import CONNECTION


async def check_reachable(model: ModelConfig, timeout_s: float = 10.0) -> None:
    """Fail the sweep at once, in one line, when an endpoint cannot be reached at all."""
    url = urlsplit(model.endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(url.hostname, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        reason = (
            "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        )
        raise ProviderError(
            CONNECTION, f"model {model.name}: cannot reach {model.endpoint()}: {reason}"
        ) from None
    writer.close()


async def check_models(config: SweepConfig) -> None:
    """Every remote model of the config, at once; the first unreachable one is the error."""
    remote = [m for m in config.models if m.provider != "local"]
    await asyncio.gather(*(check_reachable(m) for m in remote))
