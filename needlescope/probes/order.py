"""The order probes are shown in (the run's table, the report's summary and sections): the
headline probe first, then the seeds' probes, then RULER's families and the newer probes. A
probe not named here comes after them, by name. Add a new probe's name where it belongs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

PROBE_ORDER: Final[tuple[str, ...]] = (
    "recall",
    "counting_stars",
    "goto",
    "cases",
    "rag",
    "niah",
    "variable_tracking",
    "aggregation",
    "mrcr",
    "latent_list",
)


def probe_rank(name: str) -> tuple[int, str]:
    """A sort key: the place in :data:`PROBE_ORDER`, then the name."""
    return (PROBE_ORDER.index(name) if name in PROBE_ORDER else len(PROBE_ORDER), name)


def ordered(names: Iterable[str]) -> list[str]:
    return sorted(dict.fromkeys(names), key=probe_rank)
