"""The offline HTML report (no CDN: the Vega bundle is inlined), a PNG and SVG per chart,
and the statistics table as ``stats.csv`` and ``stats.xlsx``. (``write_report`` runs past
60 lines: the report's order of work, queries, tables, then charts drawn beside, in one place.)

The page is ``templates/page.html`` around the sections: the summary (sections/summary.py),
each probe's in the order the probes declare (probes/catalog.py; sections/probe.py, charts/;
a chart with nothing to draw is one line saying why), then the comparison, statistics and run
metadata (extras.py), the runs and files.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from needlescope.errors import WarehouseError
from needlescope.grading import ruler_family
from needlescope.probes.catalog import rank as probe_rank
from needlescope.warehouse.charts import recall, render, vega
from needlescope.warehouse.report import data, drilldown, extras
from needlescope.warehouse.report.figures import ProbeCharts, probe_figures
from needlescope.warehouse.report.html import anchor, failed, fill, frame_table, template
from needlescope.warehouse.report.sections import probe as probe_section
from needlescope.warehouse.report.sections import summary as summary_section
from needlescope.warehouse.stats import summaries as stats
from needlescope.warehouse.stats import tables
from needlescope.warehouse.store import Warehouse, figures, views
from needlescope.warehouse.store.schema import TABLES

HEATMAPS = frozenset(drilldown.HEATMAPS)  # the needle heatmaps: drawn first, they take longest
Section = tuple[str, str, str]  # anchor, title, html


def _connect(root: Path) -> duckdb.DuckDBPyConnection:
    store = Warehouse(root)
    if store.exists() and any(not (store.parquet / table).is_dir() for table in TABLES):
        # A warehouse from before a table existed: give the new table its empty file.
        with contextlib.suppress(WarehouseError):
            store.ensure()
    return store.connect()


def query_threads() -> int:
    """DuckDB's threads for the report's queries: half the cores. The report already runs
    three query threads and a renderer process per core side by side; more threads per query
    only add DuckDB's cost of splitting and merging its work (at 10M answers on 2 cores, one
    thread a query took ~1 s less CPU than two in four interleaved pairs)."""
    return max(1, (os.cpu_count() or 1) // 2)


def write_report(
    root: Path,
    out: Path,
    *,
    unstable_range: float = figures.UNSTABLE_RANGE,
    effective_threshold: float | None = extras.DEFAULT_THRESHOLD,
    unstable_spread: float | None = None,
) -> Path:
    """Write report.html, a PNG + SVG per chart, stats.csv and stats.xlsx into ``out``.

    ``effective_threshold``: the accuracy (%) the effective context length keeps (None:
    85.6, RULER's, for RULER's probes; 85 for the others);
    ``unstable_spread``: the accuracy spread that lists a cell config as unstable
    (default ``unstable_range``).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    vl = vega.vl_version()
    spread = unstable_range if unstable_spread is None else unstable_spread
    with (
        ThreadPoolExecutor(max_workers=1) as pool,
        ThreadPoolExecutor(max_workers=1) as side,
        render.renderers() as draw,
    ):
        bundle = pool.submit(vega.vega_bundle)  # the slowest step: overlap it with the queries
        # The renderers start their Vega runtimes while the queries run.
        warming = render.start(draw, vl)
        con = _connect(Path(root))
        con.execute(f"SET threads = {query_threads()}")  # for the connections beside it too
        summary: Future[Any] | None = None
        added: extras.Extras | None = None
        try:
            # The summary (first on the page) beside everything else, on a connection to the
            # same views: every section reads one snapshot of the warehouse.
            summary = side.submit(
                summary_section.collect,
                Path(root),
                threshold=effective_threshold,
                spread=spread,
                con=views.beside(con),
            )
            # Every figure pooling all epochs is read from the tallies; what needs each
            # answer (hallucinations, failed requests) reads `results`.
            source = "results"
            table, probes = data.load(con, unstable_range, source)
            probes = sorted(probes, key=lambda p: probe_rank(p.probe))
            runs = stats.run_overview(con)
            errors = stats.error_counts(con, source=source)
            own = {probe.probe: probe_figures(con, probe.probe) for probe in probes}
            added = extras.collect(
                con,
                probes,
                own,
                variant_axes=recall.VARIANT_AXES,
                source=source,
                effective_threshold=effective_threshold,
                unstable_spread=spread,
                root=Path(root),  # its slow part runs beside the charts, beside con
            )
            # The tables first: openpyxl is pure Python and would crawl beside the renders.
            tables.write_csv(table, out / "stats.csv")
            tables.write_excel(table, out / "stats.xlsx")
            drawing = _Drawing(draw, out, vl)
            sections = [
                (
                    anchor("probe", probe.probe),
                    f"Probe: {probe.probe}",
                    probe_section.section(
                        probe,
                        drawing.draw(
                            probe.probe, _figures(probe, own[probe.probe]), _no_data(probe)
                        ),
                        unstable_range,
                        added.probe_html.get(probe.probe, ""),
                        empty=drawing.empty,
                    ),
                )
                for probe in probes
            ]
            if probes:
                try:
                    rows, flags = summary.result()
                    first = summary_section.section(rows, flags, threshold=effective_threshold)
                except extras.FAILURES as exc:  # the page keeps its sections: say what is missing
                    first = f"<section id='summary'><h2>Summary</h2>{failed('the summary', exc)}"
                    first += "</section>"
                sections.insert(0, ("summary", "Summary", first))
            page = _page(root, sections, errors, runs, drawing.specs, bundle.result(), added)
            for job in [*warming, *drawing.saved]:
                job.result()
        finally:
            # the connections beside con end with it: let their work end first
            if summary is not None:
                futures.wait([summary])
            if added is not None:
                added.settle()
            con.close()
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def _figures(probe: data.ProbeData, own: ProbeCharts | None) -> list[recall.Figure]:
    """The probe's charts: the shared (recall) ones, or its own beside the parse failures."""
    shown = recall.figures(probe)
    if own is None:
        return shown
    # RULER's probes read no format: an answer never fails to parse.
    parses = not ruler_family(probe.probe)
    kept = [f for f in shown if f.name == "parse_failures_by_length" and parses]
    return kept + [recall.Figure(name, chart) for name, chart in own.figures]


