"""The warehouse: append-only Parquet with DuckDB views (store/), the statistics read from the
views (stats/), the charts drawn from them (charts/) and the offline report (report/)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.warehouse.report.page import write_report
    from needlescope.warehouse.store import Warehouse, default_root

__all__ = ["Warehouse", "default_root", "write_report"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Warehouse": ".store",
        "default_root": ".store",
        "write_report": ".report.page",
    },
)
