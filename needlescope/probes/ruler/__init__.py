"""RULER's synthetic task families (NVIDIA/RULER, Apache-2.0), as pure functions.

``niah`` (needle variants), ``variable_tracking`` (RULER's ``vt``) and ``aggregation``
(``cwe`` and ``fwe``): each module draws a cell's content from its seed, builds the prompt
around a number of haystack units, and fits that number to a token budget (``fit``);
``scoring`` holds RULER's metrics and ``templates`` its prompts, byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.ruler import aggregation_probe, niah_probe, variable_tracking_probe

    _niah: Probe = niah_probe  # mypy checks each module against the protocol
    _variable_tracking: Probe = variable_tracking_probe
    _aggregation: Probe = aggregation_probe

PROBES = (
    ProbeSpec(
        "niah",
        "needlescope.probes.ruler.niah_probe",
        "needlescope.probes.ruler.entry:NiahProbe",
        50,
        folder="ruler",
        ruler=True,
    ),
    ProbeSpec(
        "variable_tracking",
        "needlescope.probes.ruler.variable_tracking_probe",
        "needlescope.probes.ruler.entry:VariableTrackingProbe",
        60,
        folder="ruler",
        ruler=True,
    ),
    ProbeSpec(
        "aggregation",
        "needlescope.probes.ruler.aggregation_probe",
        "needlescope.probes.ruler.entry:AggregationProbe",
        70,
        folder="ruler",
        ruler=True,
    ),
)

__all__ = ["PROBES"]
