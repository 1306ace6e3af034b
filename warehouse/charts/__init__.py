"""The charts: a builder per probe (a frame and column names in, an ``alt.Chart`` out, no
I/O), their shared pieces (shared.py), and drawing them to files (render.py, vega.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.warehouse.charts.shared import Chart, heatmap, placeholder

__all__ = ["Chart", "heatmap", "placeholder"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Chart": ".shared",
        "heatmap": ".shared",
        "placeholder": ".shared",
    },
)
