"""Big heatmaps' static files drawn with one picture per panel instead of a rectangle per cell.

A heatmap of every needle of every variant has 30,000+ cells: Vega builds, lays out and
writes an SVG element for each, then the PNG rasteriser draws each one again (about 5 s of a
renderer's time per chart, most of a report's drawing at 10M answers). Here the cells of each
panel become one PNG picture, a pixel per cell, laid over the same panel by an ``image`` mark
(unsmoothed, so each pixel stretches to a crisp cell). Vega still draws everything else from
the same spec: the axes (their domains made explicit, as the rectangles had them), the legend,
the headers and titles. The page's interactive charts are untouched (they keep their tooltips).

Colours are Vega's own: the heatmap's colour scale, sampled by Vega at STEPS + 1 evenly spaced
values of its domain, and each cell takes the sample nearest its value (at most 1/2000 of the
domain away). Only a shape this module knows is redrawn (``_plan``); anything else, or a
spec Vega would draw differently than a picture (a null value, values outside the sort lists,
an unclamped scale), keeps its rectangles. This module imports nothing but the standard
library and vl-convert: it runs in the renderer processes (render.py).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import vl_convert as vlc

MIN_CELLS = 2_000  # smaller heatmaps stay vector drawings (crisp at any zoom, cheap anyway)
STEPS = 1_000
RASTER_FIELD = "__raster"
_RGB = re.compile(r"rgba?\((\d+),\s*(\d+),\s*(\d+)")
_palettes: dict[str, list[bytes]] = {}


@dataclass(frozen=True)
class _Heatmap:
    node: dict[str, Any]  # the facet holding the rect spec
    inner: dict[str, Any]  # the rect spec (the facet's "spec")
    rows: list[dict[str, Any]]
    panel: str
    x: str
    y: str
    value: str
    xs: list[Any]
    ys: list[Any]


def rasterized(spec: dict[str, Any], min_cells: int = MIN_CELLS) -> dict[str, Any]:
    """``spec`` with its heatmaps drawn as pictures when they have ``min_cells`` cells in all
    (a copy where anything changed; ``spec`` itself is never modified)."""
    datasets = spec.get("datasets", {})
    found = [h for n, d in _nodes(spec) if (h := _plan(n, d, datasets)) is not None]
    if sum(len(h.rows) for h in found) < min_cells:
        return spec
    replaced = {id(h.node): h for h in found}
    out_datasets = dict(datasets)

    def rebuilt(node: Any) -> Any:
        if isinstance(node, list):
            return [rebuilt(item) for item in node]
        if not isinstance(node, dict):
            return node
        heatmap = replaced.get(id(node))
        if heatmap is not None:
            return _redrawn(heatmap, out_datasets)
        return {k: v if k == "datasets" else rebuilt(v) for k, v in node.items()}

    out = rebuilt(spec)
    used = set(_names(out))
    out["datasets"] = {k: v for k, v in out_datasets.items() if k in used}
    return out


def _names(node: Any) -> Iterator[str]:
    """The datasets ``node`` reads."""
    if isinstance(node, list):
        for item in node:
            yield from _names(item)
    elif isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            yield data["name"]
        for key, value in node.items():
            if key != "datasets":
                yield from _names(value)


def _nodes(node: Any, data: Any = None) -> Iterator[tuple[dict[str, Any], Any]]:
    """Every chart node with the data it reads (its own, or inherited from its parent)."""
    if isinstance(node, list):
        for item in node:
            yield from _nodes(item, data)
    elif isinstance(node, dict):
        data = node.get("data", data)
        yield node, data
        for key, value in node.items():
            if key not in ("datasets", "data", "encoding"):
                yield from _nodes(value, data)


def _plan(node: dict[str, Any], data: Any, datasets: dict[str, Any]) -> _Heatmap | None:
    """The heatmap ``node`` draws, if it is one this module can draw as pictures: a facet of
    rect panels sharing their axes (shared.heatmap), every cell a value on a clamped scale."""
    facet, inner = node.get("facet"), node.get("spec")
    if not isinstance(facet, dict) or not isinstance(inner, dict) or not _shared_axes(node):
        return None
    if _mark_type(inner.get("mark")) != "rect" or _step(inner.get("width")) is None:
        return None
    rows = _rows(data, datasets)
    enc = inner.get("encoding", {})
    x, y, color = enc.get("x", {}), enc.get("y", {}), enc.get("color", {})
    panel = facet.get("field")
    if rows is None or not isinstance(panel, str) or _step(inner.get("height")) is None:
        return None
    if any(e.get("type") not in ("ordinal", "nominal") for e in (x, y)):
        return None
    if color.get("type") != "quantitative" or _span(color.get("scale", {})) is None:
        return None
    x_field, y_field, value = x.get("field"), y.get("field"), color.get("field")
    names = (panel, x_field, y_field, value)
    if not all(isinstance(n, str) for n in names) or any(
        row.get(n) is None for row in rows for n in names
    ):
        return None
    xs, ys = _domain(rows, x), _domain(rows, y)
    if xs is None or ys is None:
        return None
    return _Heatmap(node, inner, rows, panel, str(x_field), str(y_field), str(value), xs, ys)


def _mark_type(mark: Any) -> Any:
    return mark.get("type") if isinstance(mark, dict) else mark


def _shared_axes(node: dict[str, Any]) -> bool:
    scale = node.get("resolve", {}).get("scale", {})
    return scale.get("x") == "shared" and scale.get("y") == "shared"


def _rows(data: Any, datasets: dict[str, Any]) -> list[dict[str, Any]] | None:
    if not isinstance(data, dict):
        return None
    if "name" in data:
        return datasets.get(data["name"])
    values = data.get("values")
    return values if isinstance(values, list) else None


def _domain(rows: list[dict[str, Any]], encoding: dict[str, Any]) -> list[Any] | None:
    """The values an ordinal axis shows, in its sort order; None when some value is outside the
    sort list (Vega would order it its own way)."""
    present = {row[encoding["field"]] for row in rows}
    order = encoding.get("sort")
    if not isinstance(order, list) or not present <= set(order):
        return None
    return [value for value in order if value in present]


def _redrawn(heatmap: _Heatmap, datasets: dict[str, Any]) -> dict[str, Any]:
    """The node with its rectangles replaced by a picture per panel over invisible axes."""
    enc = heatmap.inner["encoding"]
    colours = _palette(enc["color"])
    panels: dict[Any, list[dict[str, Any]]] = {}
    for row in heatmap.rows:
        panels.setdefault(row[heatmap.panel], []).append(row)
    pictures = [
        {
            # the panel's first cell: the invisible rectangle of the axes layer
            **{k: rows[0][k] for k in (heatmap.panel, heatmap.x, heatmap.y, heatmap.value)},
            RASTER_FIELD: _picture(heatmap, rows, colours),
        }
        for rows in panels.values()
    ]
    name = f"raster-{len(datasets)}"
    datasets[name] = pictures
    axes = {
        key: value
        for key, value in {
            **enc,
            "x": {**enc["x"], "scale": {**enc["x"].get("scale", {}), "domain": heatmap.xs}},
            "y": {**enc["y"], "scale": {**enc["y"].get("scale", {}), "domain": heatmap.ys}},
        }.items()
        if key != "tooltip"
    }
    x_step, y_step = _step(heatmap.inner["width"]), _step(heatmap.inner["height"])
    image = {
        "mark": {
            "type": "image",
            "aspect": False,
            "smooth": False,  # each pixel stretched to its cell, not blurred into the next
            "align": "left",
            "baseline": "top",
            "width": len(heatmap.xs) * (x_step or 0),
            "height": len(heatmap.ys) * (y_step or 0),
        },
        "encoding": {
            "url": {"field": RASTER_FIELD, "type": "nominal"},
            "x": {"value": 0},
            "y": {"value": 0},
        },
    }
    layered = {
        **{k: v for k, v in heatmap.inner.items() if k not in ("mark", "encoding")},
        "layer": [{"mark": {"type": "rect", "opacity": 0}, "encoding": axes}, image],
    }
    return {**heatmap.node, "data": {"name": name}, "spec": layered}


def _step(size: Any) -> float | None:
    step = size.get("step") if isinstance(size, dict) else None
    return float(step) if isinstance(step, int | float) else None


def _span(scale: dict[str, Any]) -> tuple[float, float] | None:
    """The colour domain's ends, when the scale clamps to a numeric domain."""
    domain = scale.get("domain")
    if not scale.get("clamp") or not isinstance(domain, list) or len(domain) < 2:
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in domain):
        return None
    low, high = float(domain[0]), float(domain[-1])
    return (low, high) if high > low else None


