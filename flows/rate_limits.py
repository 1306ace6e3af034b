"""Per-provider and per-model request rates through Prefect global concurrency limits.

A limit named ``needlescope-rate:<provider>`` or ``needlescope-rate:<model>`` with a slot decay
caps requests per second (``prefect gcl create needlescope-rate:openai --limit 5
--slot-decay-per-second 5``): created, changed or removed without touching code.
"""

from __future__ import annotations

from prefect import get_client

from needlescope.config import SweepConfig

PREFIX = "needlescope-rate:"


def limit_names(config: SweepConfig, model: str) -> list[str]:
    return [f"{PREFIX}{config.model(model).provider}", f"{PREFIX}{model}"]


async def active_rate_limits(config: SweepConfig, models: set[str]) -> dict[str, list[str]]:
    """For each model, the rate limits that exist, are active and decay (asked once a sweep)."""
    async with get_client() as client:
        limits = []
        offset = 0
        while True:
            page = await client.read_global_concurrency_limits(limit=200, offset=offset)
            limits.extend(page)
            if len(page) < 200:
                break
            offset += 200
    usable = {
        limit.name
        for limit in limits
        if limit.name.startswith(PREFIX) and limit.active and (limit.slot_decay_per_second or 0) > 0
    }
    found = {model: [n for n in limit_names(config, model) if n in usable] for model in models}
    return {model: names for model, names in found.items() if names}
