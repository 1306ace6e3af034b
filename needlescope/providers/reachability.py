"""Whether a remote model's endpoint answers at all: checked before a sweep sends anything."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from needlescope.config import ModelConfig, SweepConfig, without_credentials
from needlescope.errors import ProviderError
from needlescope.providers.base import CONNECTION


async def check_reachable(model: ModelConfig, timeout_s: float = 10.0) -> None:
    """Fail the sweep at once, in one line, when an endpoint cannot be reached at all."""
    shown = without_credentials(model.endpoint())  # never printed with its user:password
    try:
        url = urlsplit(model.endpoint())
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as exc:  # a bad port; config checks catch it first
        raise ProviderError(CONNECTION, f"model {model.name}: bad URL {shown}: {exc}") from None
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(url.hostname, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        reason = (
            "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        )
        message = f"model {model.name}: cannot reach {shown}: {reason}"
        raise ProviderError(CONNECTION, message) from None
    writer.close()


async def check_models(config: SweepConfig) -> None:
    """Every remote model of the config, at once; the first unreachable one is the error."""
    remote = [m for m in config.models if m.provider != "local"]
    await asyncio.gather(*(check_reachable(m) for m in remote))
