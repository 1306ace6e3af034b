"""Gates in a config: the five kinds of the issue parse; every mistake is one line naming the
file and the field, worded as the config's own errors are."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from needlescope.config import _sweep as config_module
from needlescope.errors import ConfigError
from needlescope.gates._config import (
    MaxDropGate,
    MaxFailedCellsGate,
    MaxInvalidRateGate,
    MinAccuracyGate,
    MinEffectiveLengthGate,
    check_gate_probes,
    parse_gates,
)

ISSUE_GATES: list[dict[str, Any]] = [
    {"probe": "recall", "min_accuracy": 90, "lengths": [8000, 32000]},
    {"probe": "recall", "max_drop": 5, "vs": "previous"},
    {"probe": "counting_stars", "min_effective_length": 32000},
    {"max_invalid_rate": 0.05},
    {"max_failed_cells": 0},
]


def test_the_issue_gates_parse_into_their_kinds() -> None:
    gates = parse_gates(ISSUE_GATES)
    assert [type(g) for g in gates] == [
        MinAccuracyGate,
        MaxDropGate,
        MinEffectiveLengthGate,
        MaxInvalidRateGate,
        MaxFailedCellsGate,
    ]
    accuracy, drop, effective, invalid, failed = gates
    assert isinstance(accuracy, MinAccuracyGate) and accuracy.lengths == [8000, 32000]
    assert isinstance(drop, MaxDropGate) and drop.max_drop == 5 and drop.vs == "previous"
    assert isinstance(effective, MinEffectiveLengthGate) and effective.threshold == 85.6
    assert invalid.probe is None and failed.probe is None
    assert [g.label for g in gates] == [
        "recall min_accuracy 90",
        "recall max_drop 5",
        "counting_stars min_effective_length 32000",
        "max_invalid_rate 0.05",
        "max_failed_cells 0",
    ]
    assert [g.kind for g in gates] == [
        "min_accuracy",
        "max_drop",
        "min_effective_length",
        "max_invalid_rate",
        "max_failed_cells",
    ]


def test_defaults_and_the_gates_own_threshold() -> None:
    drop, effective = parse_gates(
        [{"max_drop": 2.5}, {"min_effective_length": 4000, "threshold": 50}]
    )
    assert isinstance(drop, MaxDropGate) and drop.vs == "previous" and drop.probe is None
    assert isinstance(effective, MinEffectiveLengthGate) and effective.threshold == 50
    assert parse_gates(None) == ()
    with pytest.raises(ValidationError, match="frozen"):
        drop.max_drop = 9


BAD: list[tuple[Any, str]] = [
    (
        [{"probe": "recall"}],
        "c.yaml: gates.0: a gate names one limit: min_accuracy, max_drop, min_effective_length,"
        " max_invalid_rate, max_failed_cells",
    ),
    (
        [{"max_failed_cells": 0}, {"min_accuracy": 90, "max_drop": 5}],
        "c.yaml: gates.1: a gate names one limit, this one min_accuracy and max_drop:"
        " one gate each",
    ),
    (
        ["recall > 90"],
        "c.yaml: gates.0: a gate is a mapping, such as {probe: recall, min_accuracy: 90}",
    ),
    ({"min_accuracy": 90}, "c.yaml: gates: Input should be a valid list"),
    (
        [{"min_accuracy": 190}],
        "c.yaml: gates.0.min_accuracy.min_accuracy: Input should be less than or equal to 100",
    ),
    (
        [{"min_accuracy": True}],
        "c.yaml: gates.0.min_accuracy.min_accuracy: Input should be a valid number",
    ),
    (
        [{"min_accuracy": "90%"}],
        "c.yaml: gates.0.min_accuracy.min_accuracy: Input should be a valid number",
    ),
    (
        [{"min_accuracy": 90, "lengths": [8000, 0]}],
        "c.yaml: gates.0.min_accuracy.lengths.1: Input should be greater than 0",
    ),
    (
        [{"min_accuracy": 90, "lengths": []}],
        "c.yaml: gates.0.min_accuracy.lengths: List should have at least 1 item after validation,"
        " not 0",
    ),
    (
        [{"min_accuracy": 90, "lenghts": [8000]}],
        "c.yaml: gates.0.min_accuracy.lenghts: unknown field",
    ),
    (
        [{"max_drop": 5, "vs": "yesterday"}],
        "c.yaml: gates.0.max_drop.vs: Input should be 'previous'",
    ),
    (
        [{"max_drop": -1}],
        "c.yaml: gates.0.max_drop.max_drop: Input should be greater than or equal to 0",
    ),
    (
        [{"min_effective_length": 32000.5}],
        "c.yaml: gates.0.min_effective_length.min_effective_length: Input should be a valid"
        " integer",
    ),
    (
        [{"min_effective_length": 32000, "threshold": 101}],
        "c.yaml: gates.0.min_effective_length.threshold: Input should be less than or equal to 100",
    ),
    (
        [{"max_invalid_rate": 5}],
        "c.yaml: gates.0.max_invalid_rate.max_invalid_rate: 5 is not a share of answers: give 0"
        " to 1 (0.05 is 5%)",
    ),
    (
        [{"max_failed_cells": -1}],
        "c.yaml: gates.0.max_failed_cells.max_failed_cells: Input should be greater than or equal"
        " to 0",
    ),
    (
        [{"probe": "Recall", "max_failed_cells": 0}],
        "c.yaml: gates.0.max_failed_cells.probe: String should match pattern '^[a-z][a-z0-9_]*$'",
    ),
]


@pytest.mark.parametrize(("data", "expected"), BAD, ids=[e for _, e in BAD])
def test_a_bad_gate_is_one_line_naming_the_field(data: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_gates(data, "c.yaml")
    assert str(caught.value) == expected
    assert "\n" not in str(caught.value)


CONFIG: dict[str, Any] = {
    "name": "nightly",
    "models": [{"name": "smol", "provider": "local"}],
    "probes": [
        {"probe": "recall", "lengths": [400], "needle_counts": [2]},
        {"probe": "counting_stars", "stars": 4, "steps": 1, "max_length": 1000},
    ],
}


def test_inside_a_config_the_errors_read_the_same() -> None:
    """Through config.parse_config, a gate's mistake is located as parse_gates locates it."""
    parsed = config_module.parse_config({**CONFIG, "gates": ISSUE_GATES}, "nightly.yaml")
    assert [g.label for g in parsed.gates] == [g.label for g in parse_gates(ISSUE_GATES)]
    for data, expected in BAD[:2] + BAD[4:]:
        if not isinstance(data, list):
            continue
        with pytest.raises(ConfigError) as caught:
            config_module.parse_config({**CONFIG, "gates": data}, "c.yaml")
        assert str(caught.value) == expected


