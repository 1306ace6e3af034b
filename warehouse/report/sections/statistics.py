"""The report's statistics: accuracy with intervals per model, effective context length,
drift between epochs and unstable cells, from :mod:`needlescope.warehouse.stats`.

Accuracy is the mean over the parsed answers with a bootstrap 95% interval (normal above
``intervals.BOOTSTRAP_MAX_N`` answers), rates with Wilson intervals; effective context length
is RULER's rule, all needle counts pooled; drift compares the latest epoch with the previous
one, paired by cell; unstable cells span more than the spread. The page states the definitions.

Design: docs/design/report.md#statistics
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from needlescope.grading import SEED_THRESHOLD, default_threshold, ruler_family
from needlescope.warehouse.report.html import (
    anchor,
    esc,
    failed,
    interval,
    number,
    p_value,
    table,
)
from needlescope.warehouse.report.sections.ruler_stats import ruler_effective
from needlescope.warehouse.stats import accuracy, drift, intervals, tallied
from needlescope.warehouse.stats import epochs as epoch_sets
from needlescope.warehouse.stats.gates import serving_changes
from needlescope.warehouse.store import figures

MAX_UNSTABLE_ROWS = 100


def _pct(value: object) -> str:
    return number(value * 100 if isinstance(value, float) else value, 1)


def model_summary(con: duckdb.DuckDBPyConnection, probe: str, *, seed: int = 0) -> str:
    """Accuracy with its 95% interval and the answers behind it, per model of ``probe``."""
    try:
        frame = accuracy.accuracy_table(con, probe=probe, axes=("model",), seed=seed)
    except (duckdb.Error, ValueError) as exc:
        return failed("the accuracy intervals", exc)
    if frame.is_empty():
        return ""
    rows = []
    for r in frame.iter_rows(named=True):
        rows.append(
            [
                r["model"],
                number(r["answers"]),
                number(r["graded"]),
                number(r["mean_accuracy"]),
                interval(r["accuracy_lo"], r["accuracy_hi"]),
                r["interval_method"] or "",
                number(r["needles"]),
                _pct(r["needle_hit_rate"]),
                interval(r["needle_hit_lo"], r["needle_hit_hi"], scale=100),
                number(r["parse_failures"]),
                _pct(r["parse_failure_rate"]),
                interval(r["parse_failure_lo"], r["parse_failure_hi"], scale=100),
                number(r["errors"]),
                number(r["invalid"]),
                r["invalid_why"] or "",
            ]
        )
    headers = [
        "model",
        "answers",
        "parsed (n)",
        "mean accuracy",
        "95% interval",
        "method",
        "needles",
        "needle hits (%)",
        "95% interval",
        "parse failures",
        "rate (%)",
        "95% interval",
        "failed requests",
        "invalid answers",
        "why invalid",
    ]
    numeric = [h not in ("model", "method", "why invalid") for h in headers]
    return (
        "<h4>Accuracy with 95% intervals</h4>"
        "<p class='muted'>mean accuracy of the valid parsed answers (n) with its bootstrap 95% "
        "interval "
        "(normal above "
        f"{intervals.BOOTSTRAP_MAX_N:,} answers); needle hits and parse failures with Wilson "
        "95% intervals (the needles of one answer are not independent: their interval is "
        "optimistic)</p>"
        + table(headers, rows, numeric=numeric, table_id=f"accuracy-intervals-{anchor(probe)}")
    )


def _length(value: object) -> str:
    return "none" if value is None else number(value)


def _effective(con: duckdb.DuckDBPyConnection, probe: str, threshold: float, seed: int) -> str:
    try:
        frame = accuracy.effective_lengths(con, probe=probe, threshold=threshold, seed=seed)
    except (duckdb.Error, ValueError) as exc:
        return failed("effective context lengths", exc)
    if frame.is_empty():
        return "<p class='muted'>No answers.</p>"
    rows = []
    for r in frame.iter_rows(named=True):
        rows.append(
            [
                r["model"],
                r.get("length_unit") or "",
                _length(r["effective_length"]),
                _length(r["effective_length_lo"]),
                _length(r["effective_length_hi"]),
                number(r["lengths_tested"]),
                number(r["longest_tested"]),
                number(r.get("invalid")),
            ]
        )
    headers = [
        "model",
        "unit",
        "effective length",
        "by the lower bounds",
        "by the upper bounds",
        "lengths tested",
        "longest tested",
        "invalid answers",
    ]
    return (
        table(headers, rows, numeric=[False, False, True, True, True, True, True, True])
        + "<p class='muted'>none: below the threshold already at the shortest length tested</p>"
    )


def result_probes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The probes ``results`` has rows of (views.sql's result_attempts: deriving `results`
    would pick every attempt)."""
    return epoch_sets.probes(con)


