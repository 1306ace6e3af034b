"""The probes: one module of pure functions each (base.py says what a probe provides;
registry.py names them). Nothing is imported until asked for, so reading a probe's templates
(config validation does) costs no probe."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.probes.base import BuildTools, Context, Grade, Probe, Rendered
    from needlescope.probes.registry import expand_grid, expand_with_probes, probe_module

__all__ = [
    "BuildTools",
    "Context",
    "Grade",
    "Probe",
    "Rendered",
    "expand_grid",
    "expand_with_probes",
    "probe_module",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BuildTools": ".base",
        "Context": ".base",
        "Grade": ".base",
        "Probe": ".base",
        "Rendered": ".base",
        "expand_grid": ".registry",
        "expand_with_probes": ".registry",
        "probe_module": ".registry",
    },
)
