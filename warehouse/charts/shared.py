"""Chart builders: a frame and column names in, an Altair chart out. No I/O here.
(``heatmap`` runs past 60 lines: one declarative spec, kept whole so it reads as its chart.)

Every builder copes with degenerate frames (no rows, one length, no parsed answer) by
returning a titled placeholder that says what is missing. Heatmaps put length on an
ordinal axis sorted numerically and draw one panel per ``panel`` value (a model), in rows
per ``row`` value (a variant), all on one explicit colour scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeAlias, cast

import altair as alt
import polars as pl
import polars.selectors as cs
from altair import Undefined

Chart: TypeAlias = alt.Chart | alt.LayerChart | alt.FacetChart | alt.VConcatChart

ACCURACY_DOMAIN = (0.0, 100.0)
# Ramps for error shares: zero is near white, so "none" never looks like "some".
REDS = ("#f7f7f7", "#fcae91", "#de2d26", "#67000d")
PURPLES = ("#f7f7f7", "#bcbddc", "#756bb1", "#3f007d")
ORANGES = ("#f7f7f7", "#fdae6b", "#e6550d", "#7f2704")
PANEL_COLUMNS = 3
GRID_PANELS = 6  # a heatmap's panels (models) side by side in a grid, at most
WIDTH, HEIGHT = 560, 300
PANEL_WIDTH, PANEL_HEIGHT = 300, 200
NO_PARSED = "No parsed answers yet: nothing to chart."
# Beside every accuracy figure: how many answers did not measure recall, and why.
INVALID = ("invalid", "invalid_why")

# How an axis value reads in a label; anything else is shown as is.
_LABELS = {
    "needle_count": "{} needles",
    "length_unit": "lengths in {}",
    "region": "region {}",
    "placement": "{} placement",
}


def varying(frame: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns that hold more than one distinct value (null counts as a value)."""
    return [c for c in columns if c in frame.columns and frame[c].n_unique() > 1]


def with_label(frame: pl.DataFrame, columns: Sequence[str], name: str) -> pl.DataFrame:
    """Add ``name``: the values of ``columns`` joined by " · " (e.g. "gpt · 40 needles")."""
    if not columns:
        return frame.with_columns(pl.lit("all").alias(name))
    parts = [
        pl.format(_LABELS.get(c, "{}"), pl.col(c).cast(pl.Utf8).fill_null("–")) for c in columns
    ]
    return frame.with_columns(pl.concat_str(parts, separator=" · ").alias(name))


