"""API keys kept in Prefect Secret blocks, the home for credentials of scheduled deployments."""

from __future__ import annotations

from prefect.blocks.system import Secret

from needlescope.config import SweepConfig
from needlescope.errors import ConfigError


async def secret_api_keys(config: SweepConfig, models: set[str]) -> dict[str, str]:
    """The keys of ``models`` that name a Secret block (``api_key_secret``), by model name."""
    keys: dict[str, str] = {}
    for model in config.models:
        block = model.api_key_secret
        if block is None or model.name not in models:
            continue
        try:
            secret: Secret[str] = await Secret.aload(block)
        except ValueError:
            raise ConfigError(
                f"models.{model.name}: Prefect Secret block {block!r} not found "
                f"(create it in the UI under Blocks, or Secret(value=...).save({block!r}))"
            ) from None
        value = secret.get()
        if not isinstance(value, str) or not value:
            raise ConfigError(f"models.{model.name}: Prefect Secret block {block!r} is empty")
        keys[model.name] = value
    return keys
