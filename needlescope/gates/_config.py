"""Regression gates: a config's ``gates:``, one line of intent each.

A gate names one limit (its kind) and may name its probe; accuracies, floors and drops are in
points (0-100), the invalid rate a share (0-1); :mod:`needlescope.gates._eval` evaluates them::

    gates:
      - {probe: recall, min_accuracy: 90, lengths: [8000, 32000]}
      - {probe: recall, max_drop: 5, vs: previous}
      - {max_invalid_rate: 0.05}

Design: docs/design/gates.md#config
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from needlescope.config import FIELD_FIRST, Count, Frozen, format_location, one_line
from needlescope.errors import ConfigError
from needlescope.grading import RULER_THRESHOLD

MIN_ACCURACY = "min_accuracy"
MAX_DROP = "max_drop"
MIN_EFFECTIVE_LENGTH = "min_effective_length"
MAX_INVALID_RATE = "max_invalid_rate"
MAX_FAILED_CELLS = "max_failed_cells"
KINDS = (MIN_ACCURACY, MAX_DROP, MIN_EFFECTIVE_LENGTH, MAX_INVALID_RATE, MAX_FAILED_CELLS)

Points = Annotated[float, Field(ge=0, le=100, strict=True, allow_inf_nan=False)]
ProbeName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]


class _Gate(Frozen):
    probe: ProbeName | None = None

    kind: ClassVar[str]

    @property
    def limit(self) -> float:
        return float(getattr(self, self.kind))

    @property
    def label(self) -> str:
        """``recall min_accuracy 90``: how messages, events and the UI name the gate."""
        scope = f"{self.probe} " if self.probe else ""
        return f"{scope}{self.kind} {self.limit:g}"


class MinAccuracyGate(_Gate):
    """At each listed length (every length tested when none is listed), pooled over the
    other axes: fails when the upper bound of the mean's 95% interval is below the floor."""

    min_accuracy: Points
    lengths: list[Count] | None = Field(default=None, min_length=1)

    kind: ClassVar[str] = MIN_ACCURACY


class MaxDropGate(_Gate):
    """Paired by cell with the previous epoch of the same config: fails when the paired
    bootstrap interval of the drop (points) lies entirely above the limit."""

    max_drop: Points
    vs: Literal["previous"] = "previous"

    kind: ClassVar[str] = MAX_DROP


class MinEffectiveLengthGate(_Gate):
    """RULER's absolute rule at ``threshold`` (RULER's 85.6 by default)."""

    min_effective_length: Count
    threshold: Points = RULER_THRESHOLD

    kind: ClassVar[str] = MIN_EFFECTIVE_LENGTH


class MaxInvalidRateGate(_Gate):
    """Answers that do not measure recall (truncated, refused…) over all answers."""

    max_invalid_rate: Annotated[float, Field(strict=True, allow_inf_nan=False)]

    @field_validator("max_invalid_rate")
    @classmethod
    def _a_share(cls, value: float) -> float:
        if not 0 <= value <= 1:
            raise ValueError(f"{value:g} is not a share of answers: give 0 to 1 (0.05 is 5%)")
        return value

    kind: ClassVar[str] = MAX_INVALID_RATE


class MaxFailedCellsGate(_Gate):
    """Cells whose request failed after its retries (``error_kind`` set)."""

    max_failed_cells: Annotated[int, Field(ge=0, strict=True)]

    kind: ClassVar[str] = MAX_FAILED_CELLS


GateModel = (
    MinAccuracyGate | MaxDropGate | MinEffectiveLengthGate | MaxInvalidRateGate | MaxFailedCellsGate
)


def _kind_of(value: Any) -> str | None:
    if isinstance(value, _Gate):
        return value.kind
    if isinstance(value, dict):
        named = [k for k in KINDS if k in value]
        return named[0] if len(named) == 1 else None
    return None


def _one_limit(value: Any) -> Any:
    """A gate names exactly one limit: say which are known, or that two were given."""
    if isinstance(value, _Gate):
        return value
    if not isinstance(value, dict):
        raise ValueError("a gate is a mapping, such as {probe: recall, min_accuracy: 90}")
    named = [k for k in KINDS if k in value]
    if not named:
        raise ValueError(f"a gate names one limit: {', '.join(KINDS)}")
    if len(named) > 1:
        raise ValueError(f"a gate names one limit, this one {' and '.join(named)}: one gate each")
    return value


Gate = Annotated[
    Annotated[MinAccuracyGate, Tag(MIN_ACCURACY)]
    | Annotated[MaxDropGate, Tag(MAX_DROP)]
    | Annotated[MinEffectiveLengthGate, Tag(MIN_EFFECTIVE_LENGTH)]
    | Annotated[MaxInvalidRateGate, Tag(MAX_INVALID_RATE)]
    | Annotated[MaxFailedCellsGate, Tag(MAX_FAILED_CELLS)],
    Discriminator(_kind_of),
    BeforeValidator(_one_limit),
]


class Notify(Frozen):
    """``notify: {block: my-slack-webhook}``: the Prefect notification block (any kind: Slack,
    e-mail, a generic webhook) that failed gates and failed cells are sent to."""

    block: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=100)]


_GATES: TypeAdapter[list[GateModel]] = TypeAdapter(list[Gate])


def parse_gates(data: Any, source: str = "<config>") -> tuple[GateModel, ...]:
    """A config's ``gates:`` list, or a one-line ConfigError naming the file and field
    (``config.yaml: gates.1.max_drop.vs: Input should be 'previous'``), worded as
    ``config.parse_config`` words its errors."""
    if data is None:
        return ()
    try:
        return tuple(_GATES.validate_python(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        location = format_location(("gates", *first["loc"]))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field"
        if (named := FIELD_FIRST.match(message)) and first["type"] == "value_error":
            location = f"{location}.{named[1]}"
            message = message[named.end() :]
        raise ConfigError(one_line(f"{source}: {location}: {message}")) from None


def check_gate_probes(gates: Iterable[GateModel], probes: Iterable[str]) -> None:
    """A gate about a probe the config does not run can never be evaluated: a ValueError
    naming it (``gates.2.probe: …``), for the config's cross-checks."""
    known = sorted(set(probes))
    for index, gate in enumerate(gates):
        if gate.probe is not None and gate.probe not in known:
            raise ValueError(
                f"gates.{index}.probe: the config runs no probe {gate.probe!r};"
                f" it runs {', '.join(known) or 'none'}"
            )
