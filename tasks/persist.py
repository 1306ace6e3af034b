"""Writing rows to the warehouse, a file per task run."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.runtime import task_run

from needlescope.warehouse.store import Warehouse


def _persist_name() -> str:
    parameters = task_run.parameters
    return f"persist {parameters['table']} ×{len(parameters['rows'])}"


@task(name="persist", task_run_name=_persist_name)
async def persist(
    warehouse_root: str, table: str, rows: list[dict[str, Any]], parts: list[str]
) -> str | None:
    path = Warehouse(warehouse_root).append(table, rows, parts=parts)
    return None if path is None else str(path)
