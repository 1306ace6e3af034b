"""The recall probe: N k-digit numbers hidden in a haystack, listed in order as JSON (the
recall seed's test). entry.py: its config entry; probe.py: its cells, prompts and grading."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.recall import probe as _module0
    from needlescope.probes.recall.entry import RecallProbe

    _checked0: Probe = _module0  # mypy checks the module against the protocol

PROBES = (
    ProbeSpec(
        "recall",
        "needlescope.probes.recall.probe",
        "needlescope.probes.recall.entry:RecallProbe",
        0,
    ),
)

__all__ = ["PROBES", "RecallProbe"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RecallProbe": ".entry",
    },
)
