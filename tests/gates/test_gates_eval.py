"""Each gate kind on worked tables whose verdict is computed by hand.

The intervals are the warehouse's own (``significance.mean_interval``: seeded percentile
bootstrap). Where a verdict rests on a bootstrap bound, the bound is one a hand can compute:
with n equal values the interval is that value; with 8 answers of 100 and 2 of 0 out of 10,
a resample is all 100s with probability 0.8**10 = 0.107 > 0.025, so the upper bound of the
95% interval is exactly 100.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import polars as pl
import pytest

from needlescope.gates._config import parse_gates
from needlescope.gates._eval import evaluate_gates
from needlescope.gates._results import (
    FAILED,
    NOT_ENOUGH_DATA,
    PASSED,
    CountFigures,
    DropFigures,
    EffectiveLengthFigures,
    GateResult,
    LengthFigure,
    exit_code,
    state_message,
)
from needlescope.warehouse.stats.intervals import mean_interval

NOISY = [100.0] * 8 + [0.0] * 2  # mean 80; upper bound of its interval 100 (see above)


def answers(
    accuracies: Sequence[float | None],
    *,
    model: str = "m",
    probe: str = "recall",
    length: int = 8000,
    unit: str = "tokens",
    validity: str | None = "valid",
    error: str | None = None,
    first: int = 0,
    epoch: str = "e2",
) -> list[dict[str, Any]]:
    """One row per accuracy, cells numbered from ``first`` (same number: same cell)."""
    return [
        {
            "epoch": epoch,
            "model": model,
            "probe": probe,
            "cell_id": f"{model}-{probe}-{length}-{first + i}",
            "length_unit": unit,
            "length": length,
            "accuracy": None if error else accuracy,
            "validity": None if error else validity,
            "error_kind": error,
        }
        for i, accuracy in enumerate(accuracies)
    ]


def frame(*groups: list[dict[str, Any]]) -> pl.DataFrame:
    rows = [row for group in groups for row in group]
    return pl.DataFrame(
        rows,
        schema={
            "epoch": pl.Utf8,
            "model": pl.Utf8,
            "probe": pl.Utf8,
            "cell_id": pl.Utf8,
            "length_unit": pl.Utf8,
            "length": pl.Int64,
            "accuracy": pl.Float64,
            "validity": pl.Utf8,
            "error_kind": pl.Utf8,
        },
    )


def judge(
    gates: list[dict[str, Any]],
    now: pl.DataFrame,
    previous: pl.DataFrame | None = None,
    models: Sequence[str] | None = None,
) -> list[GateResult]:
    return evaluate_gates(
        parse_gates(gates), now, interval_of=mean_interval, previous=previous, models=models
    )


def one(
    gate: dict[str, Any], now: pl.DataFrame, previous: pl.DataFrame | None = None
) -> GateResult:
    (result,) = judge([gate], now, previous)
    return result


def lengths(result: GateResult) -> list[LengthFigure]:
    figures = result.figures
    assert isinstance(figures, tuple) and all(isinstance(f, LengthFigure) for f in figures)
    return [f for f in figures if isinstance(f, LengthFigure)]


def effective(result: GateResult) -> EffectiveLengthFigures:
    (figures,) = result.figures  # type: ignore[misc]
    assert isinstance(figures, EffectiveLengthFigures)
    return figures


def dropped(result: GateResult) -> DropFigures:
    assert isinstance(result.figures, DropFigures)
    return result.figures


# ----------------------------------------------------------------------------- min_accuracy

FLOOR = {"probe": "recall", "min_accuracy": 90}


def test_min_accuracy_fails_when_the_whole_interval_is_below_the_floor() -> None:
    result = one(FLOOR, frame(answers([50.0] * 20)))
    assert result.status == FAILED and result.failed
    assert result.figures == (LengthFigure("tokens", 8000, 20, 50.0, 50.0, 50.0, "bootstrap"),)
    assert result.message == (
        "gate recall min_accuracy 90 failed: model m: at 8000 tokens: accuracy 50.0,"
        " 95% interval 50.0 to 50.0 below 90 (20 answers)"
    )


def test_noise_alone_never_fails_a_gate() -> None:
    """Mean 80 under a floor of 90, but ten answers cannot tell: the interval reaches 100."""
    result = one(FLOOR, frame(answers(NOISY)))
    assert result.status == PASSED
    (figure,) = lengths(result)
    assert figure.mean == 80.0 and figure.hi == 100.0 and figure.answers == 10
    assert "accuracy 80.0 at 8000 tokens (95% interval" in result.message
    # The same share over 200 answers is no longer noise: mean 80, sd 40.1, so the upper
    # bound is near 80 + 1.96 · 40.1 / √200 = 85.6, below 90.
    many = one(FLOOR, frame(answers([100.0] * 160 + [0.0] * 40)))
    assert many.status == FAILED
    (figure,) = lengths(many)
    assert figure.mean == 80.0 and figure.hi is not None and 84.0 < figure.hi < 87.0


def test_fewer_than_ten_answers_is_not_enough_data() -> None:
    result = one(FLOOR, frame(answers([0.0] * 9)))
    assert result.status == NOT_ENOUGH_DATA and not result.failed
    assert result.message == (
        "gate recall min_accuracy 90 not enough data: model m: at 8000 tokens: 9 answers"
        " (10 needed)"
    )


def test_only_the_listed_lengths_count_and_an_untested_one_is_not_enough_data() -> None:
    now = frame(answers([100.0] * 12), answers([0.0] * 12, length=16000))
    result = one({**FLOOR, "lengths": [8000, 32000]}, now)
    assert result.status == NOT_ENOUGH_DATA  # 16000 fails the floor, but is not listed
    assert [(f.length, f.answers) for f in lengths(result)] == [(8000, 12), (32000, 0)]
    assert result.message.endswith("at 32000 tokens: 0 answers (10 needed)")
    # Without lengths every length tested is judged: 16000 fails.
    every = one(FLOOR, now)
    assert every.status == FAILED
    assert "at 16000 tokens: accuracy 0.0" in every.message and "8000 tokens" not in every.message


def test_a_failed_length_outweighs_a_length_with_too_few_answers() -> None:
    now = frame(answers([10.0] * 15), answers([100.0] * 3, length=16000))
    assert one(FLOOR, now).status == FAILED


def test_accuracy_counts_valid_answers_only() -> None:
    now = frame(
        answers([100.0] * 20),
        answers([0.0] * 30, validity="truncated", first=100),
        answers([None] * 5, error="timeout", first=200),
        answers([None] * 5, first=300),  # recall parse failures: answers without an accuracy
    )
    result = one(FLOOR, now)
    assert result.status == PASSED
    assert [(f.answers, f.mean) for f in lengths(result)] == [(20, 100.0)]
    # "unknown" (no finish reason to judge by) counts as valid, as a missing validity does.
    unknown = frame(answers([0.0] * 10, validity="unknown"), answers([0.0] * 10, validity=None))
    assert lengths(one(FLOOR, unknown))[0].answers == 20


def test_each_model_gets_its_verdict_and_a_model_without_answers_is_listed() -> None:
    now = frame(answers([95.0] * 10, model="good"), answers([20.0] * 10, model="bad"))
    results = judge([FLOOR], now, models=["bad", "good", "silent"])
    assert [(r.model, r.status) for r in results] == [
        ("bad", FAILED),
        ("good", PASSED),
        ("silent", NOT_ENOUGH_DATA),
    ]
    assert (
        results[2].message
        == "gate recall min_accuracy 90 not enough data: model silent: no answers"
    )
    assert [r.model for r in judge([FLOOR], now)] == ["bad", "good"]  # default: who answered


def test_an_accuracy_gate_naming_no_probe_is_judged_per_probe() -> None:
    now = frame(answers([95.0] * 10), answers([20.0] * 10, probe="counting_stars"))
    results = judge([{"min_accuracy": 90}], now)
    assert [(r.probe, r.status) for r in results] == [
        ("counting_stars", FAILED),
        ("recall", PASSED),
    ]
    assert results[0].message.startswith("gate min_accuracy 90 failed: model m (counting_stars): ")
    # A gate naming its probe ignores the others'.
    assert one(FLOOR, now).status == PASSED


# ----------------------------------------------------------------------------- max_drop

DROP = {"probe": "recall", "max_drop": 5, "vs": "previous"}


def test_max_drop_fails_when_the_paired_interval_lies_beyond_the_limit() -> None:
    before = frame(answers([100.0] * 20, epoch="e1"))
    now = frame(answers([80.0] * 20))
    result = one(DROP, now, before)
    assert result.status == FAILED
    assert result.figures == DropFigures("e1", 20, 100.0, 80.0, 20.0, 20.0, 20.0, "bootstrap")
    assert result.message == (
        "gate recall max_drop 5 failed: model m: accuracy 100.0 → 80.0 vs epoch e1: drop 20.0"
        " points (95% interval 20.0 to 20.0, 20 pairs), all above 5"
    )


def test_a_drop_that_may_be_noise_passes() -> None:
    """Mean drop 20 over ten pairs: 8 unchanged, 2 from 100 to 0. The differences resample to
    all zeros with probability 0.107, so the drop's lower bound is 0, within the limit."""
    result = one(DROP, frame(answers(NOISY)), frame(answers([100.0] * 10, epoch="e1")))
    assert result.status == PASSED
    figures = dropped(result)
    assert figures.drop == 20.0 and figures.drop_lo == 0.0 and figures.pairs == 10
    # An improvement is a negative drop.
    better = one(DROP, frame(answers([100.0] * 10)), frame(answers([50.0] * 10, epoch="e1")))
    assert better.status == PASSED and dropped(better).drop == -50.0