def latest_epoch(con: duckdb.DuckDBPyConnection, probe: str) -> str | None:
    """The epoch of ``probe``'s results that started last (by its first run, else answers)."""
    # The epochs with results (views.sql: result_attempts) and their starts; only epochs that
    # tie on the start are told apart by their answers in results (an epoch filter reaches
    # below results' window: those epochs' rows only).
    found = con.execute(
        """
        WITH starts AS (SELECT epoch, min(started_at) AS started_at FROM runs GROUP BY epoch),
        seen AS (SELECT unnest($seen::VARCHAR[]) AS epoch)
        SELECT e.epoch, s.started_at FROM seen e LEFT JOIN starts s USING (epoch)
        ORDER BY s.started_at DESC NULLS LAST
        """,
        {"seen": epoch_sets.seen(con, probe)},
    ).fetchall()
    if not found:
        return None
    tied = [str(e) for e, started in found if started == found[0][1]]
    if len(tied) == 1:
        return tied[0]
    rows = con.execute(
        """
        SELECT epoch FROM results WHERE probe = $probe AND list_contains($epochs, epoch)
        GROUP BY epoch ORDER BY max(answered_at) DESC NULLS LAST, epoch LIMIT 1
        """,
        {"probe": probe, "epochs": tied},
    ).fetchall()
    return str(rows[0][0]) if rows else None


def _drift(con: duckdb.DuckDBPyConnection, probe: str, seed: int) -> str:
    try:
        epoch = latest_epoch(con, probe)
        summary = drift.drift_summary(con, epoch, seed, probe=probe) if epoch else []
        # What changed in what served each model: the likely cause of a drift beside it.
        changes = serving_changes(con, epoch) if epoch else {}
    except (duckdb.Error, ValueError) as exc:
        return failed("drift", exc)
    if not summary:
        return "<p class='muted'>No epochs.</p>"
    rows, classes = [], []
    for d in summary:
        rows.append(
            [
                d["model"],
                d["previous"] or "(none of the same config)",
                d["epoch"],
                number(d["n_pairs"]),
                number(d["dropped_invalid"]),
                number(d["mean_previous"]),
                number(d["mean_now"]),
                number(d["diff"]),
                interval(d["lo"], d["hi"], sep=" to "),
                p_value(d["mcnemar_p"]),
                "drift" if d["drift"] else "",
                "; ".join(changes.get(d["model"], [])),
            ]
        )
        classes.append("drift" if d["drift"] else "")
    headers = [
        "model",
        "previous epoch",
        "epoch",
        "pairs",
        "left out: invalid",
        "before",
        "now",
        "now − before",
        "95% interval",
        "McNemar p",
        "flag",
        "serving changes",
    ]
    numeric = [False, False, False, True, True, True, True, True, True, True, False, False]
    return table(
        headers, rows, numeric=numeric, row_classes=classes, table_id=f"drift-{anchor(probe)}"
    )


