"""Error statistics as tidy Polars frames, read from the views: summaries, intervals,
effective length, drift and significance between epochs, the per-probe overview."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.warehouse.stats.effective import effective_both
    from needlescope.warehouse.stats.overview import Overview, overview
    from needlescope.warehouse.stats.summaries import (
        accuracy_by_length,
        accuracy_summary,
        recall_stats,
    )

__all__ = [
    "Overview",
    "accuracy_by_length",
    "accuracy_summary",
    "effective_both",
    "overview",
    "recall_stats",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Overview": ".overview",
        "accuracy_by_length": ".summaries",
        "accuracy_summary": ".summaries",
        "effective_both": ".effective",
        "overview": ".overview",
        "recall_stats": ".summaries",
    },
)
