"""``needlescope import TOOL PATH --model NAME``: the results of other needle tools (and, as
``recall-seed``, the recall seed's databases, also ``import-legacy``) into the warehouse."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli._common import WarehouseOption, fail
from needlescope.imports.gkamradt import DEFAULT_QUESTION

RECALL_SEED = "recall-seed"


def import_results(
    tool: Annotated[
        str,
        typer.Argument(
            help="gkamradt, counting-stars, uniah, ruler, or recall-seed (= import-legacy)."
        ),
    ],
    path: Annotated[Path, typer.Argument(help="A result file of the tool, or a folder of them.")],
    model: Annotated[str, typer.Option(help="Model name to file the answers under.")],
    question: Annotated[
        str,
        typer.Option(help="gkamradt: the question its files were asked (they do not hold it)."),
    ] = DEFAULT_QUESTION,
    warehouse: WarehouseOption = None,
) -> None:
    """Import another needle tool's results (idempotent) into epoch legacy-TOOL-MODEL."""
    from needlescope.warehouse.store import Warehouse, default_root
    from needlescope.warehouse.store.legacy import import_legacy_db
    from needlescope.warehouse.store.tool_import import import_tool

    if question != DEFAULT_QUESTION and tool != "gkamradt":
        raise fail(f"--question: only gkamradt's files lack their question, not {tool}'s")
    store = Warehouse(warehouse or default_root())
    try:
        if tool == RECALL_SEED:
            summary = import_legacy_db(path, model, store)
        else:
            summary = import_tool(tool, path, model, store, question=question)
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