def _unstable(con: duckdb.DuckDBPyConnection, probe: str, spread: float) -> str:
    try:
        frame = tallied.unstable_configs(con, probe, spread)
    except (duckdb.Error, ValueError) as exc:
        return failed("unstable cells", exc)
    if frame.is_empty():
        return f"<p class='muted'>No cell config spans more than {spread:g} points.</p>"
    axes = [a for a in figures.CONFIG_AXES if a in ("model", "length") or frame[a].n_unique() > 1]
    shown = frame.sort("accuracy_range", descending=True).head(MAX_UNSTABLE_ROWS)
    rows = []
    for r in shown.iter_rows(named=True):
        # every epoch's answers: each accuracy with how many answers have it
        values = [f"{v['accuracy']:.0f} ×{v['n']:,}" for v in r["valued"] or []]
        rows.append(
            [
                *(
                    number(r[a]) if a == "length" else str(r[a] if r[a] is not None else "")
                    for a in axes
                ),
                number(r["epochs"]),
                number(r["repeats"]),
                number(r["graded"]),
                number(r["invalid"]),
                number(r["min_accuracy"]),
                number(r["max_accuracy"]),
                number(r["accuracy_range"]),
                ", ".join(values[:20]) + (" …" if len(values) > 20 else ""),
            ]
        )
    headers = [a.replace("_", " ") for a in axes]
    headers += [
        "epochs",
        "repeats",
        "parsed",
        "invalid",
        "min",
        "max",
        "spread",
        "accuracies × answers",
    ]
    numeric = [a == "length" for a in axes] + [True] * 7 + [False]
    more = frame.height - shown.height
    note = f"<p class='muted'>… and {more} more (the widest spreads are shown).</p>" if more else ""
    return table(headers, rows, numeric=numeric, table_id=f"unstable-{anchor(probe)}") + note


def section(
    con: duckdb.DuckDBPyConnection,
    probes: Sequence[str],
    *,
    threshold: float | None,
    spread: float,
    seed: int = 0,
) -> str:
    """The "Statistics" section: effective lengths, drift and unstable cells per probe.
    ``threshold``: the effective length's; None: each probe's default (RULER's 85.6 for its
    probes, which also get NoLiMa's relative rule; 85 for the others)."""
    if not probes:
        return ""
    limit = SEED_THRESHOLD if threshold is None else threshold  # the seed probes'
    body = [
        "<section id='statistics'><h2>Statistics</h2>",
        "<p class='muted'><b>Effective context length</b>: the longest length L at which mean "
        f"accuracy is at least {limit:g}% at L and at every shorter length tested (all needle "
        "counts pooled); its range applies the same rule to the lower and upper bounds of each "
        "length's bootstrap 95% interval. <b>Drift</b>: each model's answers in the latest epoch "
        "against the previous epoch of the same config, paired by cell; flagged when the paired "
        "bootstrap 95% interval of the difference excludes 0; beside it, what changed in what "
        "served the model (its version, backend, sampling sent, prompt template, local model "
        "file, chat template, llama.cpp). <b>Unstable cells</b>: cell "
        f"configs whose parsed answers (repeats and epochs) span more than {spread:g} accuracy "
        "points. All of them are over valid answers: an answer that was truncated, ran out of "
        "thinking budget, was refused or filtered is counted apart (invalid), never as a "
        "model that forgot.</p>",
    ]
    for probe in probes:
        chosen = default_threshold(probe) if threshold is None else threshold
        body += [
            f"<h3>{esc(probe)}</h3>",
            f"<h4>Effective context length (threshold {chosen:g}%)</h4>",
            (
                ruler_effective(con, probe, chosen, seed)
                if ruler_family(probe)
                else _effective(con, probe, chosen, seed)
            ),
            "<h4>Drift</h4>",
            _drift(con, probe, seed),
            "<h4>Unstable cells</h4>",
            _unstable(con, probe, spread),
        ]
    body.append("</section>")
    return "\n".join(body)


__all__ = ["latest_epoch", "model_summary", "result_probes", "section"]
