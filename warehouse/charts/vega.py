"""The Vega runtime the page inlines, and each chart's spec and its SVG and PNG files."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import vl_convert as vlc
from altair.utils.data import to_eager_narwhals_dataframe, to_values
from altair.vegalite.data import default_data_transformer

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


_CONVERTING = threading.Lock()  # Altair's data transformer is global: one chart at a time
_rows: dict[str, list[dict[str, Any]]] = {}  # the chart being converted: its datasets


def _named_rows(data: Any) -> dict[str, Any]:
    """Altair's data transformer while :func:`chart_spec` converts: a Polars frame becomes a
    dataset named by a digest of its Arrow bytes (Altair names a dataset by the SHA-256 of
    its rows as sorted JSON: 2 s of a 10M-answer report's 4 heatmaps) with the rows Altair
    gives it. Every other kind of data goes Altair's way."""
    if not isinstance(data, pl.DataFrame):
        return dict(default_data_transformer(data, max_rows=sys.maxsize))
    try:
        digest = hashlib.sha256(data.write_ipc(None).getvalue()).hexdigest()[:32]
    except (pl.exceptions.PolarsError, TypeError, ValueError):  # no Arrow form (objects)
        return dict(default_data_transformer(data, max_rows=sys.maxsize))
    name = f"data-{digest}"
    if name not in _rows:
        _rows[name] = list(to_values(to_eager_narwhals_dataframe(data))["values"])
    return {"name": name}


alt.data_transformers.register("needlescope", _named_rows)


def chart_spec(chart: Chart) -> dict[str, Any]:
    # Not validated against the Vega-Lite schema here: that walks every inlined data row
    # (seconds for a heatmap of 1M answers); the chart builders' tests validate their specs.
    # No row limit: a heatmap of every needle has tens of thousands. (Rows passed as plain
    # values instead are deep-copied by every chart operation.)
    with _CONVERTING, alt.data_transformers.enable("needlescope"):
        _rows.clear()
        try:
            spec = dict(chart.to_dict(validate=False))
            if _rows:
                spec["datasets"] = {**spec.get("datasets", {}), **_rows}
            return spec
        finally:
            _rows.clear()


def save_spec(spec: dict[str, Any], stem: Path) -> None:
    """Write ``stem``.svg and ``stem``.png (2x, or 1x for a huge chart), rendered once."""
    render.save_spec(spec, stem, vl_version())
