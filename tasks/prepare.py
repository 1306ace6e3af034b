"""Prompt building, a batch of cells per task run (a task run costs ~11 ms; a prompt far less)."""

from __future__ import annotations

from prefect import task
from prefect.runtime import task_run

from needlescope.cells import Cell
from needlescope.flows.runtime import Built, current_runtime


def _batch_name() -> str:
    parameters = task_run.parameters
    return f"build {parameters['model']} ×{len(parameters['cells'])}"


@task(name="build-prompts", task_run_name=_batch_name)
async def build_prompts(model: str, cells: list[Cell]) -> Built:
    return await current_runtime().build_contexts(model, cells)
