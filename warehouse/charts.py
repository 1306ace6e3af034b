"""Chart builders: a frame and column names in, an ``alt.Chart`` out. No I/O here."""

from __future__ import annotations

import altair as alt
import polars as pl

ACCURACY_SCALE = alt.Scale(domain=[0, 100])


def _series(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        (pl.col("model") + " · " + pl.col("needle_count").cast(pl.Utf8) + " needles").alias(
            "series"
        )
    )


def accuracy_by_length(frame: pl.DataFrame) -> alt.Chart:
    """Mean accuracy (parsed answers only) by length, one line per model and needle count."""
    data = _series(frame.filter(pl.col("graded") > 0)).with_columns(
        (pl.col("mean_accuracy") - pl.col("ci95_half_width").fill_null(0))
        .clip(0, 100)
        .alias("low"),
        (pl.col("mean_accuracy") + pl.col("ci95_half_width").fill_null(0))
        .clip(0, 100)
        .alias("high"),
    )
    base = alt.Chart(data).encode(
        x=alt.X("length:Q", title="context length"),
        color=alt.Color("series:N", title="model · needles"),
    )
    band = base.mark_errorbar().encode(y=alt.Y("low:Q", scale=ACCURACY_SCALE), y2="high:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean_accuracy:Q", title="mean accuracy (%)", scale=ACCURACY_SCALE),
        tooltip=[
            "model:N",
            "length:Q",
            "length_unit:N",
            "needle_count:Q",
            "filler:N",
            "prompt_version:N",
            alt.Tooltip("mean_accuracy:Q", format=".1f"),
            "answers:Q",
            "parse_failures:Q",
        ],
    )
    return (band + line).properties(
        title="Average accuracy by length (95% interval)", width=520, height=300
    )


def parse_failures_by_length(frame: pl.DataFrame) -> alt.Chart:
    data = _series(frame.filter(pl.col("answers") > 0))
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("length:Q", title="context length"),
            y=alt.Y(
                "parse_failure_rate:Q",
                title="JSON parse failures",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("series:N", title="model · needles"),
            tooltip=["model:N", "length:Q", "needle_count:Q", "answers:Q", "parse_failures:Q"],
        )
        .properties(title="Parse-failure probability by length", width=520, height=220)
    )
