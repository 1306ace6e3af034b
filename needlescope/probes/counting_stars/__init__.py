"""The counting_stars probe, Counting-Stars-(M-N): M star sentences, every count listed.
entry.py: its config entry; probe.py: cells, prompts, grading; templates.py, counts.py and
paper.py: the paper's prompts, fixed counts and haystack."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.counting_stars import probe as _module0
    from needlescope.probes.counting_stars.entry import CountingStarsProbe

    _checked0: Probe = _module0  # mypy checks the module against the protocol

PROBES = (
    ProbeSpec(
        "counting_stars",
        "needlescope.probes.counting_stars.probe",
        "needlescope.probes.counting_stars.entry:CountingStarsProbe",
        10,
    ),
)

__all__ = ["PROBES", "CountingStarsProbe"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CountingStarsProbe": ".entry",
    },
)
