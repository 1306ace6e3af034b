"""The model query, one task run per cell and purpose (Prefect retries it, and an (epoch, cell)
cache key keeps a rerun from asking again), and the :class:`Asker` that runs those task runs
within each model's concurrency, pacing and the sweep's budget."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from prefect import task
from prefect.client.schemas.objects import TaskRun
from prefect.concurrency.asyncio import rate_limit
from prefect.context import TaskRunContext
from prefect.states import State
from prefect.utilities.annotations import quote

from needlescope.config import SweepConfig
from needlescope.errors import ProviderError
from needlescope.grid import Cell
from needlescope.probes.base import Context
from needlescope.provenance import Fingerprint
from needlescope.providers.base import CachePrefix, ChatRequest, Reply
from needlescope.tasks.result_files import with_result_files
from needlescope.tasks.runtime import current
from needlescope.tasks.sending import BudgetSpent, Sending, Spend


def cell_cache_key(context: TaskRunContext, parameters: dict[str, Any]) -> str:
    # The warehouse id keeps two warehouses (e.g. two test runs) from sharing answers.
    warehouse, epoch, cell = (parameters[k] for k in ("warehouse_id", "epoch", "cell_id"))
    purpose = parameters.get("purpose", "answer")
    suffix = "" if purpose == "answer" else f"-{purpose}"
    # A cell resent on purpose (rerun --validity) must not get its earlier reply back.
    resend = parameters.get("resend") or ""
    suffix += f"-resend-{resend}" if resend else ""
    return f"needlescope-query-{warehouse}-{epoch}-{cell}{suffix}"


def is_retryable(task: Any, task_run: TaskRun, state: State) -> bool:
    error = state.data
    return isinstance(error, ProviderError) and error.retryable


@task(
    name="query",
    task_run_name="{label}",
    cache_key_fn=cell_cache_key,
    persist_result=True,
    retry_condition_fn=is_retryable,
)
async def query_model(
    model: str,
    cell_id: str,
    epoch: str,
    warehouse_id: str,
    label: str,
    request: ChatRequest,
    purpose: str = "answer",
    resend: str = "",
) -> Reply:
    """Ask ``model``; ``purpose`` is "answer" for the model under test, else e.g. "judge:<name>".
    ``resend``: the run resending a cell that has an answer (a fresh cache key)."""
    runtime = current()
    sending = runtime.sending[model]
    async with sending.turn():
        if names := runtime.rate_limits.get(model):
            await rate_limit(names)
        if purpose == "answer":
            runtime.attempts[cell_id] += 1
        reply = await runtime.providers[model].complete(request)
        # Counted before the slot is freed: the next request checks the budget with it.
        sending.spend.add(model, reply)
    if serving := runtime.serving.get(model):
        reply = replace(reply, fingerprint=replace(reply.fingerprint or Fingerprint(), **serving))
    return reply


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
    """Query task runs started at once for a model: twice its slots, so a freed slot finds a
    task run past Prefect's start-up work. Only its slots where a Prefect tag limit applies (a
    task run waiting for a slot would hold a tag slot another model could use), or where the
    sweep has a budget (a task run that waited would find it spent: a failed task run)."""
    return concurrency if tags or budgeted else 2 * concurrency


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
        self._live: dict[str, asyncio.Semaphore] = {}
        # cell id -> the prefix its request marks for the provider's cache (``cache: auto``)
        self.cache_marks: dict[str, CachePrefix] = {}

    def _task(self, model: str) -> Any:
        if model not in self._tasks:
            model_config = self.config.model(model)
            self._tasks[model] = with_result_files(
                query_model.with_options(
                    retries=self.config.retry.retries,
                    retry_delay_seconds=list(self.config.retry.backoff_s) or 0,
                    tags=self.tags.get(model, []),
                )
            )
            concurrency = model_config.concurrency
            current().sending[model] = Sending(concurrency, model_config.delay_s, self.spend)
            live = live_task_runs(concurrency, self.tags.get(model), self.config.budget is not None)
            self._live[model] = asyncio.Semaphore(live)
        return self._tasks[model]

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
        task = self._task(model)
        async with self._live[model]:
            if self.spend.exhausted():
                return UNSENT
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
        if isinstance(outcome, BudgetSpent):
            return UNSENT
        if isinstance(outcome, Reply):
            if state.name == "Cached":  # an earlier run's reply: the task run sent nothing
                self.spend.add(model, outcome)
            return outcome
        return outcome if isinstance(outcome, BaseException) else RuntimeError(str(outcome))
