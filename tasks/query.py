"""The model query: each request within its model's concurrency, pacing and the sweep's
budget, tried again with back-off on a retryable error, its reply kept in the warehouse until
the answer is stored (a run killed in between does not pay for it again).

No task run per request: a batch's requests run inside one ``query ×N`` task run, so what
Prefect keeps of a sweep grows by the batch, not by the cell. Prefect tag limits
(``needlescope-provider:<kind>``, ``needlescope-model:<name>``) and rate limits still cap each
request: the request takes a slot of the tag's global concurrency limit itself.

Design: docs/design/orchestration.md#queries
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.asyncio import concurrency, rate_limit
from prefect.exceptions import MissingContextError
from prefect.runtime import task_run

from needlescope.config import SweepConfig
from needlescope.errors import ProviderError
from needlescope.grid import Cell
from needlescope.probes.base import Context
from needlescope.provenance import Fingerprint
from needlescope.providers.base import CachePrefix, ChatRequest, Reply
from needlescope.tasks.runtime import current
from needlescope.tasks.sending import BudgetSpent, Sending, Spend
from needlescope.warehouse.store.replies import PendingReplies

TAG_LIMIT_PREFIX = "tag:"  # how Prefect names the global limit behind a tag limit


async def send(
    model: str, cell_id: str, request: ChatRequest, purpose: str, tags: list[str]
) -> Reply:
    """One request to ``model``; ``purpose`` is "answer" for the model under test, else e.g.
    "judge:<name>". ``tags``: tags with a Prefect concurrency limit, a slot of each held
    around the request."""
    runtime = current()
    sending = runtime.sending[model]
    async with sending.turn():
        if names := runtime.rate_limits.get(model):
            await rate_limit(names)
        if purpose == "answer":
            runtime.attempts[cell_id] += 1
        if tags:
            async with concurrency([TAG_LIMIT_PREFIX + t for t in tags], occupy=1):
                reply = await runtime.providers[model].complete(request)
        else:
            reply = await runtime.providers[model].complete(request)
        # Counted before the slot is freed: the next request checks the budget with it.
        sending.spend.add(model, reply)
    if serving := runtime.serving.get(model):
        reply = replace(reply, fingerprint=replace(reply.fingerprint or Fingerprint(), **serving))
    return reply


def retry_delay(backoff_s: list[float], attempt: int) -> float:
    """The wait before try ``attempt + 2``, as Prefect reads ``retry_delay_seconds``: the
    list's entry for that retry, its last entry past its end."""
    return backoff_s[min(attempt, len(backoff_s) - 1)] if backoff_s else 0.0


def request_for(
    context: Context, config: SweepConfig, cache: CachePrefix | None = None
) -> ChatRequest:
    """The request a built context is sent with: its messages, the model's generation, and
    the prefix to cache (``cache: auto``)."""
    generation = config.model(context.cell.model).generation
    request = generation.request(context.messages, context.max_tokens)
    return request if cache is None else replace(request, cache=cache)


@dataclass
class Answer:
    """A cell's answer on its way to the warehouse: the context asked, the reply (or why there
    is none), the requests it took, its cost, the judge's verdict (tasks/judging.py), and the
    provider's batch that answered it (none for a synchronous request)."""

    context: Context
    outcome: Reply | BaseException
    attempts: int
    cost_usd: float | None = None
    verdict: dict[str, Any] | None = None
    batch_id: str | None = None


class Unsent:
    """A request not sent because the sweep's budget was spent: no row, a later run sends it."""


UNSENT = Unsent()


def live_task_runs(concurrency: int, tags: list[str] | None, budgeted: bool) -> int:
    """Requests a model has started at once (waiting for a slot, in flight, or backing off
    before a retry): twice its slots, so a freed slot finds the next request ready. Only its
    slots where a Prefect tag limit applies (the limit, shared with other models, is the cap
    then) or where the sweep has a budget (a request that waited would find it spent). The
    name is older than the batch's task run: these were task runs once."""
    return concurrency if tags or budgeted else 2 * concurrency


