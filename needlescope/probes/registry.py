"""The probes by name, and the grid of a sweep: each probe's cells.

Which probes there are is the catalog's (catalog.py: each folder's declaration, and those
registered); a probe's module is imported on first use. Each folder checks its module against
the :class:`~needlescope.probes.base.Probe` protocol under TYPE_CHECKING, for mypy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from needlescope.probes import catalog

if TYPE_CHECKING:
    from needlescope.config import ProbeConfig, SweepConfig
    from needlescope.grid import Cell
    from needlescope.probes.base import Probe


def probe_module(name: str) -> Probe:
    # Each folder's declaration names a module its own TYPE_CHECKING block checks as a Probe.
    return cast("Probe", importlib.import_module(catalog.spec(name).module))


def expand_grid(config: SweepConfig) -> list[Cell]:
    """All cells of a sweep, in a stable order, without duplicates."""
    return list(expand_with_probes(config))


def expand_with_probes(config: SweepConfig) -> dict[Cell, ProbeConfig]:
    """Each cell of the sweep with the probe config it came from (judges, retrieval settings)."""
    cells: dict[Cell, ProbeConfig] = {}
    seen: set[str] = set()
    for probe in config.probes:
        for cell in probe_module(probe.probe).expand(config, probe):
            if cell.cell_id not in seen:
                seen.add(cell.cell_id)
                cells[cell] = probe
    return cells
