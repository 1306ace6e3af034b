"""A chart's SVG and PNG files are drawn from its StaticSpec (the static spec compiled without
its rows, the rows joined as text, tooltip-only columns dropped): the same files as drawing
the whole spec."""

from __future__ import annotations

import json
import re
from pathlib import Path

import altair as alt
import polars as pl
import pytest

from needlescope.warehouse.charts import render, vega

FRAME = pl.DataFrame(
    {
        "model": ["m-1", "m-2", "m-1", "m-2"],
        "length": [1000, 1000, 2000, 2000],
        "needle_index": [1, 1, 1, 1],
        "value": [12.5, None, 99.0, 0.0],
        "only_in_tooltip": ["a", "b", "c", "d"],
        "ünïcode ✓": [1, 2, 3, 4],
        "a.b": [0.5, 1.5, 2.5, 3.5],
        "unused": [7, 7, 7, 7],
    }
)


def _heatmap() -> alt.TopLevelMixin:
    return (
        alt.Chart(FRAME.drop("a.b"))
        .mark_rect()
        .encode(
            x="length:O",
            y="needle_index:O",
            color=alt.Color("value:Q", scale=alt.Scale(domain=[0, 100], scheme="viridis")),
            tooltip=["model:N", "value:Q", "only_in_tooltip:N"],
        )
        .facet(column="model:N")
    )


def _counted() -> alt.Chart:  # names no field at all: the rows themselves count
    return alt.Chart(FRAME.select("unused")).mark_bar().encode(y="count():Q")


def _escaped_and_calculated() -> alt.TopLevelMixin:
    base = alt.Chart(FRAME).transform_calculate(doubled="datum['ünïcode ✓'] * 2")
    points = base.mark_point().encode(x=alt.X(field="a\\.b", type="quantitative"), y="doubled:Q")
    return alt.hconcat(alt.layer(points, points.mark_line()), _counted())


def _svg_png(spec: dict[str, object] | render.StaticSpec, stem: Path) -> tuple[str, bytes]:
    render.save_spec(spec, stem, vega.vl_version())
    svg = stem.with_suffix(".svg").read_text(encoding="utf-8")
    # Vega numbers each gradient it draws in a process: two renders of one spec differ there.
    return re.sub(r"gradient_\d+", "gradient", svg), stem.with_suffix(".png").read_bytes()


@pytest.mark.parametrize("build", [_heatmap, _counted, _escaped_and_calculated])
def test_files_from_the_static_spec_equal_the_whole_specs(build, tmp_path: Path) -> None:
    chart = build()
    static = vega.chart_text(chart).static
    from_static = _svg_png(static, tmp_path / "static")
    whole = _svg_png(vega.chart_spec(chart), tmp_path / "whole")
    assert from_static == whole
    assert "<path" in from_static[0] and len(from_static[1]) > 1000


def test_static_rows_keep_only_the_columns_the_drawing_names() -> None:
    (rows,) = vega.chart_text(_heatmap()).static.rows.values()
    assert {key for row in json.loads(rows) for key in row} == {
        "model",
        "length",
        "needle_index",
        "value",
    }
    assert "tooltip" not in vega.chart_text(_heatmap()).static.skeleton
    # a field only counted keeps one column, so that each row still counts
    (counted,) = vega.chart_text(_counted()).static.rows.values()
    assert len(json.loads(counted)) == FRAME.height
    # a name written escaped in the spec ("a\\.b") keeps every column of its frame
    static = vega.chart_text(_escaped_and_calculated()).static
    widths = sorted(len(json.loads(rows)[0]) for rows in static.rows.values())
    assert widths == [1, FRAME.width]
