"""The offline HTML report: ``write_report`` (page.py) assembles its sections (sections/), each
probe's figures and the answers' drill-down (drilldown/), with every chart inlined."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.warehouse.report.page import write_report

__all__ = ["write_report"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "write_report": ".page",
    },
)
