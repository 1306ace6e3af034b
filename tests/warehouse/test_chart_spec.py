"""vega.chart_spec names a Polars frame's dataset by a digest of its Arrow bytes instead of
Altair's hash of its rows: the same spec as Altair's own but for the names."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import altair as alt
import polars as pl

from needlescope.warehouse.charts import vega


def _plain(chart: alt.TopLevelMixin) -> dict[str, Any]:
    with alt.data_transformers.disable_max_rows():
        return dict(chart.to_dict(validate=False))


def _renamed(spec: dict[str, Any]) -> str:
    """The spec as JSON with its dataset names replaced by their order of appearance."""
    text = json.dumps(spec)
    for index, name in enumerate(spec.get("datasets", {})):
        text = text.replace(name, f"dataset-{index}")
    return text


def test_same_spec_as_altairs_but_for_the_names() -> None:
    frame = pl.DataFrame(
        {
            "x": [1, 2, 3],
            "y": ["a", "ü\u200b", "c"],
            "v": [None, 1.5, math.nan],
            "at": [datetime(2026, 11, 27, 1, 2, 3)] * 3,
        }
    )
    base = alt.Chart(frame).mark_rect().encode(x="x:O", y="y:N")
    layered = alt.layer(base, base.mark_text().encode(text="v:Q"))
    chart = layered | alt.Chart(frame.head(2)).mark_point().encode(x="x:Q", y="at:T")
    ours, altairs = vega.chart_spec(chart), _plain(chart)
    # the layers share one frame: one dataset, as Altair's content hash gives
    assert len(ours["datasets"]) == len(altairs["datasets"]) == 2
    assert _renamed(ours) == _renamed(altairs)
    assert all(name.startswith("data-") for name in ours["datasets"])


def test_equal_frames_share_a_dataset_and_other_data_goes_altairs_way() -> None:
    first = pl.DataFrame({"x": [1, 2], "y": [3.0, 4.0]})
    chart = alt.Chart(first).mark_point().encode(x="x:Q") | alt.Chart(first.clone()).mark_line()
    assert len(vega.chart_spec(chart)["datasets"]) == 1
    rows = [{"x": 1, "y": 2}]
    inline = alt.Chart(alt.Data(values=rows)).mark_point().encode(x="x:Q")
    assert _renamed(vega.chart_spec(inline)) == _renamed(_plain(inline))
    # nothing left behind for the next chart
    assert not vega._frames


def test_no_row_limit() -> None:
    frame = pl.DataFrame({"x": list(range(12_000))})
    spec = vega.chart_spec(alt.Chart(frame).mark_tick().encode(x="x:Q"))
    (rows,) = spec["datasets"].values()
    assert len(rows) == 12_000


def test_chart_text_is_the_spec_as_json() -> None:
    """The report's JSON text of a chart: the spec chart_spec gives, with NaN and infinities
    as null (Vega counts both as invalid), and whether its frames hold a row of data."""
    frame = pl.DataFrame(
        {"x": [1, 2], "v": [math.nan, 0.1], "s": ["</script>", "é\u2028"], "w": [math.inf, 2.5]}
    )
    chart = alt.Chart(frame).mark_rect().encode(x="x:O", color="v:Q")
    text = vega.chart_text(chart)
    assert text.has_rows
    expected = vega.chart_spec(chart)
    (rows,) = expected["datasets"].values()
    for row in rows:
        row.update(
            {k: None for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)}
        )
    assert json.loads(text.text) == expected
    message = alt.Chart(pl.DataFrame({"message": ["nothing yet"]})).mark_text()
    assert not vega.chart_text(message).has_rows
    assert not vega.chart_text(alt.Chart(frame.head(0)).mark_rect()).has_rows
