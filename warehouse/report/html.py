"""HTML helpers of the report: the page's templates (``templates/``: HTML, CSS and JavaScript
as files), tables and escaped values.

Every value is escaped here; numbers are formatted for reading (the CSV keeps full precision).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from functools import cache
from importlib import resources
from string import Template
from typing import Any

import polars as pl

Row = Mapping[str, Any]


@cache
def template(name: str) -> str:
    """A file of ``templates/`` (HTML, CSS or JavaScript) as it is."""
    folder = resources.files("needlescope.warehouse.report").joinpath("templates")
    return folder.joinpath(name).read_text(encoding="utf-8")


def fill(name: str, **values: str) -> str:
    """A template with its ``$name`` fields filled (the values are inserted as they are)."""
    return Template(template(name)).substitute(values)


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def failed(what: str, exc: object) -> str:
    """What a section shows in place of a figure it could not compute, and why."""
    return f"<p class='muted'>Could not compute {esc(what)}: {esc(exc)}</p>"


def anchor(*parts: str) -> str:
    """An element id from ``parts`` (the rule report.py uses for its section anchors)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(parts)).strip("-").lower()


def number(value: object, digits: int = 1) -> str:
    """A number for reading: '' for missing, thousands separators for integers."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def interval(low: object, high: object, digits: int = 1, scale: float = 1.0, sep: str = "–") -> str:
    """The bounds as "low–high" (times ``scale``), or '' when either is missing.
    Differences, which can be negative, read better with ``sep=" to "``."""
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return ""
    if math.isnan(low) or math.isnan(high):
        return ""
    return f"{low * scale:.{digits}f}{sep}{high * scale:.{digits}f}"


def p_value(value: object) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return ""
    if value < 0.001:
        return "<0.001"
    return f"{value:.3f}"


def text(value: object) -> str:
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S}"
    if isinstance(value, date):
        return f"{value:%Y-%m-%d}"
    return "" if value is None else str(value)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    row_classes: Iterable[str] | None = None,
    numeric: Sequence[bool] | None = None,
    table_id: str | None = None,
) -> str:
    """A table of already formatted cell texts (escaped here); ``numeric`` aligns right."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    classes = iter(row_classes) if row_classes is not None else None
    body = []
    for row in rows:
        cls = next(classes, "") if classes is not None else ""
        cells = "".join(
            f"<td>{esc(v)}</td>"
            if numeric is None or numeric[i]
            else f"<td class='t'>{esc(v)}</td>"
            for i, v in enumerate(row)
        )
        body.append(f"<tr class='{esc(cls)}'>{cells}</tr>" if cls else f"<tr>{cells}</tr>")
    ident = f" id='{esc(table_id)}'" if table_id else ""
    return (
        f"<div class='scroll'><table{ident}><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def json_script(element_id: str, data: Any) -> str:
    """``data`` as a JSON data block the page's scripts read with JSON.parse."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # "</" would end the script element early; "<!--" could open an HTML comment in it.
    payload = payload.replace("</", "<\\/").replace("<!--", "<\\u0021--")
    return f"<script type='application/json' id='{esc(element_id)}'>{payload}</script>"


def json_clean(value: Any) -> Any:
    """NaN and infinities as None (JSON has no NaN), through dicts and lists."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: json_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_clean(v) for v in value]
    if isinstance(value, datetime | date):
        return text(value)
    return value


def frame_cell(column: str, value: object) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td class='t'>{'yes' if value else ''}</td>"
    if isinstance(value, float):
        if column.endswith("_rate"):
            return f"<td>{value:.1%}</td>"
        digits = 2 if "latency" in column else 1
        return f"<td>{value:.{digits}f}</td>"
    if isinstance(value, int):
        return f"<td>{value:,}</td>" if column == "length" else f"<td>{value}</td>"
    if isinstance(value, datetime):
        return f"<td class='t'>{value:%Y-%m-%d %H:%M:%S}</td>"
    if isinstance(value, date):
        return f"<td class='t'>{value:%Y-%m-%d}</td>"
    return f"<td class='t'>{html.escape(str(value))}</td>"


def frame_table(frame: pl.DataFrame, headers: Mapping[str, str] | None = None) -> str:
    """A frame as a table; ``headers``: how columns read (any other: its name, spaced)."""
    headers = headers or {}
    head = "".join(
        f"<th>{html.escape(headers.get(c, c.replace('_', ' ')))}</th>" for c in frame.columns
    )
    flag = frame.columns.index("unstable") if "unstable" in frame.columns else None
    rows = []
    for row in frame.iter_rows():
        cls = " class='unstable'" if flag is not None and row[flag] else ""
        cells = "".join(frame_cell(c, v) for c, v in zip(frame.columns, row, strict=True))
        rows.append(f"<tr{cls}>{cells}</tr>")
    return (
        f"<div class='scroll'><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
