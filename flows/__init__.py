"""The flows: ``sweep`` (a config's grid, each cell exactly once per epoch) and ``rerun_failed``
(a run's unfinished cells), their deployments, and the command line above them (cli/)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.flows.rerun import rerun_failed
    from needlescope.flows.sweep import sweep

__all__ = ["rerun_failed", "sweep"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "rerun_failed": ".rerun",
        "sweep": ".sweep",
    },
)