def _palette(color: dict[str, Any]) -> list[bytes]:
    """RGBA bytes of the scale's colour at STEPS + 1 evenly spaced values of its domain, as
    Vega draws them (remembered per scale: the panels of a chart share theirs)."""
    key = json.dumps(color.get("scale"), sort_keys=True)
    if key not in _palettes:
        low, high = _span(color["scale"]) or (0.0, 1.0)
        values = [{"v": low + (high - low) * i / STEPS} for i in range(STEPS + 1)]
        sample = {
            "data": {"values": values},
            "mark": "rect",
            "encoding": {"color": {**color, "field": "v", "legend": None}},
            "config": {"aria": False},
        }
        fills = _rect_fills(vlc.vegalite_to_scenegraph(sample))
        if len(fills) != STEPS + 1:
            raise ValueError(f"Vega drew {len(fills)} colours of {STEPS + 1}")
        _palettes[key] = [_rgba(fill) for fill in fills]
    return _palettes[key]


def _rect_fills(node: Any) -> list[str]:
    if isinstance(node, list):
        return [fill for item in node for fill in _rect_fills(item)]
    if not isinstance(node, dict):
        return []
    if node.get("marktype") == "rect" and node.get("role") == "mark":
        return [str(item.get("fill")) for item in node.get("items", [])]
    return [fill for value in node.values() for fill in _rect_fills(value)]


