"""The Vega runtime the page inlines, and each chart's spec and its SVG and PNG files."""

from __future__ import annotations

import os
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert as vlc

from needlescope.warehouse.charts import render
from needlescope.warehouse.charts.shared import Chart


def vl_version() -> str:
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return f"v{major}_{minor}"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "needlescope"


def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script, at the Vega-Lite version of Altair's specs.

    Bundling takes over a second, so the result is cached per vl-convert and Vega-Lite version.
    """
    vl = vl_version()
    cached = _cache_dir() / f"vega-bundle-{version('vl-convert-python')}-{vl}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    bundle = str(vlc.javascript_bundle(None, vl_version=vl))  # type: ignore[arg-type]
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.name}.{os.getpid()}.partial")
        partial.write_text(bundle, encoding="utf-8")
        os.replace(partial, cached)
    except OSError:
        pass
    return bundle


_UNLIMITED = threading.Lock()  # Altair's row limit lifted: one chart at a time


def chart_spec(chart: Chart) -> dict[str, Any]:
    # Not validated against the Vega-Lite schema here: that walks every inlined data row
    # (seconds for a heatmap of 1M answers); the chart builders' tests validate their specs.
    # Altair refuses a frame of over 5,000 rows unless told otherwise, and a heatmap of every
    # needle has tens of thousands. Its setting is global: lifted here only, one chart at a
    # time. (Rows passed as plain values instead are deep-copied by every chart operation.)
    with _UNLIMITED, alt.data_transformers.disable_max_rows():
        return dict(chart.to_dict(validate=False))


def save_spec(spec: dict[str, Any], stem: Path) -> None:
    """Write ``stem``.svg and ``stem``.png (2x, or 1x for a huge chart), rendered once."""
    render.save_spec(spec, stem, vl_version())
