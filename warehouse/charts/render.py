"""Draw Vega-Lite specs to SVG and PNG files, in worker processes.

vl-convert holds the GIL while it converts a chart, so threads draw one chart at a time and
stall the rest of the report meanwhile; worker processes draw side by side. This module
imports nothing but vl-convert, so a worker starts quickly.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
from collections.abc import Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import vl_convert as vlc

# A PNG is drawn at 2x unless that makes it larger than this (a heatmap of every needle of
# every variant can be 1,650 x 12,850 points): then at 1x, which takes half the time.
PNG_MAX_PIXELS = 40_000_000
MAX_WORKERS = 4
_SVG_SIZE = re.compile(r'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"')


def static_spec(spec: Any) -> Any:
    """The spec without tooltips (they only show on hover): the same picture, drawn faster."""
    if isinstance(spec, list):
        return [static_spec(item) for item in spec]
    if not isinstance(spec, dict):
        return spec
    return {
        key: value if key in ("data", "datasets") else static_spec(value)
        for key, value in spec.items()
        if key != "tooltip"
    }


@dataclass(frozen=True)
class StaticSpec:
    """What a renderer draws: the static spec (:func:`static_spec`, no ARIA) as JSON text,
    each of its large datasets empty, and those datasets' rows as JSON array texts by name,
    holding only the columns the static spec names (tooltip-only columns dropped).

    Vega-Lite compiles a spec without reading its rows, so the rows join the compiled Vega
    spec as text. A 34,000-cell heatmap's two files take ~2.1 s of CPU drawn from this, ~2.5 s
    from the whole spec (its rows compiled, passed as Python values, every column kept)."""

    skeleton: str
    rows: dict[str, str]


def rows_marker(name: str) -> str:
    """A string put where dataset ``name``'s rows go, for :func:`spliced_json` to replace."""
    return f"@@needlescope-rows-{name}@@"


def spliced_json(document: Any, texts: Mapping[str, str]) -> str:
    """``document`` as JSON, each key of ``texts`` (a marker string placed in it as a value)
    replaced by its JSON text: rows written as text stay text."""
    text = json.dumps(document)
    for marker, json_text in texts.items():
        text = text.replace(json.dumps(marker), json_text, 1)
    return text


def _vega_text(spec: StaticSpec, vl_version: str) -> str:
    """``spec`` compiled to Vega, its rows put back in, as JSON text."""
    vega: dict[str, Any] = vlc.vegalite_to_vega(spec.skeleton, vl_version=vl_version)
    texts: dict[str, str] = {}
    for data in vega.get("data", []):
        name = data.get("name")
        if name in spec.rows and "values" in data:
            data["values"] = rows_marker(name)
            texts[rows_marker(name)] = spec.rows[name]
    return spliced_json(vega, texts)


def png_scale(svg: str) -> int:
    size = _SVG_SIZE.search(svg[:2000])
    pixels = float(size.group(1)) * float(size.group(2)) if size else 0.0
    return 2 if pixels * 4 <= PNG_MAX_PIXELS else 1


def without_aria(spec: dict[str, Any]) -> Any:
    """:func:`static_spec` of ``spec``, with Vega's ARIA attributes off."""
    return static_spec({**spec, "config": {**spec.get("config", {}), "aria": False}})


def save_spec(spec: dict[str, Any] | str | StaticSpec, stem: Path, vl_version: str) -> None:
    """Write ``stem``.svg and ``stem``.png (2x, or 1x past PNG_MAX_PIXELS), rendered once.
    ``spec``: a dict, its JSON text, or a :class:`StaticSpec` (text crosses to a worker
    process as it is; a dict of tens of thousands of rows is pickled in the report's
    process)."""
    if isinstance(spec, StaticSpec):
        svg = vlc.vega_to_svg(_vega_text(spec, vl_version))
    else:
        found: dict[str, Any] = json.loads(spec) if isinstance(spec, str) else spec
        svg = vlc.vegalite_to_svg(without_aria(found), vl_version=vl_version)
    stem.with_suffix(".svg").write_text(svg, encoding="utf-8")
    stem.with_suffix(".png").write_bytes(vlc.svg_to_png(svg, scale=png_scale(svg)))


def warm_up(vl_version: str) -> None:
    """Start a worker's Vega runtime (its first chart costs about a second more)."""
    spec = {"data": {"values": [{"x": 1}]}, "mark": "point", "encoding": {"x": {"field": "x"}}}
    vlc.vegalite_to_svg(spec, vl_version=vl_version)


def start(pool: Executor, vl_version: str, workers: int | None = None) -> list[Future[None]]:
    """Start ``pool``'s workers now (``workers``: by default as many as it has), each warming
    up its Vega runtime (the futures say when).

    A spawned worker re-runs the main script's module level (a CLI's or a benchmark's
    imports: 0.3-0.8 s of CPU each, beside the report's own work) unless the main module's
    spec names it ``__main__``, which multiprocessing skips; a worker needs only this module.
    """
    main = sys.modules.get("__main__")
    saved = getattr(main, "__spec__", None)
    if main is not None:
        main.__spec__ = ModuleSpec("__main__", None)
    # (both executors keep their size in _max_workers)
    count = workers if workers is not None else int(getattr(pool, "_max_workers", 1))
    try:
        return [pool.submit(warm_up, vl_version) for _ in range(count)]
    finally:
        if main is not None:
            main.__spec__ = saved


def renderers(workers: int | None = None) -> Executor:
    """Worker processes for :func:`save_spec` (spawned: a forked Vega runtime can hang).

    A spawned worker re-imports the main script; when there is none to import (a script read
    from stdin), one thread draws instead.
    """
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main is not None and not os.path.isfile(main):
        return ThreadPoolExecutor(max_workers=1)
    count = workers or max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    return ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"))
