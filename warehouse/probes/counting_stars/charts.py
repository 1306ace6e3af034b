"""Counting-Stars chart builders: a frame from the stars_* views in, an Altair chart out. No I/O.

The shared builders in charts.py draw the heatmap and the lines; this module only chooses
what the probe's axes (language, order, reasoning, M) become: panels, rows, series or bars.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from needlescope.warehouse.charts import lines
from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.charts.shared import Chart

# Axes that tell one Counting-Stars variant from another (beside the model and the length).
VARIANT_AXES = ("stars", "language", "order", "reasoning", "filler", "prompt_version")
SHARE_DOMAIN = (0.0, 1.0)
SCORE_NAMES = {
    "mean_over_lengths": "mean over lengths",
    "length_weighted_accuracy": "length-weighted",
}


def informative(frame: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns that vary, less those the earlier ones already determine (the filler and the
    prompt version usually follow the language): labels name each difference once."""
    kept: list[str] = []
    for column in charts.varying(frame, list(dict.fromkeys(columns))):
        groups = frame.select(kept).n_unique() if kept else 1
        if frame.select([*kept, column]).n_unique() > groups:
            kept.append(column)
    return kept


def label(frame: pl.DataFrame, columns: Sequence[str], name: str) -> pl.DataFrame:
    """Add ``name``: the values of ``columns`` as words ("en · shuffled · 8 stars")."""
    parts: list[pl.Expr] = []
    for column in columns:
        value = pl.col(column)
        if column == "stars":
            parts.append(pl.format("{} stars", value))
        elif column == "reasoning":
            parts.append(pl.when(value).then(pl.lit("reasoning")).otherwise(pl.lit("plain")))
        else:
            parts.append(value.cast(pl.Utf8).fill_null("–"))
    if not parts:
        return frame.with_columns(pl.lit("all").alias(name))
    return frame.with_columns(pl.concat_str(parts, separator=" · ").alias(name))


def variant_axes(frame: pl.DataFrame) -> list[str]:
    """The axes the star-index heatmap labels its blocks with (the drill-down labels the
    answers behind its cells with the same ones)."""
    return informative(frame, VARIANT_AXES)


def star_index_heatmap(
    frame: pl.DataFrame,
    *,
    value: str = "share_found",
    title: str = "Counting-Stars: stars found by position and length",
    subtitle: str | None = "share of the parsed answers that listed each star's count",
) -> Chart:
    """Star index (context order) × length, a panel per model, a block per varying variant."""
    axes = variant_axes(frame)
    data = label(frame, axes, "variant")
    return charts.heatmap(
        data,
        value=value,
        x="length",
        y="needle_index",
        panel="model",
        row="variant" if axes else None,
        domain=SHARE_DOMAIN,
        scheme="viridis",
        title=title,
        subtitle=subtitle,
        y_title="star (context order)",
        value_title="found" if value == "share_found" else value.replace("_", " "),
        value_format=".0%",
        tooltip=("answers", "found", "share_found", "mean_score"),
    )


def stars_accuracy_by_length(
    frame: pl.DataFrame,
    *,
    y: str = "mean_accuracy",
    title: str = "Counting-Stars: accuracy by length",
    subtitle: str | None = (
        "mean of the valid parsed answers; a line per model, order and language"
    ),
) -> Chart:
    """One line per model × order × language (and any other axis that varies)."""
    axes = informative(frame, ["model", "order", "language", *VARIANT_AXES])
    series = ["model", *(a for a in axes if a != "model")]
    return lines.accuracy_by_length(
        label(frame, series, "series"),
        color="series",
        y=y,
        low=None,
        high=None,
        title=title,
        subtitle=subtitle,
    )


def stars_weighted_scores(
    frame: pl.DataFrame,
    *,
    title: str = "Counting-Stars: overall score",
    subtitle: str | None = "plain mean over the lengths beside the length-weighted mean",
) -> Chart:
    """Two bars per model and variant (a stars_scores frame): plain and length-weighted."""
    data = frame.filter(pl.col("mean_over_lengths").is_not_null())
    if data.is_empty():
        return charts.placeholder(title, subtitle=subtitle)
    axes = ["model", *(a for a in informative(data, ["model", *VARIANT_AXES]) if a != "model")]
    data = label(data, axes, "entry").sort("entry")
    long = (
        data.select("entry", "lengths", "answers", *SCORE_NAMES)
        .unpivot(index=["entry", "lengths", "answers"], variable_name="score", value_name="value")
        .with_columns(
            pl.col("score").replace_strict(SCORE_NAMES, return_dtype=pl.Utf8),
            pl.col("value").round(2),
        )
    )
    scale = alt.Scale(domain=list(charts.ACCURACY_DOMAIN))
    entries = data["entry"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X(
                "entry:N", sort=entries, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=240)
            ),
            xOffset=alt.XOffset("score:N", sort=list(SCORE_NAMES.values())),
            y=alt.Y("value:Q", title="accuracy (%)", scale=scale),
            color=alt.Color("score:N", sort=list(SCORE_NAMES.values()), title=None),
            tooltip=["entry:N", "score:N", "value:Q", "lengths:Q", "answers:Q"],
        )
        .properties(
            title=alt.TitleParams(title, subtitle=subtitle or "", anchor="start"),
            width=max(160, min(900, 60 * len(entries) + 20)),
            height=260,
        )
    )
