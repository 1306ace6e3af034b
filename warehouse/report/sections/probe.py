"""A probe's section of the page: its overview, its model table, its charts and a table of
every cell config per model."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import polars as pl

from needlescope.warehouse.charts.shared import varying
from needlescope.warehouse.report.data import ProbeData
from needlescope.warehouse.report.html import anchor, frame_table
from needlescope.warehouse.stats import intervals
from needlescope.warehouse.store import figures

# Columns of the per-model tables in the page (the CSV and workbook keep every column).
METRICS = (
    "answers",
    "parse_failures",
    "errors",
    "invalid",
    "invalid_why",
    "mean_accuracy",
    "ci95",
    "parse_failure_ci95",
    "median_accuracy",
    "min_accuracy",
    "max_accuracy",
    "sd_accuracy",
    "accuracy_range",
    "unstable",
    "mean_latency_s",
)
HEADERS = {
    "needle_count": "needles",
    "prompt_version": "prompt",
    "mean_accuracy": "mean",
    "ci95": "95% interval",
    "parse_failure_ci95": "parse failures % (95%)",
    "median_accuracy": "median",
    "min_accuracy": "min",
    "max_accuracy": "max",
    "sd_accuracy": "sd",
    "accuracy_range": "range",
    "mean_latency_s": "latency (s)",
    "invalid": "invalid answers",
    "invalid_why": "why invalid",
}


INTERVALS_NOTE = (
    "95% intervals: the seeded percentile bootstrap of the mean "
    f"({intervals.DEFAULT_RESAMPLES:,} resamples; the normal interval above "
    f"{intervals.BOOTSTRAP_MAX_N:,} answers), Wilson for the parse-failure rate"
)


def _with_interval(frame: pl.DataFrame) -> pl.DataFrame:
    """The 95% interval as one "low–high" text column, for reading."""
    low, high = pl.col("ci95_low").round(1), pl.col("ci95_high").round(1)
    rate, lo, hi = (
        (pl.col(c) * 100).round(1)
        for c in ("parse_failure_rate", "parse_failure_lo", "parse_failure_hi")
    )
    return frame.with_columns(
        pl.format("{}–{}", low, high).alias("ci95"),
        pl.format("{} ({}–{})", rate, lo, hi).alias("parse_failure_ci95"),
    )


def _figure(name: str, empty: Mapping[str, str] | None = None) -> str:
    if empty and name in empty:  # no frame to draw: one line saying why
        return f"<p class='muted chart-empty' id='{name}'>{html.escape(empty[name])}</p>"
    return (
        f"<figure class='chart'><div class='vega' id='{name}'></div>"
        f"<figcaption><a href='{name}.png'>PNG</a> · <a href='{name}.svg'>SVG</a>"
        "</figcaption></figure>"
    )


def _overview(data: ProbeData) -> str:
    table = data.stats
    answers = int(table["answers"].sum())
    failures = int(table["parse_failures"].sum())
    errors = int(table["errors"].sum())
    invalid = int(table["invalid"].sum())
    lengths = table.group_by("length_unit").agg(
        pl.col("length").min().alias("lo"), pl.max("length")
    )
    spans = ", ".join(
        f"{lo:,}–{hi:,} {unit}" if lo != hi else f"{lo:,} {unit}"
        for unit, lo, hi in lengths.sort("length_unit").iter_rows()
    )
    unstable = int(table["unstable"].sum())
    return (
        f"<p>{table['model'].n_unique()} model(s) · {answers} valid answers, of which {failures} "
        f"did not parse · {invalid} invalid answer(s) (truncated, refused, …: not in the "
        f"figures) · {errors} failed request(s) · lengths {html.escape(spans)} · "
        f"{unstable} unstable config(s)</p>"
    )


def section(
    data: ProbeData,
    names: Sequence[str],
    unstable_range: float,
    extra: str = "",
    empty: Mapping[str, str] | None = None,
) -> str:
    probe = html.escape(data.probe)
    models = data.stats["model"].unique(maintain_order=True).to_list()
    unstable_per_model = data.stats.group_by("model").agg(
        pl.col("unstable").sum().alias("unstable_configs")
    )
    model_table = (
        _with_interval(data.models)
        .join(unstable_per_model, on="model", how="left")
        .select(
            "model",
            *[m for m in METRICS if m not in ("unstable", "accuracy_range")],
            "unstable_configs",
        )
    )
    links = " ".join(
        f"<a href='#{anchor(data.probe, 'model', m)}'>{html.escape(m)}</a>" for m in models
    )
    body = [
        f"<section id='{anchor('probe', data.probe)}'><h2>Probe: {probe}</h2>",
        _overview(data),
        f"<p class='muted'>models: {links}</p>",
        "<h3>Models</h3>",
        "<p class='muted'>all lengths pooled; accuracy (%) over the valid parsed answers "
        "(invalid answers — truncated, out of thinking budget, refused, filtered, … — counted "
        "apart); "
        f"{INTERVALS_NOTE}</p>",
        frame_table(model_table, HEADERS),
        extra,  # report_extras: accuracy with intervals, the drill-down hint
        "<h3>Charts</h3>",
        *(_figure(name, empty) for name in names),
    ]
    shown_axes = varying(data.stats, figures.AXES) or ["length"]
    if "length" not in shown_axes:
        shown_axes = ["length", *shown_axes]
    for model in models:
        rows = data.stats.filter(pl.col("model") == model)
        axes = [a for a in shown_axes if a not in ("probe", "model")]
        counts = ["epochs", "repeats"] if data.stats["epochs"].max() != 1 else ["repeats"]
        body += [
            f"<section id='{anchor(data.probe, 'model', model)}'>",
            f"<h3>{probe} · {html.escape(model)}</h3>",
            "<p class='muted'>one row per cell config; accuracy (%) over the valid parsed "
            "answers; "
            f"{INTERVALS_NOTE}; shaded rows are unstable (their repeats span more than "
            f"{unstable_range:g} points)</p>",
            frame_table(_with_interval(rows).select(*axes, *counts, *METRICS)),
            "</section>",
        ]
    body.append("</section>")
    return "\n".join(body)
