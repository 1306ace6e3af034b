"""Big heatmaps' static files: a picture per panel that shows what Vega's rectangles showed."""

from __future__ import annotations

import base64
import copy
import re
import struct
import zlib
from typing import Any

import polars as pl
import vl_convert as vlc

from needlescope.warehouse.charts import raster, render, vega
from needlescope.warehouse.charts import shared as charts

RGB = re.compile(r"rgb\((\d+),\s*(\d+),\s*(\d+)\)")


def needle_grid(models: int = 3, needles: int = 30, variants: tuple[str, ...] = ("a", "b")) -> Any:
    rows = [
        {
            "model": f"model-{m}",
            "variant": variant,
            "length": length,
            "needle_index": index,
            # every value of the domain, its ends and a few past them (clamped)
            "position_accuracy": (37.3 * m + 11.1 * index + length / 997 + len(variant)) % 112 - 6,
            "parsed_answers": 3,
        }
        for variant in variants
        for m in range(models)
        for length in (500, 2000, 16000, 64000)
        for index in range(1, needles + 1)
    ]
    return pl.DataFrame(rows)


def static(chart: charts.Chart) -> dict[str, Any]:
    spec = vega.chart_spec(chart)
    return render.static_spec({**spec, "config": {**spec.get("config", {}), "aria": False}})


def heatmap_spec(frame: pl.DataFrame, **options: Any) -> dict[str, Any]:
    return static(
        charts.heatmap(frame, value="position_accuracy", row="variant", title="P", **options)
    )


