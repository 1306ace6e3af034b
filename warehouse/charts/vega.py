"""The Vega runtime the page inlines, and each chart's spec and its SVG and PNG files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import vl_convert as vlc
from altair.utils.core import sanitize_narwhals_dataframe
from altair.utils.data import to_eager_narwhals_dataframe
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
_frames: dict[str, pl.DataFrame] = {}  # the chart being converted: its Polars datasets


def _named_frame(data: Any) -> dict[str, Any]:
    """Altair's data transformer while a chart converts here: a Polars frame becomes a named
    dataset (kept in ``_frames``, sanitised as Altair sanitises it), named by a digest of its
    Arrow bytes (Altair names a dataset by the SHA-256 of its rows as sorted JSON: 2 s of a
    10M-answer report's 4 heatmaps). Every other kind of data goes Altair's way."""
    if not isinstance(data, pl.DataFrame):
        return dict(default_data_transformer(data, max_rows=sys.maxsize))
    try:
        digest = hashlib.sha256(data.write_ipc(None).getvalue()).hexdigest()[:32]
    except (pl.exceptions.PolarsError, TypeError, ValueError):  # no Arrow form (objects)
        return dict(default_data_transformer(data, max_rows=sys.maxsize))
    name = f"data-{digest}"
    if name not in _frames:
        sanitized = sanitize_narwhals_dataframe(to_eager_narwhals_dataframe(data))
        _frames[name] = sanitized.to_native()
    return {"name": name}


alt.data_transformers.register("needlescope", _named_frame)


def _converted(chart: Chart) -> tuple[dict[str, Any], dict[str, pl.DataFrame]]:
    """``chart``'s spec without its Polars datasets, and those datasets by name."""
    # Not validated against the Vega-Lite schema here: that walks every inlined data row
    # (seconds for a heatmap of 1M answers); the chart builders' tests validate their specs.
    # No row limit: a heatmap of every needle has tens of thousands. (Rows passed as plain
    # values instead are deep-copied by every chart operation.)
    with _CONVERTING, alt.data_transformers.enable("needlescope"):
        _frames.clear()
        try:
            return dict(chart.to_dict(validate=False)), dict(_frames)
        finally:
            _frames.clear()


def chart_spec(chart: Chart) -> dict[str, Any]:
    """``chart``'s Vega-Lite spec, its data rows as Python values."""
    spec, frames = _converted(chart)
    if frames:
        rows = {name: frame.rows(named=True) for name, frame in frames.items()}
        spec["datasets"] = {**spec.get("datasets", {}), **rows}
    return spec


@dataclass(frozen=True)
class SpecText:
    """A chart's spec as JSON text, its Polars datasets written by Polars (NaN and infinities
    as null: Vega counts both as invalid), and whether they hold a row of data."""

    text: str
    has_rows: bool  # a Polars dataset has a row that is not only a placeholder's message
    static: render.StaticSpec  # what the renderers draw the chart's files from


# A field named with these is written escaped in a spec ("a\\.b"): its name is not found
# in the spec's text as it is.
_ESCAPED = re.compile(r"[.\[\]\\]")


def _named_columns(frame: pl.DataFrame, spec_text: str) -> pl.DataFrame:
    """``frame`` without the columns ``spec_text`` never names (a column named anywhere,
    even inside another word or an expression, is kept); every column when a name would be
    written escaped, and at least one, so that the rows stay (a chart may count rows)."""
    if any(_ESCAPED.search(column) for column in frame.columns):
        return frame
    named = [c for c in frame.columns if json.dumps(c)[1:-1] in spec_text]
    return frame.select(named or frame.columns[:1])


def _static(spec: dict[str, Any], frames: dict[str, pl.DataFrame]) -> render.StaticSpec:
    empty: dict[str, list[Any]] = {name: [] for name in frames}
    skeleton = json.dumps(
        render.without_aria({**spec, "datasets": {**spec.get("datasets", {}), **empty}})
    )
    rows = {name: _named_columns(frame, skeleton).write_json() for name, frame in frames.items()}
    return render.StaticSpec(skeleton, rows)


def chart_text(chart: Chart) -> SpecText:
    """:func:`chart_spec` as JSON, without turning its rows into Python values and back (the
    report's heatmaps have tens of thousands), and what its files are drawn from."""
    spec, frames = _converted(chart)
    static = _static(spec, frames)
    if frames:
        marks = {name: render.rows_marker(name) for name in frames}
        spec["datasets"] = {**spec.get("datasets", {}), **marks}
    texts = {render.rows_marker(name): frame.write_json() for name, frame in frames.items()}
    text = render.spliced_json(spec, texts)
    has_rows = any(f.height and set(f.columns) != {"message"} for f in frames.values())
    return SpecText(text, has_rows, static)


def save_spec(spec: dict[str, Any] | str, stem: Path) -> None:
    """Write ``stem``.svg and ``stem``.png (2x, or 1x for a huge chart), rendered once."""
    render.save_spec(spec, stem, vl_version())
