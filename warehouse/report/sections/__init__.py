"""The report's sections, one module each: the summary, the statistics tables, a probe's
charts, epochs compared, the answers side by side, the run's metadata and gate flags."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.warehouse.report.sections.gate_flags import gate_flags
    from needlescope.warehouse.report.sections.ruler_stats import ruler_effective
    from needlescope.warehouse.report.sections.statistics import latest_epoch

__all__ = ["gate_flags", "latest_epoch", "ruler_effective"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "gate_flags": ".gate_flags",
        "latest_epoch": ".statistics",
        "ruler_effective": ".ruler_stats",
    },
)