def test_a_config_refuses_a_gate_about_a_probe_it_does_not_run_and_a_bad_block() -> None:
    with pytest.raises(ConfigError) as caught:
        config_module.parse_config(
            {**CONFIG, "gates": [{"probe": "goto", "min_accuracy": 50}]}, "c.yaml"
        )
    assert str(caught.value) == (
        "c.yaml: gates.0.probe: the config runs no probe 'goto'; it runs counting_stars, recall"
    )
    parsed = config_module.parse_config({**CONFIG, "notify": {"block": "my-slack-webhook"}})
    assert parsed.notify is not None and parsed.notify.block == "my-slack-webhook"
    assert parsed.gates == []
    with pytest.raises(ConfigError) as caught:
        config_module.parse_config({**CONFIG, "notify": {"block": "My Slack"}}, "c.yaml")
    assert str(caught.value) == (
        "c.yaml: notify.block: String should match pattern '^[a-z0-9][a-z0-9-]*$'"
    )
    # A config keeps its gates through the JSON a run stores (needlescope gates reads it).
    stored = config_module.parse_config({**CONFIG, "gates": ISSUE_GATES})
    again = config_module.SweepConfig.model_validate_json(stored.model_dump_json())
    assert again.gates == stored.gates


def test_a_gate_about_a_probe_the_config_does_not_run_is_refused() -> None:
    gates = parse_gates([{"max_failed_cells": 0}, {"probe": "goto", "min_accuracy": 50}])
    check_gate_probes(gates[:1], [])  # a gate naming no probe needs none
    check_gate_probes(gates, ["recall", "goto"])
    with pytest.raises(ValueError) as caught:
        check_gate_probes(gates, ["recall", "counting_stars"])
    assert str(caught.value) == (
        "gates.1.probe: the config runs no probe 'goto'; it runs counting_stars, recall"
    )
