"""A model's ``delay_s`` spaces the starts of its requests (the recall seed's ``delay``)."""

from __future__ import annotations

import asyncio
import itertools

from needlescope.tasks.sending import Pacer


async def test_requests_start_at_least_the_delay_apart() -> None:
    pacer = Pacer(0.05)
    loop = asyncio.get_running_loop()
    starts: list[float] = []

    async def request() -> None:
        await pacer.wait()
        starts.append(loop.time())

    await asyncio.gather(*(request() for _ in range(5)))
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(starts) == 5 and min(gaps) >= 0.05 - 1e-3


async def test_no_delay_waits_for_nothing() -> None:
    pacer = Pacer(0.0)
    await asyncio.wait_for(asyncio.gather(*(pacer.wait() for _ in range(100))), timeout=5)
