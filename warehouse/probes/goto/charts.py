"""Goto chart builders: a frame from the goto_* views in, an Altair chart out. No I/O here.
A builder past 60 lines is one declarative chart spec, kept whole so it reads as its chart."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.charts.shared import Chart

ORDERS = ["ordered", "shuffled"]
NO_WRONG = "No wrong answers that name a value: nothing to chart."


def _block_orders(frame: pl.DataFrame) -> pl.DataFrame:
    """A block shuffle is an order of its own: "shuffled in blocks of 10" beside "shuffled"."""
    if "shuffle_block" not in frame.columns:
        return frame
    blocks = pl.format("shuffled in blocks of {}", pl.col("shuffle_block"))
    return frame.with_columns(
        pl.when(pl.col("shuffle_block").is_not_null())
        .then(blocks)
        .otherwise(pl.col("order"))
        .alias("order")
    )


def _orders(frame: pl.DataFrame) -> list[str]:
    """The orders in the frame: ordered, shuffled, then the block shuffles by block size."""
    present = set(frame["order"].unique().to_list())
    blocks = sorted(present - set(ORDERS), key=lambda o: int(o.rsplit(" ", 1)[-1]))
    return [o for o in ORDERS if o in present] + blocks


def _n_axis(ns: list[int]) -> alt.X:
    """n on a log scale once it spans 16× or more, with a tick at every n tested."""
    wide = len(ns) > 1 and ns[0] > 0 and ns[-1] / ns[0] >= 16
    scale = alt.Scale(type="log", nice=False) if wide else alt.Scale(zero=False, nice=False)
    axis = alt.Axis(values=ns if len(ns) <= 12 else alt.Undefined, format="d", labelAngle=0)
    return alt.X("n:Q", title="lines in the file (n)", scale=scale, axis=axis)


def success_by_n(
    frame: pl.DataFrame,
    *,
    title: str = "Goto: success rate by number of lines",
    subtitle: str | None = "exact answers over all answers, with a 95% Wilson interval",
) -> Chart:
    """One line per model × order (a goto_success frame); dashed lines for shuffled files."""
    data = _block_orders(frame.filter(pl.col("success_rate").is_not_null()))
    if data.is_empty():
        return charts.placeholder(title, "No answers yet: nothing to chart.", subtitle)
    if "instruction_at" in data.columns:
        where = pl.format("instruction at {}", pl.col("instruction_at"))
        data = data.with_columns(where.alias("instruction_at"))
    extra = charts.varying(data, ["prompt_version", "instruction_at"])
    data = charts.with_label(data, ["model", *extra], "series").select(
        "series",
        "model",
        "n",
        "order",
        "prompt_version",
        "answers",
        "successes",
        "parse_failures",
        "success_rate",
        "ci95_low",
        "ci95_high",
        *(c for c in charts.INVALID if c in data.columns),
    )
    ns = sorted(data["n"].unique().to_list())
    y_scale = alt.Scale(domain=[0, 1])
    color = alt.Color("series:N", title="model", legend=alt.Legend(labelLimit=320))
    dash = alt.StrokeDash(
        "order:N", sort=_orders(data), title="lines", legend=alt.Legend(symbolSize=400)
    )
    base = alt.Chart().encode(x=_n_axis(ns), color=color)
    y = alt.Y("success_rate:Q", title="success rate", axis=alt.Axis(format="%"), scale=y_scale)
    tooltip: list[Any] = [
        "model:N",
        "order:N",
        "prompt_version:N",
        "n:Q",
        "answers:Q",
        "successes:Q",
        "parse_failures:Q",
        alt.Tooltip("success_rate:Q", format=".0%"),
        alt.Tooltip("ci95_low:Q", format=".0%"),
        alt.Tooltip("ci95_high:Q", format=".0%"),
        *(["invalid:Q", "invalid_why:N"] if "invalid" in data.columns else []),
    ]
    layers = [
        base.mark_errorbar(ticks=True, opacity=0.5).encode(
            y=alt.Y("ci95_low:Q", scale=y_scale, title="success rate"),
            y2="ci95_high:Q",
            detail="order:N",
        ),
        base.mark_line().encode(y=y, strokeDash=dash),
        base.mark_circle(size=40, opacity=1).encode(y=y, tooltip=tooltip),
    ]
    return alt.LayerChart(data=data, layer=layers).properties(
        title=alt.TitleParams(title, subtitle=subtitle or "", anchor="start"),
        width=charts.WIDTH,
        height=charts.HEIGHT,
    )


def wrong_offsets(
    frame: pl.DataFrame,
    *,
    x: str = "offset",
    title: str = "Goto: where wrong answers came from",
    subtitle: str | None = None,
) -> Chart:
    """Histogram of answered line − k over the wrong answers (a goto_wrong_offsets frame), a
    panel per model and order; ``x="shown_offset"`` counts rows apart in the file as shown."""
    frame = _block_orders(frame)
    unplaced = frame.filter(pl.col(x).is_null()).height
    if subtitle is None:
        what = "answered line − k" if x == "offset" else "rows from line k to the answered line"
        subtitle = f"{what}; {unplaced} wrong answer(s) named a value found on no line"
    data = frame.filter(pl.col(x).is_not_null())
    if data.is_empty():
        return charts.placeholder(title, NO_WRONG, subtitle)
    reach = int(data[x].abs().max())  # type: ignore[arg-type]
    width = max(1, -(-reach // 30))  # one bar per offset up to ±30, then bins as wide as needed
    bins = (
        data.with_columns(low=(pl.col(x) // width) * width)
        .group_by("model", "order", "low")
        .agg(pl.len().alias("answers"))
        .with_columns(
            start=pl.col("low") - 0.5,
            end=pl.col("low") + width - 0.5,
            offsets=pl.format("{} to {}", "low", pl.col("low") + width - 1)
            if width > 1
            else pl.col("low").cast(pl.Utf8),
        )
    )
    edge = -(-reach // width) * width + 0.5
    x_axis = alt.X(
        "start:Q",
        title=x.replace("_", " "),
        scale=alt.Scale(domain=[-edge, edge], nice=False),
        axis=alt.Axis(format="d", tickMinStep=1),
    )
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x_axis,
            x2="end:Q",
            y=alt.Y("answers:Q", title="wrong answers", axis=alt.Axis(format="d", tickMinStep=1)),
            y2=alt.datum(0),  # x and x2 alone would make Vega-Lite draw horizontal bars
            color=alt.Color("order:N", sort=_orders(data), title="lines", legend=None),
            tooltip=["model:N", "order:N", alt.Tooltip("offsets:N", title=x), "answers:Q"],
        )
    )
    line_k = alt.Chart().mark_rule(color="#999", strokeDash=[3, 3]).encode(x=alt.datum(0))
    layered = alt.LayerChart(data=bins, layer=[bars, line_k]).properties(
        width=charts.PANEL_WIDTH, height=charts.PANEL_HEIGHT
    )
    models = sorted(bins["model"].unique().to_list())
    return layered.facet(
        column=alt.Column("model:N", sort=models, title=None),
        row=alt.Row("order:N", sort=_orders(bins), title=None),
    ).properties(title=alt.TitleParams(title, subtitle=subtitle, anchor="start"))
