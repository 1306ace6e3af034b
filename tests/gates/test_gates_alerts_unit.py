"""Alerts without a Prefect server: nothing is emitted and one line says why; with nothing
failed, nothing is said at all."""

from __future__ import annotations

from typing import Any

import pytest

from needlescope.config._sweep import parse_config
from needlescope.flows import run_gates
from needlescope.gates._results import FAILED, PASSED, CountFigures, GateResult


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, text: str, *args: Any) -> None:
        self.lines.append(text % args if args else text)


CONFIG = parse_config(
    {
        "name": "nightly",
        "models": [{"name": "m", "provider": "local"}],
        "probes": [{"probe": "recall", "lengths": [400], "needle_counts": [2]}],
        "gates": [{"max_failed_cells": 0}],
    }
)


def verdict(status: str) -> GateResult:
    return GateResult(
        0,
        "max_failed_cells 0",
        "max_failed_cells",
        0,
        "m",
        None,
        status,
        f"gate max_failed_cells 0 {status}: model m: …",
        CountFigures(1, 10),
    )


def test_without_a_server_no_alert_is_sent_and_one_line_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_gates, "prefect_server_configured", lambda: False)
    log = Log()
    failed = run_gates.Verdicts([verdict(FAILED)])
    assert run_gates.emit_alerts(CONFIG, "e1", failed, {"cells_failed": 1}, log) == 0
    assert log.lines == [run_gates.NO_SERVER]
    assert "no alert was sent" in run_gates.NO_SERVER and "no Prefect server" in run_gates.NO_SERVER

    quiet = Log()
    passed = run_gates.Verdicts([verdict(PASSED)])
    assert run_gates.emit_alerts(CONFIG, "e1", passed, {"cells_failed": 0}, quiet) == 0
    assert quiet.lines == []
    assert failed.message == "gate max_failed_cells 0 failed: model m: …"
    assert passed.message is None


def test_a_shard_leaves_the_gates_to_the_run_that_fanned_it_out() -> None:
    from needlescope.flows.run_cells import plan_run

    assert plan_run(CONFIG, set(), None, None, 1).whole_epoch
    assert plan_run(CONFIG, set(), None, None, 3).whole_epoch  # the fan-out's own plan
    assert not plan_run(CONFIG, set(), None, 0, 2).whole_epoch