def decoded(url: str) -> list[list[tuple[int, int, int, int]]]:
    """The pixels of raster.py's PNG (8-bit RGBA, filter 0 on every line)."""
    png = base64.b64decode(url.removeprefix("data:image/png;base64,"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    data, at = b"", 8
    while at < len(png):
        (size,) = struct.unpack(">I", png[at : at + 4])
        if png[at + 4 : at + 8] == b"IDAT":
            data += png[at + 8 : at + 8 + size]
        at += 12 + size
    raw = zlib.decompress(data)
    lines = [raw[i * (width * 4 + 1) : (i + 1) * (width * 4 + 1)] for i in range(height)]
    assert all(line[0] == 0 for line in lines)
    return [
        [tuple(line[1 + 4 * x : 5 + 4 * x]) for x in range(width)]  # type: ignore[misc]
        for line in lines
    ]


def vega_cells(spec: dict[str, Any]) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Vega's own rectangles: (block, panel, cell's x, y in pixels) -> colour, for each block."""
    cells: dict[tuple[int, ...], tuple[int, ...]] = {}
    for block, node in enumerate(spec["vconcat"]):
        one = {**spec, "vconcat": [node]}
        panels = [m for m in find_marks(vlc.vegalite_to_scenegraph(one), "rect")]
        for panel, items in enumerate(panels):
            for item in items:
                found = RGB.match(item["fill"])
                assert found, item["fill"]
                key = (block, panel, round(item["x"]), round(item["y"]))
                cells[key] = tuple(int(c) for c in found.groups())
    return cells


def find_marks(node: Any, marktype: str) -> list[list[dict[str, Any]]]:
    if isinstance(node, list):
        return [m for item in node for m in find_marks(item, marktype)]
    if not isinstance(node, dict):
        return []
    if node.get("marktype") == marktype and node.get("role") == "mark":
        return [node.get("items", [])]
    return [m for value in node.values() for m in find_marks(value, marktype)]


def marks(node: Any) -> list[dict[str, Any]]:
    """Every mark definition of a spec."""
    if isinstance(node, list):
        return [m for item in node for m in marks(item)]
    if not isinstance(node, dict):
        return []
    found = [node["mark"]] if isinstance(node.get("mark"), dict) else []
    return found + [m for k, v in node.items() if k != "datasets" for m in marks(v)]


def texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_each_pixel_has_the_colour_vega_gives_its_cell() -> None:
    frame = needle_grid()
    for options in ({}, {"colors": charts.REDS, "domain": (0.0, 50.0)}):
        spec = heatmap_spec(frame, **options)
        drawn = raster.rasterized(spec, min_cells=0)
        assert all(m.get("opacity") == 0 for m in marks(drawn) if m.get("type") == "rect")
        expected = vega_cells(spec)
        inner = spec["vconcat"][0]["spec"]
        x_step, y_step = inner["width"]["step"], inner["height"]["step"]
        compared = 0
        for block, node in enumerate(drawn["vconcat"]):
            for panel, row in enumerate(drawn["datasets"][node["data"]["name"]]):
                for y, line in enumerate(decoded(row[raster.RASTER_FIELD])):
                    for x, pixel in enumerate(line):
                        want = expected[(block, panel, x * x_step, y * y_step)]
                        assert pixel[3] == 255
                        # the nearest of Vega's 1,001 samples of the scale
                        assert all(abs(a - b) <= 2 for a, b in zip(pixel[:3], want, strict=True))
                        compared += 1
        assert compared == frame.height == len(expected)


def test_the_picture_keeps_the_axes_titles_and_size() -> None:
    spec = heatmap_spec(needle_grid())
    before = vlc.vegalite_to_svg(spec)
    after = vlc.vegalite_to_svg(raster.rasterized(spec, min_cells=0))
    size = re.compile(r'<svg[^>]*?width="([\d.]+)"[^>]*?height="([\d.]+)"')
    assert size.search(before).groups() == size.search(after).groups()  # type: ignore[union-attr]
    assert texts(after) == texts(before) and "needle" in texts(after)
    assert after.count("<image") == 6 and before.count("<image") == 0  # 2 blocks x 3 models
    # no element per cell: one invisible rectangle per panel
    assert before.count("<path") - after.count("<path") == 720 - 6


def test_a_missing_cell_stays_empty() -> None:
    frame = needle_grid(models=1, variants=("a",))
    frame = frame.filter(~((pl.col("length") == 2000) & (pl.col("needle_index") == 3)))
    drawn = raster.rasterized(heatmap_spec(frame), min_cells=0)
    (node,) = drawn["vconcat"]
    (row,) = drawn["datasets"][node["data"]["name"]]
    pixels = decoded(row[raster.RASTER_FIELD])
    assert pixels[2][1] == (0, 0, 0, 0)
    assert sum(p[3] == 255 for line in pixels for p in line) == frame.height


def test_what_a_picture_cannot_show_keeps_its_rectangles() -> None:
    spec = heatmap_spec(needle_grid())
    assert raster.rasterized(spec) is spec  # 720 cells: under MIN_CELLS
    unclamped = copy.deepcopy(spec)
    for node in unclamped["vconcat"]:
        node["spec"]["encoding"]["color"]["scale"]["clamp"] = False
    assert raster.rasterized(unclamped, min_cells=0) == unclamped
    outside = copy.deepcopy(spec)
    outside["vconcat"][0]["spec"]["encoding"]["x"]["sort"] = [500, 2000]
    drawn = raster.rasterized(outside, min_cells=0)
    assert drawn["vconcat"][0] == outside["vconcat"][0]  # this block stays rectangles
    assert "layer" in drawn["vconcat"][1]["spec"]  # the other is drawn as pictures
    assert spec == heatmap_spec(needle_grid())  # never modified in place


def test_a_big_heatmap_is_drawn_as_pictures_by_save_spec(tmp_path: Any) -> None:
    spec = vega.chart_spec(
        charts.heatmap(
            needle_grid(models=4, needles=40, variants=("a", "b", "c", "d")),
            value="position_accuracy",
            row="variant",
            title="P",
        )
    )
    render.save_spec(spec, tmp_path / "big", vega.vl_version())
    svg = (tmp_path / "big.svg").read_text()
    assert svg.count("<image") == 16 and svg.count("rect mark") == 16  # 1 per panel, not 2,560
    assert (tmp_path / "big.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