def _no_data(probe: data.ProbeData) -> str:
    """Why every chart of ``probe`` may have nothing to draw ("" when it has graded answers)."""
    table = probe.stats
    answers, graded = int(table["answers"].sum()), int(table["graded"].sum())
    invalid, errors = int(table["invalid"].sum()), int(table["errors"].sum())
    if answers == 0:
        return f"no valid answer: {invalid} invalid, {errors} failed requests"
    if graded == 0:
        return f"no answer could be graded: all {answers} valid answers are parse failures"
    return ""


def _rows(node: Any) -> Iterator[Any]:
    """Every data row of a chart's spec: its datasets', and those given inline."""
    if isinstance(node, dict):
        for rows in (node.get("datasets") or {}).values():
            yield from rows
        inline = node.get("data")
        if isinstance(inline, dict):
            yield from inline.get("values") or ()
        for key, value in node.items():
            if key not in ("datasets", "data"):
                yield from _rows(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rows(value)


def _nothing_drawn(spec: Mapping[str, Any], why: str) -> str | None:
    """The line a chart with no data becomes (its title and why), or None when it has data.
    A chart builder's placeholder (charts.shared.placeholder: rows of a message only) says
    why itself."""
    message = None
    for row in _rows(spec):  # stops at the first row of data: a large heatmap is not walked
        if not (isinstance(row, dict) and set(row) == {"message"}):
            return None
        message = message or str(row["message"])
    title = spec.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    title = " ".join(title) if isinstance(title, list) else str(title or "chart")
    if message is None:
        return f"{title}: nothing to draw, {why or 'no data'}."
    return f"{title}: {message}" + (f" — {why}" if why else "")


class _Drawing:
    """Each chart's spec for the page (JSON text), and its files drawn by the renderers
    meanwhile. A chart with no data row is not drawn: the page says why in one line
    (``empty``)."""

    def __init__(self, draw: Executor, out: Path, vl: str) -> None:
        self.renderers, self.out, self.vl = draw, out, vl
        self.specs: dict[str, str] = {}
        self.saved: list[Future[None]] = []
        self.empty: dict[str, str] = {}

    def draw(self, probe: str, shown: Sequence[recall.Figure], why: str = "") -> list[str]:
        """The page ids of ``shown``: recall keeps the plain names, other probes a prefix."""
        prefix = "" if probe == "recall" else f"{anchor(probe)}_"
        names = [prefix + figure.name for figure in shown]
        self.specs.update({name: "{}" for name in names})  # in the page's order
        for figure in sorted(shown, key=lambda f: f.name not in HEATMAPS):
            name = prefix + figure.name
            spec = vega.chart_text(figure.chart)
            # Without a row of data in its frames, the chart may have nothing to draw: its
            # rows as values say (a placeholder's message; a small chart, converted again).
            line = None if spec.has_rows else _nothing_drawn(vega.chart_spec(figure.chart), why)
            if line is not None:
                del self.specs[name]
                self.empty[name] = line
                continue
            self.specs[name] = spec.text
            job = self.renderers.submit(render.save_spec, spec.static, self.out / name, self.vl)
            self.saved.append(job)
        return names


def _specs_object(specs: Mapping[str, str]) -> str:
    """One JSON object of the charts' specs (each already JSON text), in the page's order."""
    return "{" + ",".join(f"{json.dumps(name)}:{text}" for name, text in specs.items()) + "}"


def _page(
    root: Path,
    sections: list[Section],
    errors: pl.DataFrame,
    runs: pl.DataFrame,
    specs: Mapping[str, str],
    bundle: str,
    added: extras.Extras | None = None,
) -> str:
    added = added or extras.Extras()
    links = [(a, title) for a, title, _ in [*sections, *added.sections]]
    links += [("runs", "Runs"), ("files", "Files")]
    body = ["<nav>", *(f"<a href='#{a}'>{html.escape(t)}</a>" for a, t in links), "</nav>"]
    body += [section for _, _, section in sections] or [
        "<h2>Recall</h2><p>No answers in the warehouse yet.</p>"
    ]
    body += [section for _, _, section in added.sections]
    if errors.height:
        body += ["<h2>Failed cells by error kind</h2>", frame_table(errors)]
    body += ["<section id='runs'><h2>Runs</h2>"]
    body += [frame_table(runs) if runs.height else "<p>No runs recorded.</p>", "</section>"]
    body += [template("files.html"), added.tail]  # the tail: styles, data and scripts of extras
    return fill(
        "page.html",
        style=template("page.css"),
        bundle=bundle,
        warehouse=html.escape(str(Path(root).resolve())),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=version("needlescope"),
        body="\n".join(body),
        specs=_specs_object(specs).replace("</", "<\\/"),
        script=template("page.js"),
    )
