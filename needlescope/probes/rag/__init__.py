"""The rag probe: the cases haystack chunked, embedded and retrieved into the prompt (U-NIAH's
RAG mode). entry.py: its config entry; probe.py: retrieval and prompts; retrieval.py:
ranking and the record of where each needle went."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports
from needlescope.probes.spec import ProbeSpec

if TYPE_CHECKING:
    from needlescope.probes.base import Probe
    from needlescope.probes.rag import probe as _module0
    from needlescope.probes.rag.entry import RagProbe

    _checked0: Probe = _module0  # mypy checks the module against the protocol

PROBES = (
    ProbeSpec(
        "rag",
        "needlescope.probes.rag.probe",
        "needlescope.probes.rag.entry:RagProbe",
        40,
        folder="cases",  # its views and charts are the cases probe's, LLM and RAG side by side
        judged=True,
    ),
)

__all__ = ["PROBES", "RagProbe"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RagProbe": ".entry",
    },
)
