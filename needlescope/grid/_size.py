"""How many cells a config's grid makes, counted from its axes without making one.

A config can ask for a billion cells in one line (``repeats: 1000000000``); counting the axes
lets it be refused (``max_cells``) before anything is built. Each probe entry's
``cell_count`` mirrors its probe's ``expand``; ``tests/grid/test_grid_size.py`` holds them
equal on every shipped config.
"""

from __future__ import annotations

import itertools

from needlescope.config import SweepConfig


def grid_sizes(config: SweepConfig) -> list[int]:
    """Cells each probe entry makes (before cells two entries share are counted once)."""
    models = len(config.tested_models())
    sizes = []
    for probe in config.probes:
        counted = probe.cell_count(config)
        if counted is not None:
            sizes.append(models * counted)
            continue
        # A probe without a counter is counted by making its cells, up to one past the limit.
        from needlescope.probes.registry import probe_module

        made = probe_module(probe.probe).expand(config, probe)
        sizes.append(sum(1 for _ in itertools.islice(made, config.max_cells + 1)))
    return sizes
