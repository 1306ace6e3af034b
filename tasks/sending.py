"""What a model's request waits for: one of the model's ``concurrency`` slots, its pacing
(``delay_s``) and the sweep's budget.

The slot is taken around the request alone: the kept reply's lookup and write happen while
other requests are in flight, and a retry's back-off leaves the slot to another cell.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from needlescope.config import ModelConfig, SweepConfig
from needlescope.errors import NeedlescopeError
from needlescope.providers.base import Reply


class BudgetSpent(NeedlescopeError):
    """A request not sent: the sweep's budget was spent while it waited for a slot."""


class Spend:
    """Tokens and money spent by this run, against the config's budget."""

    def __init__(self, config: SweepConfig) -> None:
        self.config = config
        self.tokens = 0
        self.usd = 0.0
        # The worst case of the batches submitted and not yet collected (their max tokens).
        self.reserved_tokens = 0
        self.reserved_usd = 0.0

    def exhausted(self) -> bool:
        return not self.fits(0, 0.0, strictly=True)

    def fits(self, tokens: int, usd: float, *, strictly: bool = False) -> bool:
        """Whether ``tokens`` and ``usd`` more stay within the budget, with what was spent and
        what open batches may still spend; ``strictly``: some budget must be left after."""
        budget = self.config.budget
        if budget is None:
            return True
        tokens += self.tokens + self.reserved_tokens
        usd += self.usd + self.reserved_usd
        if strictly:
            return (budget.tokens is None or tokens < budget.tokens) and (
                budget.usd is None or usd < budget.usd
            )
        return (budget.tokens is None or tokens <= budget.tokens) and (
            budget.usd is None or usd <= budget.usd + 1e-12
        )

    def reserve(self, tokens: int, usd: float) -> None:
        self.reserved_tokens += tokens
        self.reserved_usd += usd

    def release(self, tokens: int, usd: float) -> None:
        self.reserved_tokens = max(0, self.reserved_tokens - tokens)
        self.reserved_usd = max(0.0, self.reserved_usd - usd)

    def cost(self, model: str, reply: Reply, *, batched: bool = False) -> float | None:
        """As the provider bills it: completion tokens include reasoning; cache reads and
        writes at their rates; batch (and flex) requests at batch prices."""
        return reply_cost(self.config.model(model), reply, batched=batched)

    def add(self, model: str, reply: Reply, *, batched: bool = False) -> None:
        self.tokens += (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
        self.usd += self.cost(model, reply, batched=batched) or 0.0


def reply_cost(model: ModelConfig, reply: Reply, *, batched: bool = False) -> float | None:
    """What ``reply`` cost by the model's price table; None without one."""
    if model.price is None:
        return None
    return model.price.cost(
        reply.prompt_tokens,
        reply.completion_tokens,
        reply.cached_tokens,
        cache_write_tokens=reply.cache_write_tokens,
        cache_write_1h_tokens=reply.cache_write_1h_tokens,
        discounted=batched or model.discounted,
    )


class Pacer:
    """Starts at most one request every ``interval_s`` seconds (the recall seed's ``delay``)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._lock = asyncio.Lock()
        self._next_at = 0.0

    async def wait(self) -> None:
        if self.interval_s <= 0:
            return
        async with self._lock:
            loop = asyncio.get_running_loop()
            wait = self._next_at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self._next_at = loop.time() + self.interval_s


class Sending:
    """One model's requests: at most ``concurrency`` in flight, paced, within the budget."""

    def __init__(self, concurrency: int, delay_s: float, spend: Spend) -> None:
        self.slots = asyncio.Semaphore(concurrency)
        self.pacer = Pacer(delay_s)
        self.spend = spend
        self.in_flight = 0
        self.max_in_flight = 0

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """A slot for one request, after the pacing; :class:`BudgetSpent` once the budget is
        spent (checked again here: the run may have spent it while this request waited)."""
        async with self.slots:
            if self.spend.exhausted():
                raise BudgetSpent("the sweep's budget was spent before this request was sent")
            await self.pacer.wait()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
