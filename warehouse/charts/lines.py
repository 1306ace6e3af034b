"""Line and bar charts of accuracy figures: accuracy and parse failures by length, accuracy by
filler (recall's, and any probe's that has such figures)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import polars as pl

from needlescope.warehouse.charts.shared import (
    ACCURACY_DOMAIN,
    HEIGHT,
    INVALID,
    PANEL_HEIGHT,
    PANEL_WIDTH,
    WIDTH,
    Chart,
    chart_title,
    facet,
    length_x,
    placeholder,
    series_color,
    slim,
    tooltips,
)


def _lines(
    frame: pl.DataFrame,
    *,
    x: str,
    y: str,
    y_axis: alt.Y,
    y_scale: alt.Scale,
    y_title: str,
    color: str,
    color_title: str,
    panel: str | None,
    dash: str | None,
    low: str | None,
    high: str | None,
    x_title: str,
    title: alt.TitleParams,
    tooltip: Sequence[str],
) -> Chart:
    frame = slim(frame, [x, y, low, high, color, panel, dash, *tooltip])
    width, height = (PANEL_WIDTH, PANEL_HEIGHT) if panel else (WIDTH, HEIGHT)
    encoding: dict[str, Any] = {
        "x": length_x(frame, x, x_title),
        "color": series_color(frame, color, color_title),
    }
    base = alt.Chart().encode(**encoding)
    line = base.mark_line().encode(y=y_axis)
    if dash:
        legend = alt.Legend(title=dash.replace("_", " "), symbolType="stroke", symbolSize=400)
        line = line.encode(strokeDash=alt.StrokeDash(f"{dash}:N", legend=legend))
    points = base.mark_circle(size=40, opacity=1).encode(y=y_axis, tooltip=tooltips(frame, tooltip))
    layers: list[alt.Chart] = [line, points]
    if low and high:
        data = frame.with_columns(
            pl.col(low).fill_null(pl.col(y)), pl.col(high).fill_null(pl.col(y))
        )
        band = base.mark_errorbar(ticks=True, opacity=0.6).encode(
            y=alt.Y(f"{low}:Q", scale=y_scale, title=y_title), y2=f"{high}:Q"
        )
        layers.insert(0, band)
    else:
        data = frame
    layered = alt.LayerChart(data=data, layer=layers).properties(width=width, height=height)
    return facet(layered, data, panel, title)


def accuracy_by_length(
    frame: pl.DataFrame,
    *,
    color: str = "model",
    panel: str | None = None,
    dash: str | None = None,
    x: str = "length",
    y: str = "mean_accuracy",
    low: str | None = "ci95_low",
    high: str | None = "ci95_high",
    x_title: str = "context length",
    color_title: str | None = None,
    title: str = "Average accuracy by length",
    subtitle: str | None = "mean of the valid parsed answers, with its 95% interval",
) -> Chart:
    """Mean accuracy by length, a line per ``color`` (and ``dash``) value, a panel per ``panel``."""
    data = frame.filter(pl.col(y).is_not_null())
    if data.is_empty():
        return placeholder(title, subtitle=subtitle)
    y_scale = alt.Scale(domain=list(ACCURACY_DOMAIN))
    y_title = "mean accuracy (%)"
    y_axis = alt.Y(f"{y}:Q", title=y_title, scale=y_scale)
    fields = [color, panel, dash, "model", x, "length_unit", "needle_count", "filler"]
    fields += ["prompt_version", y, low, high, "graded", "answers", "parse_failures", *INVALID]
    return _lines(
        data,
        x=x,
        y=y,
        y_axis=y_axis,
        y_scale=y_scale,
        y_title=y_title,
        color=color,
        color_title=color_title or color.replace("_", " "),
        panel=panel,
        dash=dash,
        low=low,
        high=high,
        x_title=x_title,
        title=chart_title(title, subtitle),
        tooltip=list(dict.fromkeys(f for f in fields if f)),
    )


def parse_failures_by_length(
    frame: pl.DataFrame,
    *,
    color: str = "model",
    panel: str | None = None,
    dash: str | None = None,
    x: str = "length",
    y: str = "parse_failure_rate",
    x_title: str = "context length",
    color_title: str | None = None,
    title: str = "JSON parse-failure probability by length",
    subtitle: str | None = "share of the valid answers with no parseable JSON object",
) -> Chart:
    data = frame.filter(pl.col(y).is_not_null())
    if data.is_empty():
        return placeholder(title, "No answers yet: nothing to chart.", subtitle)
    y_scale = alt.Scale(domain=[0, 1])
    y_title = "parse failures"
    y_axis = alt.Y(f"{y}:Q", title=y_title, axis=alt.Axis(format="%"), scale=y_scale)
    fields = [color, panel, dash, "model", x, "length_unit", "needle_count", "filler"]
    fields += ["prompt_version", y, "answers", "parse_failures", *INVALID]
    return _lines(
        data,
        x=x,
        y=y,
        y_axis=y_axis,
        y_scale=y_scale,
        y_title=y_title,
        color=color,
        color_title=color_title or color.replace("_", " "),
        panel=panel,
        dash=dash,
        low=None,
        high=None,
        x_title=x_title,
        title=chart_title(title, subtitle),
        tooltip=list(dict.fromkeys(f for f in fields if f)),
    )


def accuracy_by_filler(
    frame: pl.DataFrame,
    *,
    x: str = "model",
    group: str = "filler",
    y: str = "mean_accuracy",
    low: str | None = "ci95_low",
    high: str | None = "ci95_high",
    panel: str | None = None,
    title: str = "Accuracy by filler",
    subtitle: str | None = (
        "mean of the valid parsed answers over all lengths, with its 95% interval"
    ),
) -> Chart:
    """Grouped bars: one group per ``x`` value (a model), one bar per ``group`` (a filler)."""
    data = frame.filter(pl.col(y).is_not_null())
    if data.is_empty():
        return placeholder(title, subtitle=subtitle)
    fields = [x, group, panel, y, low, high, "graded", "answers", "parse_failures", *INVALID]
    data = slim(data, fields)
    bars = max(data.group_by(panel).len()["len"].to_list()) if panel else data.height
    width = max(160, min(900, 26 * bars + 20))
    scale = alt.Scale(domain=list(ACCURACY_DOMAIN))
    base = alt.Chart().encode(
        x=alt.X(f"{x}:N", title=None, axis=alt.Axis(labelAngle=-30, labelLimit=200)),
        xOffset=alt.XOffset(f"{group}:N"),
    )
    bar = base.mark_bar().encode(
        y=alt.Y(f"{y}:Q", title="mean accuracy (%)", scale=scale),
        color=alt.Color(f"{group}:N", title=group.replace("_", " ")),
        tooltip=tooltips(data, [f for f in dict.fromkeys(fields) if f]),
    )
    layers: list[alt.Chart] = [bar]
    if low and high:
        data = data.with_columns(
            pl.col(low).fill_null(pl.col(y)), pl.col(high).fill_null(pl.col(y))
        )
        layers.append(
            base.mark_rule(color="#333").encode(
                y=alt.Y(f"{low}:Q", scale=scale, title="mean accuracy (%)"), y2=f"{high}:Q"
            )
        )
    layered = alt.LayerChart(data=data, layer=layers).properties(width=width, height=260)
    return facet(layered, data, panel, chart_title(title, subtitle))
