"""Prompt building, a batch of cells per task run (a task run costs ~11 ms; a prompt far less)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.context import TaskRunContext
from prefect.runtime import task_run
from prefect.states import State

from needlescope.errors import NeedlescopeError
from needlescope.grid import Cell
from needlescope.tasks.contexts import Built
from needlescope.tasks.runtime import current


class CountsFailed(NeedlescopeError):
    """Cells of the batch whose token counts failed in a way worth retrying: the task is
    retried, and rebuilds only those (the runtime keeps the cells already built)."""

    def __init__(self, built: Built) -> None:
        super().__init__(f"{len(built.failed)} cells of the batch could not be counted")
        self.built = built


def _batch_name() -> str:
    parameters = task_run.parameters
    return f"build {parameters['model']} ×{len(parameters['cells'])}"


def _retry_counts(task: Any, run: TaskRun, state: State) -> bool:
    return isinstance(state.data, CountsFailed)


@task(
    name="build-prompts",
    task_run_name=_batch_name,
    retry_condition_fn=_retry_counts,
    cache_policy=NO_CACHE,  # as persist's
)
async def build_prompts(model: str, cells: list[Cell]) -> Built:
    """With the sweep's retries (``with_options``), a failed count is retried like a failed
    query; cells still failing after the last attempt come back in ``Built.failed``."""
    built = await current().contexts.build_contexts(model, cells)
    context = TaskRunContext.get()
    attempts_left = context is not None and context.task_run.run_count <= context.task.retries
    if attempts_left and any(error.retryable for _, error in built.failed):
        raise CountsFailed(built)
    return built
