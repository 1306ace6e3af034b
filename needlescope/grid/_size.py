"""How many cells a config's grid makes, counted from its axes without making one.

A config can ask for a billion cells in one line (``repeats: 1000000000``); counting the axes
lets it be refused (``max_cells``) before anything is built. Each probe's count mirrors its
``expand``; ``tests/unit/test_grid_size.py`` holds them equal on every shipped config.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

from needlescope.config import (
    CasesProbe,
    CountingStarsProbe,
    GotoProbe,
    RagProbe,
    RecallProbe,
    SweepConfig,
)


def _distinct(values: Iterable[Any]) -> int:
    return len(dict.fromkeys(values))  # a value given twice makes the same cells twice


def _recall(config: SweepConfig, probe: RecallProbe) -> int:
    from needlescope.haystack import as_is_files

    fitted = _distinct(f for f in probe.fillers if not config.filler_spec(f).as_is)
    specs = [config.filler_spec(f) for f in dict.fromkeys(probe.fillers)]
    files = sum(len(as_is_files(s.path)) for s in specs if s.as_is and s.path is not None)
    counts = _distinct(probe.needle_counts or [0])
    variants = math.prod(
        (
            _distinct(probe.placements),
            _distinct(probe.regions),
            _distinct(probe.prompts),
            probe.repeats,
        )
    )
    return (_distinct(probe.lengths or []) * fitted + files) * counts * variants


def _counting_stars(config: SweepConfig, probe: CountingStarsProbe) -> int:
    from needlescope.probes.counting_stars import fillers_for
    from needlescope.probes.stars_templates import TEMPLATES

    fillers = sum(
        _distinct(fillers_for(config, probe.fillers, TEMPLATES[prompt].language))
        for prompt in dict.fromkeys(probe.templates())
    )
    orders = 1 if probe.counts == "paper" else _distinct(probe.orders)  # the paper's own order
    return len(probe.length_grid()) * fillers * orders * probe.repeats


def _goto(config: SweepConfig, probe: GotoProbe) -> int:
    axes = (probe.line_counts, probe.orders, probe.prompts)
    return math.prod(_distinct(axis) for axis in axes) * probe.repeats


def _cases(config: SweepConfig, probe: CasesProbe) -> int:
    from needlescope.probes.case_file import load_cases
    from needlescope.probes.cases import probe_depths

    modes = _distinct(probe.context_modes) if isinstance(probe, RagProbe) else 1
    axes = (load_cases(probe.cases_file, probe.cases), probe.lengths, probe_depths(probe))
    prompts = _distinct(probe.prompts) if probe.prompts else 1  # else one, the case's language
    return math.prod(len(a) if isinstance(a, dict) else _distinct(a) for a in axes) * (
        _distinct(probe.fillers) * modes * prompts * probe.repeats
    )


COUNTERS: dict[str, Callable[[SweepConfig, Any], int]] = {
    "recall": _recall,
    "counting_stars": _counting_stars,
    "goto": _goto,
    "cases": _cases,
    "rag": _cases,
}


def grid_sizes(config: SweepConfig) -> list[int]:
    """Cells each probe entry makes (before cells two entries share are counted once)."""
    models = len(config.tested_models())
    sizes = []
    for probe in config.probes:
        counter = COUNTERS.get(probe.probe)
        if counter is not None:
            sizes.append(models * counter(config, probe))
            continue
        # A probe without a counter is counted by making its cells, up to one past the limit.
        from needlescope.probes.registry import probe_module

        made = probe_module(probe.probe).expand(config, probe)
        sizes.append(sum(1 for _ in itertools.islice(made, config.max_cells + 1)))
    return sizes
