"""Small HTML helpers for the report's statistics, comparison and metadata sections.

Every value is escaped here; numbers are formatted for reading (the CSV keeps full precision).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

Row = Mapping[str, Any]


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
