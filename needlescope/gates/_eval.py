"""Gate verdicts over a sweep's answers: rows of the warehouse's ``results`` view as a Polars
frame, one verdict per gate and model.

Accuracy figures count valid answers with an accuracy only. The interval of a mean is the
warehouse's own, handed in as ``interval`` (the core never imports the warehouse;
``warehouse/stats/gates.py`` binds it). Noise alone never fails a gate: a verdict fails only
when the whole interval is past the limit; fewer than ``min_answers`` answers (or pairs) is
``not enough data``.

Design: docs/design/gates.md#eval
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from needlescope.gates._config import (
    GateModel,
    MaxDropGate,
    MaxFailedCellsGate,
    MaxInvalidRateGate,
    MinAccuracyGate,
    MinEffectiveLengthGate,
)
from needlescope.gates._results import (
    FAILED,
    MIN_ANSWERS,
    NOT_ENOUGH_DATA,
    PASSED,
    CountFigures,
    DropFigures,
    EffectiveLengthFigures,
    Figures,
    GateResult,
    LengthFigure,
    interval,
    message,
    points,
    why,
)
from needlescope.grading import longest_sustained, validity

# (mean, lo, hi, method) of a series of accuracies: significance.mean_interval.
MeanInterval = Callable[[pl.Series], tuple[float, float, float, str | None]]
RESULT_COLUMNS = (
    "model",
    "probe",
    "cell_id",
    "length_unit",
    "length",
    "accuracy",
    "validity",
    "error_kind",
)
_COUNTED = sorted(validity.COUNTED)
_ANSWERED = pl.col("error_kind").is_null()
# No validity on an answer means nothing judged it: unknown, which counts (as in the views).
_VALID = _ANSWERED & (pl.col("validity").is_null() | pl.col("validity").is_in(_COUNTED))
_GRADED = _VALID & pl.col("accuracy").is_not_null() & pl.col("accuracy").is_not_nan()


def evaluate_gates(
    gates: Sequence[GateModel],
    results: pl.DataFrame,
    *,
    interval_of: MeanInterval,
    previous: pl.DataFrame | None = None,
    models: Sequence[str] | None = None,
    min_answers: int = MIN_ANSWERS,
) -> list[GateResult]:
    """One verdict per gate and model (per probe too, for an accuracy gate naming none).

    ``results``: one epoch's rows of the ``results`` view (:data:`RESULT_COLUMNS` at least).
    ``previous``: the rows ``max_drop`` pairs with, each model's (and probe's) previous epoch,
    with an ``epoch`` column; None when there is none. ``models``: whom to judge (default:
    every model in ``results``); a model with no answers gets ``not enough data``.
    """
    _check_columns(results, "results")
    if previous is not None:
        _check_columns(previous, "previous", ("epoch",))
    judged = list(models) if models is not None else sorted(results["model"].unique().to_list())
    verdicts: list[GateResult] = []
    for index, gate in enumerate(gates):
        for model in judged:
            rows = results.filter(pl.col("model") == model)
            for probe in _probes(gate, rows):
                scoped = rows if probe is None else rows.filter(pl.col("probe") == probe)
                before = None
                if previous is not None:
                    before = previous.filter(pl.col("model") == model)
                    if probe is not None:
                        before = before.filter(pl.col("probe") == probe)
                judge = _Judge(gate, index, model, probe, interval_of, min_answers)
                verdicts.append(judge(scoped, before))
    return verdicts


def _check_columns(frame: pl.DataFrame, name: str, extra: Sequence[str] = ()) -> None:
    missing = [c for c in (*RESULT_COLUMNS, *extra) if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks columns: {', '.join(missing)}")


def _probes(gate: GateModel, rows: pl.DataFrame) -> list[str | None]:
    """Accuracies of different probes do not pool: an accuracy gate naming no probe is judged
    per probe; a count gate naming none counts every probe's answers together."""
    if gate.probe is not None:
        return [gate.probe]
    if isinstance(gate, MaxInvalidRateGate | MaxFailedCellsGate):
        return [None]
    probes = sorted(rows["probe"].unique().drop_nulls().to_list())
    return list(probes) or [None]