def test_pairs_are_cells_valid_and_graded_on_both_sides() -> None:
    before = frame(answers([100.0] * 12, epoch="e1"), answers([100.0] * 5, first=50, epoch="e1"))
    now = frame(
        answers([0.0] * 9),  # cells 0-8 pair
        answers([0.0] * 2, first=9, validity="truncated"),  # cells 9, 10: invalid now
        answers([None], first=11, error="timeout"),  # cell 11: failed now
        answers([0.0] * 5, first=70),  # cells answered now only
    )
    result = one(DROP, now, before)
    assert result.status == NOT_ENOUGH_DATA
    assert result.figures == DropFigures("e1", 9)
    assert result.message.endswith("model m: 9 pairs vs epoch e1 (10 needed)")


def test_without_a_previous_epoch_a_drop_is_not_enough_data() -> None:
    now = frame(answers([0.0] * 20))
    for previous in (None, frame(answers([100.0] * 20, model="other", epoch="e1"))):
        result = one(DROP, now, previous)
        assert result.status == NOT_ENOUGH_DATA
        assert result.message == (
            "gate recall max_drop 5 not enough data: model m: no previous epoch to compare with"
        )


def test_previous_rows_of_several_epochs_for_one_model_are_a_mistake() -> None:
    before = frame(answers([1.0] * 10, epoch="e0"), answers([1.0] * 10, first=10, epoch="e1"))
    with pytest.raises(ValueError, match="several epochs of m: e0, e1"):
        one(DROP, frame(answers([1.0] * 10)), before)


