"""The cases probe: needle cases (U-NIAH, the original needle test) at depth percents of a
corpus, graded by keywords and by a judge. entry.py: its config entry; probe.py: its cells,
prompts and grading; case_file.py, distractors.py, uniah.py: case files, distractors, U-NIAH's
terms."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.cases import probe as _module0
    from needlescope.probes.cases.entry import CasesProbe

    _checked0: Probe = _module0  # mypy checks the module against the protocol

PROBES = (
    ProbeSpec(
        "cases",
        "needlescope.probes.cases.probe",
        "needlescope.probes.cases.entry:CasesProbe",
        30,
        judged=True,
    ),
)

__all__ = ["PROBES", "CasesProbe"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CasesProbe": ".entry",
    },
)