def _logger() -> Any:
    """The run's logger inside a flow or task run, else the module's (a test, a script)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _query_name() -> str:
    return f"query ×{len(task_run.parameters['contexts'])}"


@task(name="query", task_run_name=_query_name, cache_policy=NO_CACHE)  # as grade's
async def ask_batch(asker: Asker, contexts: list[Context]) -> list[Answer | Unsent]:
    """The model under test's answers to a batch of built contexts, in one task run."""
    return list(await asyncio.gather(*(asker.answer(c) for c in contexts)))


class Asker:
    """Model calls, each within its model's retries, limits and budget (module docstring)."""

    def __init__(
        self,
        config: SweepConfig,
        warehouse: Path,
        epoch: str,
        tags: dict[str, list[str]] | None = None,
        resend: tuple[str, frozenset[str]] | None = None,
    ) -> None:
        self.config = config
        # (run id, cells): cells with an answer this run sends again, not their kept reply
        self.resend = resend
        self.tags = tags or {}  # only tags that carry a Prefect limit (see flows.limits)
        self.replies = PendingReplies(warehouse)
        self.epoch = epoch
        self.spend = Spend(config)
        self._live: dict[str, asyncio.Semaphore] = {}
        # cell id -> the prefix its request marks for the provider's cache (``cache: auto``)
        self.cache_marks: dict[str, CachePrefix] = {}
        # cell id -> the replies kept for it: removed once its answer is stored (forget())
        self.kept: dict[str, list[Path]] = {}

    def _slots(self, model: str) -> asyncio.Semaphore:
        if model not in self._live:
            model_config = self.config.model(model)
            concurrency = model_config.concurrency
            current().sending[model] = Sending(concurrency, model_config.delay_s, self.spend)
            live = live_task_runs(concurrency, self.tags.get(model), self.config.budget is not None)
            self._live[model] = asyncio.Semaphore(live)
        return self._live[model]

    async def answer(self, context: Context) -> Answer | Unsent:
        """The model under test's answer to a built context."""
        cell = context.cell
        request = request_for(context, self.config, self.cache_marks.pop(cell.cell_id, None))
        outcome = await self.ask(cell.model, cell, request, cell.label)
        if isinstance(outcome, Unsent):
            return outcome
        cost = self.spend.cost(cell.model, outcome) if isinstance(outcome, Reply) else None
        return Answer(context, outcome, current().attempts[cell.cell_id], cost)

    async def ask(
        self, model: str, cell: Cell, request: ChatRequest, label: str, purpose: str = "answer"
    ) -> Reply | BaseException | Unsent:
        """``model``'s reply (or the error it ended with): a reply kept from an earlier run
        of the epoch, else requests, as many as the sweep's retries allow."""
        slots = self._slots(model)
        resend = ""
        if self.resend is not None and cell.cell_id in self.resend[1]:
            resend = self.resend[0]
        path = self.replies.path(self.epoch, cell.cell_id, purpose, resend)
        self.kept.setdefault(cell.cell_id, []).append(path)
        async with slots:
            if self.spend.exhausted():
                return UNSENT
            kept = await asyncio.to_thread(self.replies.get, path)
            if kept is not None:  # an earlier run's reply: nothing is sent
                self.spend.add(model, kept)
                return kept
            retry = self.config.retry
            for attempt in range(retry.retries + 1):
                try:
                    reply = await send(
                        model, cell.cell_id, request, purpose, self.tags.get(model, [])
                    )
                except BudgetSpent:
                    return UNSENT
                except ProviderError as error:
                    if not error.retryable or attempt == retry.retries:
                        return error
                    delay = retry_delay(list(retry.backoff_s), attempt)
                    _logger().warning(
                        "%s: %s; try %d of %d in %g s",
                        label,
                        error,
                        attempt + 2,
                        retry.retries + 1,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                except Exception as error:
                    return error
                await asyncio.to_thread(self.replies.put, path, reply)
                return reply
        raise AssertionError("unreachable")  # the loop returns on its last try

    async def forget(self, cell_ids: list[str]) -> None:
        """The kept replies of cells whose answers are stored: no run needs them again."""
        paths = [p for c in cell_ids for p in self.kept.pop(c, [])]
        if paths:
            await asyncio.to_thread(self.replies.drop, paths)
