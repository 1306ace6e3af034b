"""The grid of a sweep: cells and their stable ids, epochs, orders and shards, the grid counted
before it is built, and ``needlescope plan``'s rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.grid._cells import (
        Cell,
        ModelFields,
        default_epoch,
        filler_identity,
        model_fields,
        order_cells,
        shard_of,
    )
    from needlescope.grid._plan import as_dicts, plan, totals
    from needlescope.grid._size import grid_sizes

__all__ = [
    "Cell",
    "ModelFields",
    "as_dicts",
    "default_epoch",
    "filler_identity",
    "grid_sizes",
    "model_fields",
    "order_cells",
    "plan",
    "shard_of",
    "totals",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Cell": "._cells",
        "ModelFields": "._cells",
        "default_epoch": "._cells",
        "filler_identity": "._cells",
        "model_fields": "._cells",
        "order_cells": "._cells",
        "shard_of": "._cells",
        "as_dicts": "._plan",
        "plan": "._plan",
        "totals": "._plan",
        "grid_sizes": "._size",
    },
)