def nice_max(value: float | None, floor: float = 1e-9) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above ``value`` (at least ``floor``)."""
    value = max(value or 0.0, floor)
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-12):
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def chart_title(text: str, subtitle: str | None = None) -> alt.TitleParams:
    if subtitle:
        return alt.TitleParams(text, subtitle=subtitle, anchor="start")
    return alt.TitleParams(text, anchor="start")


def placeholder(title: str, message: str = NO_PARSED, subtitle: str | None = None) -> alt.Chart:
    """A chart that states why there is nothing to draw."""
    return (
        alt.Chart(pl.DataFrame({"message": [message]}))
        .mark_text(fontSize=14, color="#777")
        .encode(text="message:N")
        .properties(title=chart_title(title, subtitle), width=WIDTH, height=60)
    )


def first_seen(frame: pl.DataFrame, column: str) -> list[Any]:
    """The distinct values of a column in order of first appearance."""
    return frame.get_column(column).unique(maintain_order=True).to_list()


def facet(
    layered: alt.Chart | alt.LayerChart,
    frame: pl.DataFrame,
    panel: str | None,
    title: alt.TitleParams,
    *,
    columns: int = PANEL_COLUMNS,
    shared_axes: bool = False,
) -> Chart:
    """One panel per value of ``panel``, wrapped in rows of ``columns``; the chart alone
    when ``panel`` is None. The colour scale is shared by all panels; ``shared_axes``: the x
    and y scales too (drawn once per row and column of panels)."""
    if panel is None:
        return layered.properties(title=title)
    panels = first_seen(frame, panel)
    header = alt.Header(labelFontSize=12, labelFontWeight="bold", labelLimit=320)
    faceted = layered.facet(
        facet=alt.Facet(f"{panel}:N", sort=panels, title=None, header=header),
        columns=min(columns, len(panels)),
    ).properties(title=title)
    if shared_axes:
        return faceted.resolve_scale(x="shared", y="shared", color="shared")
    # Every panel keeps its own lengths and draws its own axes.
    return faceted.resolve_scale(x="independent", color="shared")


def series_color(frame: pl.DataFrame, column: str, title: str) -> alt.Color:
    scheme = "tableau10" if frame[column].n_unique() <= 10 else "tableau20"
    legend = alt.Legend(title=title, labelLimit=320, orient="right", symbolOpacity=1)
    return alt.Color(f"{column}:N", scale=alt.Scale(scheme=cast(Any, scheme)), legend=legend)


def length_format(lengths: Sequence[float]) -> str:
    """SI for round lengths (16k), whole numbers with separators for others (10,389)."""
    return "~s" if all(v % 1000 == 0 for v in lengths) else ",d"


def _log_ticks(low: float, high: float) -> list[float]:
    ticks = []
    for power in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10**power for m in (1, 2, 5) if low <= m * 10**power <= high]
    return ticks


def length_x(frame: pl.DataFrame, field: str, title: str) -> alt.X:
    """Quantitative length (log when the lengths span 16x or more); ordinal for one length."""
    lengths = sorted(v for v in frame[field].unique().to_list() if v is not None)
    if len(lengths) <= 1:
        axis = alt.Axis(format=length_format(lengths), labelAngle=0)
        return alt.X(f"{field}:O", title=title, axis=axis)
    few = len(lengths) <= 12
    if lengths[0] > 0 and lengths[-1] / lengths[0] >= 16:
        values = lengths if few else _log_ticks(lengths[0], lengths[-1])
        axis = alt.Axis(format=length_format(values), values=values, labelOverlap="greedy")
        scale = alt.Scale(type="log", nice=False)
    else:
        axis = alt.Axis(
            format=length_format(lengths),
            values=lengths if few else Undefined,
            labelOverlap="greedy",
        )
        scale = alt.Scale(zero=False, nice=False)
    return alt.X(f"{field}:Q", title=title, scale=scale, axis=axis)


def slim(frame: pl.DataFrame, fields: Sequence[str | None]) -> pl.DataFrame:
    """Only the columns a chart uses, floats rounded: the data is inlined in every spec."""
    keep = [f for f in dict.fromkeys(fields) if f and f in frame.columns]
    return frame.select(keep).with_columns(cs.float().round(4))


def tooltips(frame: pl.DataFrame, fields: Sequence[str]) -> list[alt.Tooltip]:
    tips = []
    for field in fields:
        if field not in frame.columns:
            continue
        dtype = frame.schema[field]
        if dtype.is_float():
            tips.append(alt.Tooltip(f"{field}:Q", format=".3~f"))
        elif dtype.is_numeric():
            tips.append(alt.Tooltip(f"{field}:Q"))
        else:
            tips.append(alt.Tooltip(f"{field}:N"))
    return tips


def _color_scale(
    domain: tuple[float, float], scheme: str, colors: Sequence[str] | None
) -> alt.Scale:
    """A scheme, or a ramp through ``colors`` spread evenly over the domain (0 = the first)."""
    if not colors:
        return alt.Scale(domain=list(domain), scheme=cast(Any, scheme), clamp=True)
    low, high = domain
    stops = [low + (high - low) * i / (len(colors) - 1) for i in range(len(colors))]
    return alt.Scale(domain=stops, range=list(colors), clamp=True, interpolate="lab")


def heatmap(
    frame: pl.DataFrame,
    *,
    value: str,
    x: str = "length",
    y: str = "needle_index",
    panel: str = "model",
    row: str | None = None,
    domain: tuple[float, float] = ACCURACY_DOMAIN,
    scheme: str = "viridis",
    colors: Sequence[str] | None = None,
    y_sort: Sequence[Any] | None = None,
    row_sort: Sequence[Any] | None = None,
    title: str,
    subtitle: str | None = None,
    x_title: str = "context length",
    y_title: str = "needle",
    value_title: str | None = None,
    value_format: str = ".1f",
    tooltip: Sequence[str] = (),
    empty_message: str = NO_PARSED,
) -> Chart:
    """Rectangles at (x, y) coloured by ``value`` on one scale (``domain``) for all panels:
    one per ``panel`` value (a model); with ``row`` (a variant), a grid of variant rows ×
    model columns per set of variants with the same y values (a block per variant where the
    models are more than ``GRID_PANELS``)."""
    data = frame.filter(pl.col(value).is_not_null())
    if data.is_empty():
        return placeholder(title, empty_message, subtitle)
    data = slim(data, [panel, row, x, y, value, *tooltip])
    xs = sorted(data[x].unique().to_list())
    ys = list(y_sort) if y_sort is not None else sorted(data[y].unique().to_list())
    per_panel = data.group_by([k for k in (panel, row) if k]).agg(pl.col(y).n_unique())
    x_step = max(14, min(40, 360 // max(len(xs), 1)))
    tallest = max(per_panel[y].to_list(), default=1)
    y_step = max(4, min(14, 420 // max(tallest, 1)))
    y_font = 9 if y_step < 10 else 10
    # Rows shorter than a label: list only the labels Vega's greedy overlap removal keeps
    # (every stride-th), so it measures a fraction of them; laying out axis labels is most of
    # the time a big heatmap takes to render.
    stride = math.ceil(y_font / y_step)
    y_axis = alt.Axis(
        labelOverlap="greedy",
        labelFontSize=y_font,
        values=ys[::stride] if stride > 1 else Undefined,
    )
    x_axis = alt.Axis(format=length_format(xs), labelAngle=-45) if x == "length" else alt.Axis()
    encoding = {
        "x": alt.X(f"{x}:O", sort=xs, title=x_title, axis=x_axis),
        "y": alt.Y(f"{y}:O", sort=ys, title=y_title, axis=y_axis),
        "color": alt.Color(
            f"{value}:Q",
            title=value_title or value.replace("_", " "),
            scale=_color_scale(domain, scheme, colors),
            legend=alt.Legend(
                format=value_format.replace("f", "~f"),
                orient="top",
                direction="horizontal",
                gradientLength=220,
                titleLimit=400,
            ),
        ),
        "tooltip": tooltips(
            data, [f for f in dict.fromkeys([panel, row, x, y, value, *tooltip]) if f]
        ),
    }

    def rects(part: pl.DataFrame) -> alt.Chart:
        rect = alt.Chart(part).mark_rect().encode(**encoding)
        return rect.properties(width=alt.Step(x_step), height=alt.Step(y_step))

    def panels(part: pl.DataFrame, heading: alt.TitleParams) -> Chart:
        # The panels of a block share their lengths and needle indices: one axis per row and
        # column of panels (80 panels' own axes were a third of a static heatmap's drawing)
        return facet(rects(part), part, panel, heading, columns=4, shared_axes=True)

    if row is None:
        return panels(data, chart_title(title, subtitle))
    present = first_seen(data, row)
    order = [v for v in row_sort or () if v in present]
    order += [v for v in present if v not in order]
    models = first_seen(data, panel)
    if len(models) > GRID_PANELS:
        # Too many panels for a row: one block of wrapped model panels per variant, stacked.
        blocks = [
            panels(
                data.filter(pl.col(row) == value),
                alt.TitleParams(str(value), fontSize=13, anchor="start", color="#444"),
            )
            for value in order
        ]
    else:
        # A grid of variant rows × model columns for each set of variants with the same y
        # values (e.g. needle count): one y axis per row and one x axis per column, half the
        # axes of a block per variant, which are most of what a static heatmap takes to draw.
        blocks = [
            grid(rects(data.filter(pl.col(row).is_in(values))), row, values, panel, models)
            for values in _same_rows(data, row, y, order)
        ]
    return (
        alt.vconcat(*blocks, spacing=24)
        .resolve_scale(color="shared")
        .properties(title=chart_title(title, subtitle))
    )


def grid(
    rects: alt.Chart, row: str, rows: Sequence[Any], column: str, columns: Sequence[Any]
) -> alt.FacetChart:
    """``rects`` in a grid of ``row`` values (labelled on the left) × ``column`` values
    (headed on top), sharing their x and y scales."""
    row_header = alt.Header(
        labelAngle=0, labelAlign="right", labelFontSize=12, labelFontWeight="bold", labelLimit=320
    )
    column_header = alt.Header(labelFontSize=12, labelFontWeight="bold", labelLimit=320)
    return rects.facet(
        row=alt.Row(f"{row}:N", sort=list(rows), title=None, header=row_header),
        column=alt.Column(f"{column}:N", sort=list(columns), title=None, header=column_header),
    ).resolve_scale(x="shared", y="shared", color="shared")


def _same_rows(data: pl.DataFrame, row: str, y: str, order: Sequence[Any]) -> list[list[Any]]:
    """``order``'s values grouped by the set of ``y`` values their rows hold (in ``order``)."""
    sets = data.group_by(row).agg(pl.col(y).unique().sort().alias("ys"))
    key = {r[row]: tuple(r["ys"]) for r in sets.iter_rows(named=True)}
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for value in order:
        groups.setdefault(key[value], []).append(value)
    return list(groups.values())