class _Judge:
    def __init__(
        self,
        gate: GateModel,
        index: int,
        model: str,
        probe: str | None,
        interval_of: MeanInterval,
        min_answers: int,
    ) -> None:
        self.gate, self.index, self.model, self.probe = gate, index, model, probe
        self.interval_of, self.min_answers = interval_of, min_answers
        # The probe is in the label of a gate that names it; say it when judged per probe.
        self.subject = f"model {model}" + (
            f" ({probe})" if probe is not None and gate.probe is None else ""
        )

    def __call__(self, rows: pl.DataFrame, before: pl.DataFrame | None) -> GateResult:
        gate = self.gate
        if isinstance(gate, MinAccuracyGate):
            return self._min_accuracy(gate, rows)
        if isinstance(gate, MaxDropGate):
            return self._max_drop(gate, rows, before)
        if isinstance(gate, MinEffectiveLengthGate):
            return self._min_effective_length(gate, rows)
        if isinstance(gate, MaxInvalidRateGate):
            return self._max_invalid_rate(gate, rows)
        return self._max_failed_cells(gate, rows)

    def _result(self, status: str, detail: str, figures: Figures) -> GateResult:
        gate = self.gate
        return GateResult(
            index=self.index,
            gate=gate.label,
            kind=gate.kind,
            limit=gate.limit,
            model=self.model,
            probe=self.probe if self.probe is not None else gate.probe,
            status=status,
            message=message(gate.label, status, self.subject, detail),
            figures=figures,
        )

    # ------------------------------------------------------------------------- accuracy

    def _lengths(self, rows: pl.DataFrame, only: Sequence[int] | None) -> list[LengthFigure]:
        """Each length tested (or each of ``only``, tested or not), per length unit."""
        tested = sorted(
            set(rows.select("length_unit", "length").drop_nulls("length").iter_rows()),
            key=lambda k: (str(k[0]), k[1]),
        )
        keys = tested
        if only is not None:
            units = {unit for unit, _ in tested}
            # A listed length nobody answered is in the probe's unit, when it has one.
            default = next(iter(units)) if len(units) == 1 else None
            keys = []
            for length in sorted(set(only)):
                keys += [k for k in tested if k[1] == length] or [(default, length)]
        graded = rows.filter(_GRADED)
        figures = []
        for unit, length in keys:
            same_unit = (
                pl.col("length_unit").is_null() if unit is None else pl.col("length_unit") == unit
            )
            values = graded.filter(same_unit & (pl.col("length") == length))["accuracy"]
            if values.len() == 0:
                figures.append(LengthFigure(unit, int(length), 0, None, None, None))
                continue
            mean, lo, hi, method = self.interval_of(values.cast(pl.Float64))
            figures.append(LengthFigure(unit, int(length), values.len(), mean, lo, hi, method))
        return figures

    def _min_accuracy(self, gate: MinAccuracyGate, rows: pl.DataFrame) -> GateResult:
        figures = tuple(self._lengths(rows, gate.lengths))
        floor = gate.min_accuracy
        few = [f for f in figures if f.answers < self.min_answers]
        low = [
            f
            for f in figures
            if f.answers >= self.min_answers and f.hi is not None and f.hi < floor
        ]
        if low:
            detail = "; ".join(
                f"{f.where}: accuracy {points(f.mean)}, {interval(f.lo, f.hi)} below"
                f" {floor:g} ({f.answers} answers)"
                for f in low
            )
            return self._result(FAILED, detail, figures)
        if not figures:
            return self._result(NOT_ENOUGH_DATA, "no answers", figures)
        if few:
            return self._result(NOT_ENOUGH_DATA, self._too_few(few), figures)
        detail = "; ".join(
            f"accuracy {points(f.mean)} {f.where} ({interval(f.lo, f.hi)}, {f.answers} answers)"
            for f in figures
        )
        return self._result(PASSED, detail, figures)

    def _too_few(self, figures: Sequence[LengthFigure]) -> str:
        return "; ".join(
            f"{f.where}: {f.answers} answers ({self.min_answers} needed)" for f in figures
        )

    def _min_effective_length(self, gate: MinEffectiveLengthGate, rows: pl.DataFrame) -> GateResult:
        target, threshold = gate.min_effective_length, gate.threshold
        by_unit: dict[str | None, list[LengthFigure]] = {}
        for figure in self._lengths(rows, None):
            by_unit.setdefault(figure.length_unit, []).append(figure)
        units = tuple(
            EffectiveLengthFigures(
                length_unit=unit,
                threshold=threshold,
                effective_length=longest_sustained([(f.length, f.mean) for f in fs], threshold),
                effective_length_hi=longest_sustained([(f.length, f.hi) for f in fs], threshold),
                longest_tested=max(f.length for f in fs),
                lengths=tuple(fs),
            )
            for unit, fs in by_unit.items()
        )
        if not units:
            return self._result(NOT_ENOUGH_DATA, "no answers", units)
        verdicts = [self._effective_verdict(u, target) for u in units]
        for status in (FAILED, NOT_ENOUGH_DATA, PASSED):
            details = [d for s, d in verdicts if s == status]
            if details:
                return self._result(status, "; ".join(details), units)
        raise AssertionError("a verdict has a status")

    def _effective_verdict(self, unit: EffectiveLengthFigures, target: int) -> tuple[str, str]:
        in_unit = f" {unit.length_unit}" if unit.length_unit else ""
        if unit.longest_tested is None or unit.longest_tested < target:
            return NOT_ENOUGH_DATA, (
                f"no length of at least {target}{in_unit} tested (longest {unit.longest_tested})"
            )
        # The verdict rests on the lengths up to the first one that reaches the target.
        reach = min(f.length for f in unit.lengths if f.length >= target)
        few = [f for f in unit.lengths if f.length <= reach and f.answers < self.min_answers]
        found = (
            f"effective length {unit.effective_length}{in_unit} at {unit.threshold:g}"
            f" (by the intervals' upper bounds {unit.effective_length_hi})"
        )
        hi = unit.effective_length_hi
        if few and (hi is None or hi < target):
            return NOT_ENOUGH_DATA, self._too_few(few)
        if hi is None or hi < target:
            return FAILED, f"{found}, below {target}"
        return PASSED, found

    # ------------------------------------------------------------------------- drop

    def _max_drop(
        self, gate: MaxDropGate, rows: pl.DataFrame, before: pl.DataFrame | None
    ) -> GateResult:
        epochs = [] if before is None else before["epoch"].unique().drop_nulls().to_list()
        if before is None or not epochs:
            return self._result(
                NOT_ENOUGH_DATA, "no previous epoch to compare with", DropFigures(None, 0)
            )
        if len(epochs) > 1:
            raise ValueError(
                f"previous holds several epochs of {self.model}: {', '.join(sorted(epochs))}"
            )
        previous = str(epochs[0])
        for frame, side in ((rows, "results"), (before, "previous")):
            if frame["cell_id"].is_duplicated().any():
                raise ValueError(f"{side} has several answers of one cell of {self.model}")
        pairs = (
            before.filter(_GRADED)
            .select("cell_id", pl.col("accuracy").cast(pl.Float64).alias("before"))
            .join(
                rows.filter(_GRADED).select(
                    "cell_id", pl.col("accuracy").cast(pl.Float64).alias("now")
                ),
                on="cell_id",
            )
        )
        vs = f"vs epoch {previous}"
        if pairs.height < self.min_answers:
            detail = f"{pairs.height} pairs {vs} ({self.min_answers} needed)"
            return self._result(NOT_ENOUGH_DATA, detail, DropFigures(previous, pairs.height))
        diff, lo, hi, method = self.interval_of(pairs["now"] - pairs["before"])
        figures = DropFigures(
            previous_epoch=previous,
            pairs=pairs.height,
            mean_previous=float(pairs["before"].mean()),  # type: ignore[arg-type]
            mean_now=float(pairs["now"].mean()),  # type: ignore[arg-type]
            drop=-diff,
            drop_lo=-hi,
            drop_hi=-lo,
            interval_method=method,
        )
        said = (
            f"accuracy {points(figures.mean_previous)} → {points(figures.mean_now)} {vs}: drop"
            f" {points(figures.drop)} points ({interval(figures.drop_lo, figures.drop_hi)},"
            f" {pairs.height} pairs)"
        )
        if figures.drop_lo is not None and figures.drop_lo > gate.max_drop:
            return self._result(FAILED, f"{said}, all above {gate.max_drop:g}", figures)
        return self._result(PASSED, said, figures)

    # ------------------------------------------------------------------------- counts

    def _max_invalid_rate(self, gate: MaxInvalidRateGate, rows: pl.DataFrame) -> GateResult:
        answers = rows.filter(_ANSWERED)
        invalid = answers.filter(~_VALID)
        figures = CountFigures(
            invalid.height, answers.height, _histogram(invalid["validity"].fill_null("unknown"))
        )
        if answers.height < self.min_answers:
            detail = f"{answers.height} answers ({self.min_answers} needed)"
            return self._result(NOT_ENOUGH_DATA, detail, figures)
        rate = invalid.height / answers.height
        said = f"{invalid.height} of {answers.height} answers invalid (rate {rate:.3f}"
        said += f"; {why(figures.why)})" if figures.why else ")"
        if rate > gate.max_invalid_rate:
            return self._result(FAILED, f"{said}, above {gate.max_invalid_rate:g}", figures)
        return self._result(PASSED, said, figures)

    def _max_failed_cells(self, gate: MaxFailedCellsGate, rows: pl.DataFrame) -> GateResult:
        failed = rows.filter(~_ANSWERED)
        figures = CountFigures(failed.height, rows.height, _histogram(failed["error_kind"]))
        if rows.height == 0:
            return self._result(NOT_ENOUGH_DATA, "no cells", figures)
        said = f"{failed.height} of {rows.height} cells failed"
        said += f" ({why(figures.why)})" if figures.why else ""
        if failed.height > gate.max_failed_cells:
            return self._result(FAILED, f"{said}, more than {gate.max_failed_cells}", figures)
        return self._result(PASSED, said, figures)


def _histogram(values: pl.Series) -> dict[str, int]:
    counts = values.cast(pl.Utf8).value_counts()
    return {str(k): int(n) for k, n in counts.iter_rows()}