# ----------------------------------------------------------------------------- min_effective_length


def curve(at_32000: list[float]) -> pl.DataFrame:
    return frame(
        answers([100.0] * 10, length=8000),
        answers([90.0] * 10, length=16000),
        answers(at_32000, length=32000),
    )


def test_min_effective_length_uses_rulers_rule_at_its_threshold() -> None:
    """Means 100, 90, 50 at 8K, 16K, 32K: at 85.6 the effective length is 16000."""
    failed = one({"probe": "recall", "min_effective_length": 32000}, curve([50.0] * 10))
    assert failed.status == FAILED
    unit = effective(failed)
    assert (unit.effective_length, unit.effective_length_hi, unit.longest_tested) == (
        16000,
        16000,
        32000,
    )
    assert failed.message == (
        "gate recall min_effective_length 32000 failed: model m: effective length 16000 tokens"
        " at 85.6 (by the intervals' upper bounds 16000), below 32000"
    )
    assert one({"probe": "recall", "min_effective_length": 16000}, curve([50.0] * 10)).status == (
        PASSED
    )
    own = {"probe": "recall", "min_effective_length": 32000, "threshold": 40}
    assert one(own, curve([50.0] * 10)).status == PASSED
    # Between tested lengths: 20000 needs 32000 to hold, as 16000 < 20000.
    assert one({"probe": "recall", "min_effective_length": 20000}, curve([50.0] * 10)).failed


def test_an_effective_length_short_by_noise_only_passes() -> None:
    result = one({"probe": "recall", "min_effective_length": 32000}, curve(NOISY))
    assert result.status == PASSED
    unit = effective(result)
    assert unit.effective_length == 16000 and unit.effective_length_hi == 32000
    assert "effective length 16000 tokens at 85.6 (by the intervals' upper bounds 32000)" in (
        result.message
    )


def test_an_effective_length_without_the_lengths_to_judge_is_not_enough_data() -> None:
    short = one({"probe": "recall", "min_effective_length": 64000}, curve([50.0] * 10))
    assert short.status == NOT_ENOUGH_DATA
    assert short.message.endswith("no length of at least 64000 tokens tested (longest 32000)")
    few = one({"probe": "recall", "min_effective_length": 32000}, curve([50.0] * 4))
    assert few.status == NOT_ENOUGH_DATA
    assert few.message.endswith("at 32000 tokens: 4 answers (10 needed)")


