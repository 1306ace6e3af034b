"""The probes by name, and the grid of a sweep: each probe's cells.

A probe module is imported on first use. Under TYPE_CHECKING every one is assigned to the
:class:`~needlescope.probes.base.Probe` protocol, so mypy checks that each provides it all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from needlescope.config import ProbeConfig, SweepConfig
from needlescope.grid import Cell
from needlescope.probes.base import Probe

MODULES = {
    "recall": "needlescope.probes.recall",
    "counting_stars": "needlescope.probes.counting_stars",
    "goto": "needlescope.probes.goto",
    "cases": "needlescope.probes.cases",
    "rag": "needlescope.probes.rag",
    # RULER's families (probes/ruler/)
    "niah": "needlescope.probes.ruler.probe_niah",
    "variable_tracking": "needlescope.probes.ruler.probe_vt",
    "aggregation": "needlescope.probes.ruler.probe_aggregation",
    "mrcr": "needlescope.probes.mrcr.probe",
    "latent_list": "needlescope.probes.latent_list.probe",
}

if TYPE_CHECKING:
    from needlescope.probes import cases, counting_stars, goto, rag, recall

    _recall: Probe = recall
    _counting_stars: Probe = counting_stars
    _goto: Probe = goto
    _cases: Probe = cases
    _rag: Probe = rag

    from needlescope.probes.latent_list import probe as latent_list
    from needlescope.probes.mrcr import probe as mrcr
    from needlescope.probes.ruler import probe_aggregation, probe_niah, probe_vt

    _niah: Probe = probe_niah
    _variable_tracking: Probe = probe_vt
    _aggregation: Probe = probe_aggregation
    _mrcr: Probe = mrcr
    _latent_list: Probe = latent_list


def probe_module(name: str) -> Probe:
    if name not in MODULES:
        raise KeyError(f"unknown probe {name!r}; known: {', '.join(MODULES)}")
    # Checked statically above: every module in MODULES is a Probe.
    return cast(Probe, importlib.import_module(MODULES[name]))


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
