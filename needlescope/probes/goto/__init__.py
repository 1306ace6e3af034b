"""The goto probe (the Little Retrieval Test): n register lines and one `go to line k`
instruction. entry.py: its config entry; probe.py: its cells, prompts and grading."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.goto import probe as _module0
    from needlescope.probes.goto.entry import GotoProbe

    _checked0: Probe = _module0  # mypy checks the module against the protocol

PROBES = (
    ProbeSpec(
        "goto", "needlescope.probes.goto.probe", "needlescope.probes.goto.entry:GotoProbe", 20
    ),
)

__all__ = ["PROBES", "GotoProbe"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GotoProbe": ".entry",
    },
)