# ----------------------------------------------------------------------------- counts


def test_max_invalid_rate_counts_invalid_answers_of_all_answers() -> None:
    now = frame(
        answers([100.0] * 43),
        answers([0.0] * 5, validity="truncated", first=100),
        answers([None] * 2, validity="empty", first=200),
        answers([None] * 30, error="timeout", first=300),  # failed requests are no answers
    )
    result = one({"max_invalid_rate": 0.05}, now)
    assert result.status == FAILED
    assert result.figures == CountFigures(7, 50, {"truncated": 5, "empty": 2})
    assert result.message == (
        "gate max_invalid_rate 0.05 failed: model m: 7 of 50 answers invalid (rate 0.140;"
        " truncated 5, empty 2), above 0.05"
    )
    at_limit = frame(answers([100.0] * 19), answers([0.0], validity="refused", first=50))
    assert one({"max_invalid_rate": 0.05}, at_limit).status == PASSED  # 1/20 is not above 0.05
    assert one({"max_invalid_rate": 0.05}, frame(answers([1.0] * 9))).status == NOT_ENOUGH_DATA


def test_a_count_gate_naming_no_probe_counts_every_probe_together() -> None:
    now = frame(
        answers([100.0] * 4),
        answers([0.0], validity="truncated", first=10),
        answers([1.0] * 5, probe="counting_stars"),
    )
    (result,) = judge([{"max_invalid_rate": 0.05}], now)
    assert result.probe is None and result.figures == CountFigures(1, 10, {"truncated": 1})
    assert result.status == FAILED
    scoped = one({"probe": "counting_stars", "max_invalid_rate": 0.05}, now)
    assert scoped.status == NOT_ENOUGH_DATA and scoped.probe == "counting_stars"


def test_max_failed_cells_counts_failed_requests() -> None:
    now = frame(
        answers([100.0] * 37),
        answers([None] * 2, error="timeout", first=100),
        answers([None], error="server_error", first=200),
    )
    result = one({"max_failed_cells": 0}, now)
    assert result.status == FAILED
    assert result.figures == CountFigures(3, 40, {"timeout": 2, "server_error": 1})
    assert result.message == (
        "gate max_failed_cells 0 failed: model m: 3 of 40 cells failed (timeout 2,"
        " server_error 1), more than 0"
    )
    assert one({"max_failed_cells": 3}, now).status == PASSED
    # A count is a fact at any size: one failed cell of two fails a limit of 0.
    assert one(
        {"max_failed_cells": 0}, frame(answers([1.0]), answers([None], error="auth", first=9))
    ).failed
    assert judge([{"max_failed_cells": 0}], frame(), models=["m"])[0].status == NOT_ENOUGH_DATA


# ----------------------------------------------------------------------------- the records


def test_results_are_json_able_and_say_how_the_run_ends() -> None:
    now = frame(answers([50.0] * 20), answers([None] * 2, error="timeout", first=100))
    before = frame(answers([100.0] * 20, epoch="e1"))
    results = judge([FLOOR, DROP, {"max_failed_cells": 0}, {"max_invalid_rate": 0.5}], now, before)
    assert [r.status for r in results] == [FAILED, FAILED, FAILED, PASSED]
    payload = json.loads(json.dumps([r.to_dict() for r in results]))
    assert payload[0]["gate"] == "recall min_accuracy 90" and payload[0]["index"] == 0
    assert payload[0]["figures"] == [
        {
            "length_unit": "tokens",
            "length": 8000,
            "answers": 20,
            "mean": 50.0,
            "lo": 50.0,
            "hi": 50.0,
            "interval_method": "bootstrap",
        }
    ]
    assert payload[1]["figures"]["drop"] == 50.0 and payload[1]["figures"]["previous_epoch"] == "e1"
    assert payload[2]["figures"] == {"count": 2, "total": 22, "why": {"timeout": 2}, "rate": 2 / 22}
    message = state_message(results)
    assert message is not None
    assert message.startswith("gate recall min_accuracy 90 failed: model m: at 8000 tokens")
    assert message.endswith(" (and 2 more failed gates)")
    assert exit_code(results) == 4
    assert state_message(results[3:]) is None and exit_code(results[3:]) == 0


def test_a_frame_without_the_needed_columns_is_refused() -> None:
    with pytest.raises(ValueError, match="results lacks columns: validity"):
        judge([FLOOR], frame(answers([1.0])).drop("validity"))
    with pytest.raises(ValueError, match="previous lacks columns: epoch"):
        judge([DROP], frame(answers([1.0])), frame(answers([1.0])).drop("epoch"))
