"""Writing rows to the warehouse, a new file per write, in a worker thread.

Not a task run: a batch of cells writes three to five tables, and a task run each cost more
of Prefect's database than the rows themselves (16 KB a task run, measured 2026-11-29 with
bench_orchestration.py's scale part). The sweep's build, query and grade task runs show a
batch's progress; a write that fails fails the batch's step as it did.
"""

from __future__ import annotations

import asyncio
from typing import Any

from needlescope.warehouse.store import Warehouse


async def persist(
    warehouse_root: str, table: str, rows: list[dict[str, Any]], parts: list[str]
) -> str | None:
    """``rows`` appended to ``table`` under ``parts`` (probe, model); the new file's path."""
    path = await asyncio.to_thread(Warehouse(warehouse_root).append, table, rows, parts=parts)
    return None if path is None else str(path)
