"""Per-provider and per-model limits through Prefect, set without touching code.

- Concurrency: a tag limit on ``needlescope-provider:<kind>`` or ``needlescope-model:<name>``
  caps requests in flight (each request takes a slot of the tag's limit: tasks/query.py).
- Rate: a global concurrency limit named ``needlescope-rate:<kind>`` or
  ``needlescope-rate:<name>`` with a slot decay caps requests per second.

A sweep looks the limits up once when it starts and takes slots only of the tags that have
a limit.

Design: docs/design/orchestration.md#limits
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prefect import get_client

from needlescope.config import SweepConfig
from needlescope.tasks.query import TAG_LIMIT_PREFIX

RATE_PREFIX = "needlescope-rate:"


@dataclass
class ModelLimits:
    tags: list[str] = field(default_factory=list)
    rate_limits: list[str] = field(default_factory=list)


def model_tags(config: SweepConfig, model: str) -> list[str]:
    return [f"needlescope-provider:{config.model(model).provider}", f"needlescope-model:{model}"]


def rate_limit_names(config: SweepConfig, model: str) -> list[str]:
    return [f"{RATE_PREFIX}{config.model(model).provider}", f"{RATE_PREFIX}{model}"]


async def active_limits(config: SweepConfig, models: set[str]) -> dict[str, ModelLimits]:
    """For each model, the tag limits and rate limits that exist and are active."""
    async with get_client() as client:
        limits = []
        offset = 0
        while True:
            page = await client.read_global_concurrency_limits(limit=200, offset=offset)
            limits.extend(page)
            if len(page) < 200:
                break
            offset += 200
    active = [limit for limit in limits if limit.active]
    tag_limits = {
        limit.name.removeprefix(TAG_LIMIT_PREFIX)
        for limit in active
        if limit.name.startswith(TAG_LIMIT_PREFIX)
    }
    # A rate limit needs slots that decay; without a decay it would never free a slot.
    rates = {limit.name for limit in active if (limit.slot_decay_per_second or 0) > 0}
    return {
        model: ModelLimits(
            tags=[t for t in model_tags(config, model) if t in tag_limits],
            rate_limits=[n for n in rate_limit_names(config, model) if n in rates],
        )
        for model in models
    }