def _rgba(fill: str) -> bytes:
    if fill.startswith("#") and len(fill) == 7:
        return bytes.fromhex(fill[1:]) + b"\xff"
    found = _RGB.match(fill)
    if found is None:
        raise ValueError(f"unexpected Vega colour {fill!r}")
    return bytes(int(c) for c in found.groups()) + b"\xff"


def _picture(heatmap: _Heatmap, rows: list[dict[str, Any]], colours: list[bytes]) -> str:
    """One panel's cells as a PNG data URL: a pixel per cell, transparent where none."""
    low, high = _span(heatmap.inner["encoding"]["color"]["scale"]) or (0.0, 1.0)
    column = {value: i for i, value in enumerate(heatmap.xs)}
    line = {value: i for i, value in enumerate(heatmap.ys)}
    pixels = [[b"\x00\x00\x00\x00"] * len(heatmap.xs) for _ in heatmap.ys]
    for row in rows:  # a later row over an earlier one, as Vega draws them
        share = (float(row[heatmap.value]) - low) / (high - low)
        step = min(STEPS, max(0, round(share * STEPS)))
        pixels[line[row[heatmap.y]]][column[row[heatmap.x]]] = colours[step]
    png = _png([b"".join(p) for p in pixels], len(heatmap.xs))
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _png(lines: list[bytes], width: int) -> bytes:
    """An 8-bit RGBA PNG of ``lines`` (each ``width`` pixels): the format's three chunks,
    written here because nothing else the renderers load writes one."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, len(lines), 8, 6, 0, 0, 0)
    raw = b"".join(b"\x00" + line for line in lines)  # filter type 0 on every line
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )
