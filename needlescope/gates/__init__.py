"""Nightly regression gates: their config, their evaluation against the warehouse's figures,
and the results and events they raise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.gates._config import Gate, GateModel, MaxDropGate, Notify, check_gate_probes
    from needlescope.gates._eval import RESULT_COLUMNS, evaluate_gates
    from needlescope.gates._results import (
        FAILED_CELLS_EVENT,
        GATE_FAILED_EVENT,
        MIN_ANSWERS,
        GateResult,
        failed_results,
        state_message,
    )

__all__ = [
    "FAILED_CELLS_EVENT",
    "GATE_FAILED_EVENT",
    "MIN_ANSWERS",
    "RESULT_COLUMNS",
    "Gate",
    "GateModel",
    "GateResult",
    "MaxDropGate",
    "Notify",
    "check_gate_probes",
    "evaluate_gates",
    "failed_results",
    "state_message",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Gate": "._config",
        "GateModel": "._config",
        "MaxDropGate": "._config",
        "Notify": "._config",
        "check_gate_probes": "._config",
        "RESULT_COLUMNS": "._eval",
        "evaluate_gates": "._eval",
        "FAILED_CELLS_EVENT": "._results",
        "GATE_FAILED_EVENT": "._results",
        "GateResult": "._results",
        "MIN_ANSWERS": "._results",
        "failed_results": "._results",
        "state_message": "._results",
    },
)
