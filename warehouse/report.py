"""The offline HTML report (no CDN: the Vega bundle is inlined) plus a PNG and SVG per chart."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import altair as alt
import polars as pl
import vl_convert as vlc

from needlescope.warehouse import charts, stats
from needlescope.warehouse.store import Warehouse

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>needlescope report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1.5rem; }}
th, td {{ border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: right; }}
th {{ background: #f4f4f4; }} td.t {{ text-align: left; }}
.chart {{ margin: 1rem 0 2rem; }} .muted {{ color: #777; font-size: 0.85rem; }}
</style>
<script>{bundle}</script></head>
<body>
<h1>needlescope report</h1>
<p class="muted">warehouse {warehouse} · generated {generated} · needlescope {version}</p>
{body}
<script>
const specs = {specs};
for (const [id, spec] of Object.entries(specs)) {{
  vegaEmbed('#' + id, spec, {{renderer: 'svg', actions: false}}).catch(console.error);
}}
</script>
</body></html>
"""


def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script, at the Vega-Lite version of Altair's specs."""
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return str(vlc.javascript_bundle(None, vl_version=f"v{major}_{minor}"))  # type: ignore[arg-type]


def _table(frame: pl.DataFrame, float_digits: int = 2) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = []
    for row in frame.iter_rows():
        cells = []
        for value in row:
            if isinstance(value, float):
                cells.append(f"<td>{value:.{float_digits}f}</td>")
            elif isinstance(value, int):
                cells.append(f"<td>{value}</td>")
            else:
                cells.append(
                    f"<td class='t'>{html.escape('' if value is None else str(value))}</td>"
                )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def save_chart(chart: alt.TopLevelMixin, stem: Path) -> None:
    chart.save(str(stem.with_suffix(".png")), scale_factor=2)
    chart.save(str(stem.with_suffix(".svg")))


def write_report(root: Path, out: Path) -> Path:
    con = Warehouse(root).connect()
    try:
        by_length = stats.accuracy_by_length(con)
        runs = stats.run_overview(con)
        errors = stats.error_counts(con)
    finally:
        con.close()
    out.mkdir(parents=True, exist_ok=True)
    built: dict[str, alt.TopLevelMixin] = {}
    if by_length.height:
        built["accuracy_by_length"] = charts.accuracy_by_length(by_length)
        built["parse_failures_by_length"] = charts.parse_failures_by_length(by_length)
    specs = {}
    sections = []
    for name, chart in built.items():
        save_chart(chart, out / name)
        specs[name] = chart.to_dict()
        sections.append(f"<div class='chart' id='{name}'></div>")
    summary_columns = [
        "model",
        "length",
        "length_unit",
        "needle_count",
        "filler",
        "prompt_version",
        "answers",
        "parse_failures",
        "errors",
        "mean_accuracy",
        "median_accuracy",
        "min_accuracy",
        "max_accuracy",
        "mean_latency_s",
    ]
    body = ["<h2>Recall</h2>", *sections, "<h3>Accuracy by length</h3>"]
    body.append(
        _table(by_length.select(summary_columns)) if by_length.height else "<p>No answers yet.</p>"
    )
    if errors.height:
        body += ["<h3>Failed cells by error kind</h3>", _table(errors)]
    body += ["<h2>Runs</h2>", _table(runs)]
    page = PAGE.format(
        bundle=vega_bundle(),
        warehouse=html.escape(str(Path(root).resolve())),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=version("needlescope"),
        body="\n".join(body),
        specs=json.dumps(specs).replace("</", "<\\/"),
    )
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
