"""Model calls as task runs, within the sweep's budget."""

from __future__ import annotations

import asyncio
from typing import Any

from prefect.states import State
from prefect.utilities.annotations import quote

from needlescope.cells import Cell
from needlescope.config import SweepConfig
from needlescope.providers.base import ChatRequest, Reply
from needlescope.tasks.query import query_model


class Unsent:
    """A request not sent because the sweep's budget was spent: no row, a later run sends it."""


UNSENT = Unsent()


class Spend:
    """Tokens and money spent by this run, against the config's budget."""

    def __init__(self, config: SweepConfig) -> None:
        self.config = config
        self.tokens = 0
        self.usd = 0.0

    def exhausted(self) -> bool:
        budget = self.config.budget
        if budget is None:
            return False
        return (budget.tokens is not None and self.tokens >= budget.tokens) or (
            budget.usd is not None and self.usd >= budget.usd
        )

    def cost(self, model: str, reply: Reply) -> float | None:
        """As the provider bills it: completion tokens include reasoning; cached prompt tokens
        at the cached rate where the price table gives one."""
        price = self.config.model(model).price
        if price is None:
            return None
        return price.cost(reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens)

    def add(self, model: str, reply: Reply) -> None:
        self.tokens += (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
        self.usd += self.cost(model, reply) or 0.0


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


class Asker:
    """Model calls as task runs: one per cell and purpose, with each model's retries and limit."""

    def __init__(
        self,
        config: SweepConfig,
        warehouse_id: str,
        epoch: str,
        tags: dict[str, list[str]] | None = None,
        resend: tuple[str, frozenset[str]] | None = None,
    ) -> None:
        self.config = config
        # (run id, cells): cells with an answer this run sends again, under a fresh cache key
        self.resend = resend
        self.tags = tags or {}  # only tags that carry a Prefect limit (see flows.limits)
        self.warehouse_id = warehouse_id
        self.epoch = epoch
        self.spend = Spend(config)
        self._tasks: dict[str, Any] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._pacers: dict[str, Pacer] = {}

    def _task(self, model: str) -> Any:
        if model not in self._tasks:
            model_config = self.config.model(model)
            self._tasks[model] = query_model.with_options(
                retries=self.config.retry.retries,
                retry_delay_seconds=list(self.config.retry.backoff_s) or 0,
                tags=self.tags.get(model, []),
            )
            self._limits[model] = asyncio.Semaphore(model_config.concurrency)
            self._pacers[model] = Pacer(model_config.delay_s)
        return self._tasks[model]

    async def ask(
        self, model: str, cell: Cell, request: ChatRequest, label: str, purpose: str = "answer"
    ) -> Reply | BaseException | Unsent:
        task = self._task(model)
        async with self._limits[model]:
            if self.spend.exhausted():
                return UNSENT
            await self._pacers[model].wait()
            resend = ""
            if self.resend is not None and cell.cell_id in self.resend[1]:
                resend = self.resend[0]
            state: State = await task(
                model,
                cell.cell_id,
                self.epoch,
                self.warehouse_id,
                label,
                quote(request),  # the prompt: nothing in it for Prefect to look into
                purpose,
                resend,
                return_state=True,
            )
        outcome = await state.result(raise_on_failure=False)  # type: ignore[misc]
        if isinstance(outcome, Reply):
            self.spend.add(model, outcome)
            return outcome
        return outcome if isinstance(outcome, BaseException) else RuntimeError(str(outcome))
