"""One task run per cell: the model query, with Prefect retries and an (epoch, cell) cache key."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prefect import task
from prefect.client.schemas.objects import TaskRun
from prefect.concurrency.asyncio import rate_limit
from prefect.context import TaskRunContext
from prefect.states import State

from needlescope.errors import ProviderError
from needlescope.providers.base import ChatRequest, Provider, Reply

# Live provider clients of the running flow, by model name (set by flows.runtime).
ACTIVE_PROVIDERS: dict[str, Provider] = {}
# Prefect rate limits each model's requests take a slot of (set by the flow; see flows.limits).
RATE_LIMITS: dict[str, list[str]] = {}
# Requests sent per cell in this process: retries included, cache hits excluded.
ATTEMPTS: Counter[str] = Counter()


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
    if names := RATE_LIMITS.get(model):
        await rate_limit(names)
    if purpose == "answer":
        ATTEMPTS[cell_id] += 1
    return await ACTIVE_PROVIDERS[model].complete(request)
