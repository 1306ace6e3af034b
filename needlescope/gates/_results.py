"""A gate's verdict for one model: a typed record with its figures and a one-line message.

The message leads with the gate (``gate recall min_accuracy 90 failed: …``) so a flow run's
state message, an alert and the CLI all say the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

PASSED = "passed"
FAILED = "failed"
NOT_ENOUGH_DATA = "not enough data"
STATUSES = (PASSED, FAILED, NOT_ENOUGH_DATA)
# Fewer answers (or pairs) than this behind a gate tell nothing: listed, never failed.
MIN_ANSWERS = 10
# `needlescope run` / `needlescope gates` exit code when a gate failed.
GATE_FAILED_EXIT = 4
GATE_FAILED_EVENT = "needlescope.gate.failed"
FAILED_CELLS_EVENT = "needlescope.sweep.failed-cells"


@dataclass(frozen=True)
class LengthFigure:
    """The valid graded answers at one length, pooled over the other axes: their mean and
    the 95% interval of the mean (None without answers)."""

    length_unit: str | None
    length: int
    answers: int
    mean: float | None
    lo: float | None
    hi: float | None
    interval_method: str | None = None

    @property
    def where(self) -> str:
        return f"at {self.length} {self.length_unit}" if self.length_unit else f"at {self.length}"


@dataclass(frozen=True)
class DropFigures:
    """Pairs of cells answered (valid, graded) in both epochs; drop = previous - now, in
    points, with the paired bootstrap interval of the mean drop."""

    previous_epoch: str | None
    pairs: int
    mean_previous: float | None = None
    mean_now: float | None = None
    drop: float | None = None
    drop_lo: float | None = None
    drop_hi: float | None = None
    interval_method: str | None = None


@dataclass(frozen=True)
class EffectiveLengthFigures:
    """RULER's absolute rule at ``threshold`` over one length unit: the effective length by
    the means, and by the intervals' upper bounds (what the gate judges)."""

    length_unit: str | None
    threshold: float
    effective_length: int | None
    effective_length_hi: int | None
    longest_tested: int | None
    lengths: tuple[LengthFigure, ...] = ()


@dataclass(frozen=True)
class CountFigures:
    """``count`` of ``total`` (invalid answers of all answers, failed cells of all cells),
    with what they were (validity or error kind → how many)."""

    count: int
    total: int
    why: Mapping[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return self.count / self.total if self.total else None


Figures = tuple[LengthFigure, ...] | DropFigures | tuple[EffectiveLengthFigures, ...] | CountFigures


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict for one model (and probe: a gate without one that is about
    accuracy is judged per probe)."""

    index: int  # the gate's place in the config's list
    gate: str  # its label: "recall min_accuracy 90"
    kind: str
    limit: float
    model: str
    probe: str | None
    status: str
    message: str
    figures: Figures

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (NaN as None): the sweep's result entry and the alert's payload."""
        out = {k: v for k, v in asdict(self).items() if k != "figures"}
        out["figures"] = _jsonable(self.figures)
        if isinstance(self.figures, CountFigures):
            out["figures"]["rate"] = self.figures.rate
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def failed_results(results: Iterable[GateResult]) -> list[GateResult]:
    return [r for r in results if r.failed]


def state_message(results: Iterable[GateResult]) -> str | None:
    """The flow run's Failed message: the first failed gate's, and how many more failed;
    None when no gate failed."""
    failed = failed_results(results)
    if not failed:
        return None
    more = len(failed) - 1
    return failed[0].message + (f" (and {more} more failed gate{'s' * (more > 1)})" if more else "")


def exit_code(results: Iterable[GateResult]) -> int:
    return GATE_FAILED_EXIT if failed_results(results) else 0


# ----------------------------------------------------------------------------- wording


def points(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.1f}"


def interval(lo: float | None, hi: float | None) -> str:
    return f"95% interval {points(lo)} to {points(hi)}"


def why(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def message(label: str, status: str, subject: str, detail: str) -> str:
    return f"gate {label} {status}: {subject}: {detail}"
