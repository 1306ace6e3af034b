"""The offline HTML report (no CDN: the Vega bundle is inlined), a PNG and SVG per chart,
and the statistics table as ``stats.csv`` and ``stats.xlsx``."""

from __future__ import annotations

import contextlib
import html
import json
import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import altair as alt
import duckdb
import polars as pl
import vl_convert as vlc

from needlescope.errors import WarehouseError
from needlescope.warehouse.charts import render as charts_render
from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.report import extras as report_extras
from needlescope.warehouse.report.drilldown import collect as drilldown
from needlescope.warehouse.report.figures import probe_figures
from needlescope.warehouse.report.html import anchor
from needlescope.warehouse.stats import significance, stats, tables
from needlescope.warehouse.store import Warehouse, figures
from needlescope.warehouse.store.schema import TABLES

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>needlescope report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1400px; color: #222;
       padding: 0 1rem; }}
h2 {{ border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }}
nav {{ background: #f7f7f7; padding: 0.5rem 0.8rem; font-size: 0.9rem; }}
nav a {{ margin-right: 0.8rem; }}
.scroll {{ overflow-x: auto; }}
table {{ border-collapse: collapse; font-size: 0.8rem; margin: 0.5rem 0 1.5rem; }}
th, td {{ border: 1px solid #ddd; padding: 0.2rem 0.45rem; text-align: right;
          white-space: nowrap; }}
th {{ background: #f4f4f4; text-align: center; }} td.t {{ text-align: left; }}
tr.unstable td {{ background: #fde2e1; }}
figure.chart {{ margin: 1rem 0 2.2rem; overflow-x: auto; }}
figure.chart figcaption {{ font-size: 0.8rem; color: #777; }}
.muted {{ color: #777; font-size: 0.85rem; }}
</style>
<script>{bundle}</script></head>
<body>
<h1>needlescope report</h1>
<p class="muted">warehouse {warehouse} · generated {generated} · needlescope {version}</p>
{body}
<script>
const specs = {specs};
const drawn = Object.entries(specs).map(([id, spec]) => {{
  const el = document.getElementById(id);
  return vegaEmbed(el, spec, {{renderer: 'svg', actions: false}})
    .then((result) => {{
      el.dataset.rendered = 'ok';
      // the drill-down listens to this to wire clicks on the heatmaps (drilldown.py)
      document.dispatchEvent(new CustomEvent('needlescope:chart-drawn',
        {{detail: {{id: id, view: result.view}}}}));
    }})
    .catch((err) => {{
      el.dataset.rendered = 'error';
      el.textContent = 'This chart failed to draw: ' + err;
      console.error('chart ' + id + ' failed:', err);
    }});
}});
Promise.allSettled(drawn).then(() => {{ document.body.dataset.charts = 'done'; }});
</script>
</body></html>
"""

LINE_PANEL_AXES = ("length_unit", "filler", "prompt_version", "placement", "region")
VARIANT_AXES = ("length_unit", "needle_count", "filler", "prompt_version", "placement", "region")
# Columns of the per-model tables in the page (the CSV and workbook keep every column).
METRICS = (
    "answers",
    "parse_failures",
    "errors",
    "invalid",
    "invalid_why",
    "mean_accuracy",
    "ci95",
    "parse_failure_ci95",
    "median_accuracy",
    "min_accuracy",
    "max_accuracy",
    "sd_accuracy",
    "accuracy_range",
    "unstable",
    "mean_latency_s",
)
HEADERS = {
    "needle_count": "needles",
    "prompt_version": "prompt",
    "mean_accuracy": "mean",
    "ci95": "95% interval",
    "parse_failure_ci95": "parse failures % (95%)",
    "median_accuracy": "median",
    "min_accuracy": "min",
    "max_accuracy": "max",
    "sd_accuracy": "sd",
    "accuracy_range": "range",
    "mean_latency_s": "latency (s)",
    "invalid": "invalid answers",
    "invalid_why": "why invalid",
}


INTERVALS_NOTE = (
    "95% intervals: the seeded percentile bootstrap of the mean "
    f"({significance.DEFAULT_RESAMPLES:,} resamples; the normal interval above "
    f"{significance.BOOTSTRAP_MAX_N:,} answers), Wilson for the parse-failure rate"
)


@dataclass(frozen=True)
class Figure:
    name: str
    chart: charts.Chart


@dataclass(frozen=True)
class ProbeData:
    probe: str
    stats: pl.DataFrame  # stats.recall_stats rows of this probe
    models: pl.DataFrame  # the same figures pooled per model
    fillers: pl.DataFrame  # pooled per model × filler (× the varying variant axes)
    needles: pl.DataFrame  # stats.needle_rates
    hallucinations: pl.DataFrame  # stats.hallucination_rates


# ------------------------------------------------------------------------------- Vega


def _vl_version() -> str:
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return f"v{major}_{minor}"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "needlescope"


def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script, at the Vega-Lite version of Altair's specs.

    Bundling takes over a second, so the result is cached per vl-convert and Vega-Lite version.
    """
    vl = _vl_version()
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


def chart_spec(chart: charts.Chart) -> dict[str, Any]:
    # Not validated against the Vega-Lite schema here: that walks every inlined data row
    # (seconds for a heatmap of 1M answers); the chart builders' tests validate their specs.
    return dict(chart.to_dict(validate=False))


def save_spec(spec: dict[str, Any], stem: Path) -> None:
    """Write ``stem``.svg and ``stem``.png (2x, or 1x for a huge chart), rendered once."""
    charts_render.save_spec(spec, stem, _vl_version())


def save_chart(chart: charts.Chart, stem: Path) -> None:
    save_spec(chart_spec(chart), stem)


# ------------------------------------------------------------------------------- data


def _connect(root: Path) -> duckdb.DuckDBPyConnection:
    store = Warehouse(root)
    if store.exists() and any(not (store.parquet / table).is_dir() for table in TABLES):
        # A warehouse from before a table existed: give the new table its empty file.
        with contextlib.suppress(WarehouseError):
            store.ensure()
    return store.connect()


# The columns of `results` the report's statistics read, kept in a temporary table: the
# report reads `results` once (one consistent snapshot) instead of once per statistic.
REPORT_RESULTS = "report_results"
_REPORT_COLUMNS = (
    "run_id",
    "epoch",
    "cell_id",
    *figures.AXES,
    "repeat",
    "error_kind",
    "parse_ok",
    "accuracy",
    "latency_s",
    "validity",
)


def _snapshot(con: duckdb.DuckDBPyConnection) -> str:
    columns = ", ".join(f'"{c}"' for c in dict.fromkeys(_REPORT_COLUMNS))
    con.execute(f"CREATE OR REPLACE TEMP TABLE {REPORT_RESULTS} AS SELECT {columns} FROM results")
    return REPORT_RESULTS


def _load(
    con: duckdb.DuckDBPyConnection, unstable_range: float, source: str = "results"
) -> tuple[pl.DataFrame, list[ProbeData]]:
    table = significance.with_intervals(
        con, stats.recall_stats(con, unstable_range, source=source), figures.AXES, source
    )
    # The needle heatmaps show, beside their rates, the config's invalid answers.
    invalid = table.select(*figures.AXES, *charts.INVALID)
    needles = _joined(stats.needle_rates(con, source=source), invalid)
    invented = _joined(stats.hallucination_rates(con, source=source), invalid)
    pooled = f"(SELECT * FROM {source} WHERE probe = $probe)"
    probes = []
    for probe in table["probe"].unique(maintain_order=True).to_list():
        rows = table.filter(pl.col("probe") == probe)
        variant = charts.varying(rows, ("needle_count", "prompt_version", "placement", "region"))
        by_model = figures.summary_sql(["probe", "model"], pooled)
        by_filler = figures.summary_sql(["probe", "model", "filler", *variant], pooled)
        params = {"probe": probe}
        models = con.sql(f"{by_model} ORDER BY ALL", params=params).pl()
        fillers = con.sql(f"{by_filler} ORDER BY ALL", params=params).pl()
        filler_axes = ["probe", "model", "filler", *variant]
        probes.append(
            ProbeData(
                probe=probe,
                stats=rows,
                models=significance.with_intervals(con, models, ["probe", "model"], pooled, params),
                fillers=significance.with_intervals(con, fillers, filler_axes, pooled, params),
                needles=needles.filter(pl.col("probe") == probe),
                hallucinations=invented.filter(pl.col("probe") == probe),
            )
        )
    return table, probes


def _joined(frame: pl.DataFrame, invalid: pl.DataFrame) -> pl.DataFrame:
    return frame.join(invalid, on=list(figures.AXES), how="left", nulls_equal=True)


# ------------------------------------------------------------------------------- charts


def _length_title(frame: pl.DataFrame) -> str:
    units = frame["length_unit"].drop_nulls().unique().to_list() if frame.height else []
    return f"context length ({units[0]})" if len(units) == 1 else "context length"


def _labelled(
    frame: pl.DataFrame, axes: Sequence[str], lead: Sequence[str] = ()
) -> tuple[pl.DataFrame, str | None]:
    """Add a ``panel`` label of ``lead`` and the varying ``axes``; None if one panel does."""
    shown = [*lead, *charts.varying(frame, axes)]
    if not shown:
        return frame, None
    return charts.with_label(frame, shown, "panel"), "panel"


def recall_figures(data: ProbeData) -> list[Figure]:
    """Every recall chart of one probe, in the order the page shows them."""
    table = data.stats
    x_title = _length_title(table)
    dash = "needle_count" if charts.varying(table, ["needle_count"]) else None
    lines, panel = _labelled(table, LINE_PANEL_AXES)
    figures = [
        Figure(
            "accuracy_by_length",
            charts.accuracy_by_length(lines, panel=panel, dash=dash, x_title=x_title),
        )
    ]
    for axis, name in (("filler", "filler"), ("prompt_version", "prompt")):
        if axis not in charts.varying(table, [axis]):
            continue
        others = [a for a in LINE_PANEL_AXES if a != axis]
        variant, variant_panel = _labelled(table, others, lead=["model"])
        figures.append(
            Figure(
                f"accuracy_by_length_by_{name}",
                charts.accuracy_by_length(
                    variant,
                    color=axis,
                    panel=variant_panel,
                    dash=dash,
                    x_title=x_title,
                    title=f"Average accuracy by length and {axis.replace('_', ' ')}",
                ),
            )
        )
    fillers, filler_panel = _labelled(
        data.fillers, ("needle_count", "prompt_version", "placement", "region")
    )
    figures.append(
        Figure("accuracy_by_filler", charts.accuracy_by_filler(fillers, panel=filler_panel))
    )
    figures.append(
        Figure(
            "parse_failures_by_length",
            charts.parse_failures_by_length(lines, panel=panel, dash=dash, x_title=x_title),
        )
    )
    if data.probe == "recall" or data.needles.height:  # per-needle analysis: recall only
        figures += _heatmaps(data, x_title)
    return figures


HEATMAPS = frozenset(drilldown.HEATMAPS)  # the needle heatmaps


def _heatmaps(data: ProbeData, x_title: str) -> list[Figure]:
    # A block of model panels per variant (needle count, filler, …) that the probe varies.
    variants = charts.varying(data.stats, VARIANT_AXES)
    row = "variant" if variants else None
    row_sort = None
    if variants:
        labelled = charts.with_label(data.stats.sort(variants), variants, "variant")
        row_sort = labelled["variant"].unique(maintain_order=True).to_list()
    needles = charts.with_label(data.needles, variants, "variant")
    misorder_top = charts.nice_max(needles["misorder_rate"].max() if needles.height else 0, 1)
    counts = ["parsed_answers", *charts.INVALID]
    figures = [
        Figure(
            "position_accuracy",
            charts.heatmap(
                needles,
                value="position_accuracy",
                row=row,
                row_sort=row_sort,
                title="Position accuracy",
                subtitle="% of valid parsed answers that recalled the needle in order "
                "(in the longest common subsequence)",
                x_title=x_title,
                y_title="needle index",
                value_title="in order (%)",
                tooltip=["in_order", *counts],
            ),
        ),
        Figure(
            "missing_by_position",
            charts.heatmap(
                needles,
                value="missing_rate",
                row=row,
                colors=charts.REDS,
                row_sort=row_sort,
                title="Missing needles",
                subtitle="% of valid parsed answers that never gave the needle's value",
                x_title=x_title,
                y_title="needle index",
                value_title="missing (%)",
                tooltip=["missing", *counts],
            ),
        ),
        Figure(
            "misorder_by_position",
            charts.heatmap(
                needles,
                value="misorder_rate",
                row=row,
                domain=(0.0, misorder_top),
                colors=charts.PURPLES,
                row_sort=row_sort,
                title="Misordered needles",
                subtitle="% of valid parsed answers that gave the needle's value out of order "
                f"(scale 0–{misorder_top:g}%)",
                x_title=x_title,
                y_title="needle index",
                value_title="misordered (%)",
                tooltip=["misorder", *counts],
            ),
        ),
    ]
    invented = charts.with_label(data.hallucinations, variants, "variant")
    top = charts.nice_max(invented["per_answer"].max() if invented.height else 0, 0.01)
    intervals = (
        invented.select("key_from", "key_to", "interval").unique().sort("key_from", "key_to")
    )
    message = (
        "No hallucinated values in the parsed answers." if data.needles.height else charts.NO_PARSED
    )
    figures.append(
        Figure(
            "hallucinations_by_interval",
            charts.heatmap(
                invented,
                value="per_answer",
                y="interval",
                y_sort=intervals["interval"].to_list(),
                row=row,
                domain=(0.0, top),
                colors=charts.ORANGES,
                row_sort=row_sort,
                title="Hallucinations",
                subtitle="invented values per valid parsed answer, by the anchors they fall "
                "between "
                "(0 = before the first needle, N+1 = after the last)",
                x_title=x_title,
                y_title="between needles",
                value_title="per answer",
                value_format=".2f",
                tooltip=["hallucinations", "parsed_answers", *charts.INVALID],
                empty_message=message,
            ),
        )
    )
    return figures


# ------------------------------------------------------------------------------- html


def _cell(column: str, value: object) -> str:
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


def _table(frame: pl.DataFrame) -> str:
    head = "".join(
        f"<th>{html.escape(HEADERS.get(c, c.replace('_', ' ')))}</th>" for c in frame.columns
    )
    flag = frame.columns.index("unstable") if "unstable" in frame.columns else None
    rows = []
    for row in frame.iter_rows():
        cls = " class='unstable'" if flag is not None and row[flag] else ""
        cells = "".join(_cell(c, v) for c, v in zip(frame.columns, row, strict=True))
        rows.append(f"<tr{cls}>{cells}</tr>")
    return (
        f"<div class='scroll'><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _with_interval(frame: pl.DataFrame) -> pl.DataFrame:
    """The 95% interval as one "low–high" text column, for reading."""
    low, high = pl.col("ci95_low").round(1), pl.col("ci95_high").round(1)
    rate, lo, hi = (
        (pl.col(c) * 100).round(1)
        for c in ("parse_failure_rate", "parse_failure_lo", "parse_failure_hi")
    )
    return frame.with_columns(
        pl.format("{}–{}", low, high).alias("ci95"),
        pl.format("{} ({}–{})", rate, lo, hi).alias("parse_failure_ci95"),
    )


def _figure(name: str) -> str:
    return (
        f"<figure class='chart'><div class='vega' id='{name}'></div>"
        f"<figcaption><a href='{name}.png'>PNG</a> · <a href='{name}.svg'>SVG</a>"
        "</figcaption></figure>"
    )


def _overview(data: ProbeData) -> str:
    table = data.stats
    answers = int(table["answers"].sum())
    failures = int(table["parse_failures"].sum())
    errors = int(table["errors"].sum())
    invalid = int(table["invalid"].sum())
    lengths = table.group_by("length_unit").agg(
        pl.col("length").min().alias("lo"), pl.max("length")
    )
    spans = ", ".join(
        f"{lo:,}–{hi:,} {unit}" if lo != hi else f"{lo:,} {unit}"
        for unit, lo, hi in lengths.sort("length_unit").iter_rows()
    )
    unstable = int(table["unstable"].sum())
    return (
        f"<p>{table['model'].n_unique()} model(s) · {answers} valid answers, of which {failures} "
        f"did not parse · {invalid} invalid answer(s) (truncated, refused, …: not in the "
        f"figures) · {errors} failed request(s) · lengths {html.escape(spans)} · "
        f"{unstable} unstable config(s)</p>"
    )


def _probe_section(
    data: ProbeData, names: Sequence[str], unstable_range: float, extra: str = ""
) -> str:
    probe = html.escape(data.probe)
    models = data.stats["model"].unique(maintain_order=True).to_list()
    unstable_per_model = data.stats.group_by("model").agg(
        pl.col("unstable").sum().alias("unstable_configs")
    )
    model_table = (
        _with_interval(data.models)
        .join(unstable_per_model, on="model", how="left")
        .select(
            "model",
            *[m for m in METRICS if m not in ("unstable", "accuracy_range")],
            "unstable_configs",
        )
    )
    links = " ".join(
        f"<a href='#{anchor(data.probe, 'model', m)}'>{html.escape(m)}</a>" for m in models
    )
    body = [
        f"<section id='{anchor('probe', data.probe)}'><h2>Probe: {probe}</h2>",
        _overview(data),
        f"<p class='muted'>models: {links}</p>",
        "<h3>Models</h3>",
        "<p class='muted'>all lengths pooled; accuracy (%) over the valid parsed answers "
        "(invalid answers — truncated, out of thinking budget, refused, filtered, … — counted "
        "apart); "
        f"{INTERVALS_NOTE}</p>",
        _table(model_table),
        extra,  # report_extras: accuracy with intervals, the drill-down hint
        "<h3>Charts</h3>",
        *(_figure(name) for name in names),
    ]
    shown_axes = charts.varying(data.stats, figures.AXES) or ["length"]
    if "length" not in shown_axes:
        shown_axes = ["length", *shown_axes]
    for model in models:
        rows = data.stats.filter(pl.col("model") == model)
        axes = [a for a in shown_axes if a not in ("probe", "model")]
        counts = ["epochs", "repeats"] if data.stats["epochs"].max() != 1 else ["repeats"]
        body += [
            f"<section id='{anchor(data.probe, 'model', model)}'>",
            f"<h3>{probe} · {html.escape(model)}</h3>",
            "<p class='muted'>one row per cell config; accuracy (%) over the valid parsed "
            "answers; "
            f"{INTERVALS_NOTE}; shaded rows are unstable (their repeats span more than "
            f"{unstable_range:g} points)</p>",
            _table(_with_interval(rows).select(*axes, *counts, *METRICS)),
            "</section>",
        ]
    body.append("</section>")
    return "\n".join(body)


# ------------------------------------------------------------------------------- report


def write_report(
    root: Path,
    out: Path,
    *,
    unstable_range: float = figures.UNSTABLE_RANGE,
    effective_threshold: float = report_extras.DEFAULT_THRESHOLD,
    unstable_spread: float | None = None,
) -> Path:
    """Write report.html, a PNG + SVG per chart, stats.csv and stats.xlsx into ``out``.

    ``effective_threshold``: the accuracy (%) the effective context length keeps;
    ``unstable_spread``: the accuracy spread that lists a cell config as unstable
    (default ``unstable_range``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    vl = _vl_version()
    with ThreadPoolExecutor(max_workers=1) as pool, charts_render.renderers() as draw:
        bundle = pool.submit(vega_bundle)  # the slowest step: overlap it with the queries
        # The renderers start their Vega runtimes while the queries run.
        warming = [draw.submit(charts_render.warm_up, vl) for _ in range(2)]
        con = _connect(Path(root))
        try:
            source = _snapshot(con)
            table, probes = _load(con, unstable_range, source)
            runs = stats.run_overview(con)
            errors = stats.error_counts(con, source=source)
            own = {data.probe: probe_figures(con, data.probe) for data in probes}
            extras = report_extras.collect(
                con,
                probes,
                own,
                variant_axes=VARIANT_AXES,
                source=source,
                effective_threshold=effective_threshold,
                unstable_spread=unstable_range if unstable_spread is None else unstable_spread,
                root=Path(root),  # its slow part runs beside the charts, on its own connection
            )
        finally:
            con.close()
        # The tables first: openpyxl is pure Python and would crawl beside the renders.
        tables.write_csv(table, out / "stats.csv")
        tables.write_excel(table, out / "stats.xlsx")
        specs: dict[str, dict[str, Any]] = {}
        saved: list[Future[None]] = []  # each chart is drawn while the next is built
        sections: list[tuple[str, str, str]] = []  # anchor, title, html
        for data in probes:
            figures = recall_figures(data)
            mine = own[data.probe]
            if mine is not None:
                # A probe with charts of its own keeps, of the shared ones, the parse failures.
                figures = [f for f in figures if f.name == "parse_failures_by_length"]
                figures += [Figure(name, chart) for name, chart in mine.figures]
            # recall keeps the plain names; other probes' files get a prefix
            prefix = "" if data.probe == "recall" else f"{anchor(data.probe)}_"
            names = [prefix + figure.name for figure in figures]
            specs.update({name: {} for name in names})  # in the page's order
            # The needle heatmaps take longest to draw: start them first.
            for figure in sorted(figures, key=lambda f: f.name not in HEATMAPS):
                name = prefix + figure.name
                specs[name] = chart_spec(figure.chart)
                saved.append(draw.submit(charts_render.save_spec, specs[name], out / name, vl))
            sections.append(
                (
                    anchor("probe", data.probe),
                    f"Probe: {data.probe}",
                    _probe_section(
                        data, names, unstable_range, extras.probe_html.get(data.probe, "")
                    ),
                )
            )
        page = _page(root, sections, errors, runs, specs, bundle.result(), extras)
        for job in [*warming, *saved]:
            job.result()
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def _page(
    root: Path,
    sections: list[tuple[str, str, str]],
    errors: pl.DataFrame,
    runs: pl.DataFrame,
    specs: dict[str, dict[str, Any]],
    bundle: str,
    extras: report_extras.Extras | None = None,
) -> str:
    extras = extras or report_extras.Extras()
    nav = ["<nav>"]
    nav += [f"<a href='#{anchor}'>{html.escape(title)}</a>" for anchor, title, _ in sections]
    nav += [f"<a href='#{a}'>{html.escape(title)}</a>" for a, title, _ in extras.sections]
    nav += ["<a href='#runs'>Runs</a>", "<a href='#files'>Files</a>", "</nav>"]
    body = [*nav]
    body += [section for _, _, section in sections] or [
        "<h2>Recall</h2><p>No answers in the warehouse yet.</p>"
    ]
    body += [section for _, _, section in extras.sections]
    if errors.height:
        body += ["<h2>Failed cells by error kind</h2>", _table(errors)]
    body += ["<section id='runs'><h2>Runs</h2>"]
    body += [_table(runs) if runs.height else "<p>No runs recorded.</p>", "</section>"]
    body += [
        "<section id='files'><h2>Files</h2><p>Next to this page: "
        "<a href='stats.csv'>stats.csv</a> and <a href='stats.xlsx'>stats.xlsx</a> "
        "(the statistics table, one sheet per model; also the <code>recall_stats</code> "
        "view), and every chart as PNG and SVG.</p></section>"
    ]
    body.append(extras.tail)  # styles, data and scripts of report_extras
    return PAGE.format(
        bundle=bundle,
        warehouse=html.escape(str(Path(root).resolve())),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=version("needlescope"),
        body="\n".join(body),
        specs=json.dumps(specs).replace("</", "<\\/"),
    )
