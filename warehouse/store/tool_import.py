"""``needlescope import TOOL PATH --model NAME``: another needle tool's results into the
warehouse's own tables, in the epoch ``legacy-<tool>-<model>``.

Every file under PATH is read first (needlescope.imports): one unreadable file stops the import
before anything is written. Then the answers the epoch does not hold yet are written, a file
per table, answers last (an answer marks its cell done): a second import of the same files
writes nothing. The recall seed's databases keep their own importer (legacy.py) and epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

from needlescope.errors import WarehouseError
from needlescope.imports import read_counting_stars, read_gkamradt, read_ruler, read_uniah
from needlescope.imports.gkamradt import DEFAULT_QUESTION
from needlescope.provenance import canonical_json
from needlescope.warehouse.store.parquet import Warehouse
from needlescope.warehouse.store.tool_rows import CONVERTERS, Imported

TOOLS: Final = ("gkamradt", "counting-stars", "uniah", "ruler")
WRITE_ORDER: Final = ("cells", "needle_outcomes", "answers")


def tool_epoch(tool: str, model: str) -> str:
    return f"legacy-{tool}-{model}"


def _readers(question: str) -> dict[str, Callable[[Path], list[Any]]]:
    return {
        "gkamradt": lambda path: list(read_gkamradt(path, question=question)),
        "counting-stars": lambda path: list(read_counting_stars(path)),
        "uniah": lambda path: list(read_uniah(path)),
        "ruler": lambda path: list(read_ruler(path)),
    }


def import_tool(
    tool: str,
    path: Path,
    model: str,
    store: Warehouse,
    *,
    question: str = DEFAULT_QUESTION,
) -> dict[str, Any]:
    """Import ``tool``'s results under ``path`` as ``model``'s answers (idempotent).

    Raises ImportFormatError (``PATH: what is wrong``) for an unreadable file, before writing;
    WarehouseError for an unknown tool or an empty model name. Returns what was done: tool,
    source, model, epoch, run id (None when nothing was new), answers read, imported and
    skipped, and the rows written per table.
    """
    if tool not in TOOLS:
        raise WarehouseError(f"unknown tool {tool!r}: one of {', '.join(TOOLS)}")
    if not model.strip():
        raise WarehouseError("the model name must not be empty")
    records = _readers(question)[tool](Path(path))
    convert = CONVERTERS[tool]
    rows = [convert(tool, model, record) for record in records]
    epoch = tool_epoch(tool, model)
    store.check_ours()
    store.ensure()
    done = store.graded_cell_ids(epoch)
    known = store.known_cell_ids()
    todo = [r for r in rows if r.cell_id not in done]
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    written = dict.fromkeys(("runs", *WRITE_ORDER), 0)
    summary: dict[str, Any] = {
        "tool": tool,
        "source": str(path),
        "model": model,
        "epoch": epoch,
        "run_id": run_id if todo else None,
        "answers_read": len(rows),
        "answers_imported": len(todo),
        "skipped": len(rows) - len(todo),
        "rows": written,
    }
    if not todo:
        return summary
    config = {"tool": tool, "source": str(path), "model": model, "epoch": epoch}
    if tool == "gkamradt":
        config["question"] = question
    _run_row(store, run_id, epoch, tool, "start", config, cells_total=len(rows))
    tables = _tables(todo, run_id, epoch, model, known)
    for table in WRITE_ORDER:
        store.append(table, tables[table], parts=[tool, model])
        written[table] = len(tables[table])
    counts = {"cells_total": len(rows), "cells_skipped": len(rows) - len(todo)}
    _run_row(store, run_id, epoch, tool, "end", config, cells_graded=len(todo), **counts)
    written["runs"] = 2
    return summary


def _tables(
    todo: list[Imported], run_id: str, epoch: str, model: str, known: set[str]
) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in WRITE_ORDER}
    now = datetime.now(UTC)
    for row in todo:
        key = {
            "run_id": run_id,
            "epoch": epoch,
            "cell_id": row.cell_id,
            "model": model,
            "probe": row.cell["probe"],
        }
        if row.cell_id not in known:
            tables["cells"].append({**row.cell, "run_id": run_id})
        answer = {**key, "attempts": None, **row.answer}
        # The cases views find an answer's row again by its time: a file without one (the
        # older gkamradt results) is stamped with the import's.
        answer["answered_at"] = answer.get("answered_at") or now
        tables["answers"].append(answer)
        tables["needle_outcomes"] += [{**key, **outcome} for outcome in row.outcomes]
    return tables


def _run_row(
    store: Warehouse,
    run_id: str,
    epoch: str,
    tool: str,
    event: str,
    config: dict[str, Any],
    **counts: Any,
) -> None:
    store.append(
        "runs",
        [
            {
                "run_id": run_id,
                "epoch": epoch,
                "event": event,
                "at": datetime.now(UTC),
                "config_name": f"import-{tool}",
                "config_json": canonical_json(config),
                "needlescope_version": version("needlescope"),
                **counts,
            }
        ],
    )
