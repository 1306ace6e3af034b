"""The offline HTML report (no CDN: the Vega bundle is inlined), a PNG and SVG per chart,
and the statistics table as ``stats.csv`` and ``stats.xlsx``. (``write_report`` runs past
60 lines: the report's order of work, queries, tables, then charts drawn beside, in one place.)

The page is ``templates/page.html`` around the sections: each probe's (sections/probe.py,
charts/), then the comparison, statistics and run metadata (extras.py), the runs and files.
"""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from needlescope.effective_length import RULER_PROBES
from needlescope.errors import WarehouseError
from needlescope.warehouse.charts import recall, render, vega
from needlescope.warehouse.report import data, drilldown, extras
from needlescope.warehouse.report.figures import ProbeCharts, probe_figures
from needlescope.warehouse.report.html import anchor, fill, frame_table, template
from needlescope.warehouse.report.sections import probe as probe_section
from needlescope.warehouse.stats import stats, tables
from needlescope.warehouse.store import Warehouse, figures
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
    with ThreadPoolExecutor(max_workers=1) as pool, render.renderers() as draw:
        bundle = pool.submit(vega.vega_bundle)  # the slowest step: overlap it with the queries
        # The renderers start their Vega runtimes while the queries run.
        warming = [draw.submit(render.warm_up, vl) for _ in range(2)]
        con = _connect(Path(root))
        try:
            source = data.snapshot(con)
            table, probes = data.load(con, unstable_range, source)
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
                unstable_spread=unstable_range if unstable_spread is None else unstable_spread,
                root=Path(root),  # its slow part runs beside the charts, on its own connection
            )
        finally:
            con.close()
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
                    drawing.draw(probe.probe, _figures(probe, own[probe.probe])),
                    unstable_range,
                    added.probe_html.get(probe.probe, ""),
                ),
            )
            for probe in probes
        ]
        page = _page(root, sections, errors, runs, drawing.specs, bundle.result(), added)
        for job in [*warming, *drawing.saved]:
            job.result()
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def _figures(probe: data.ProbeData, own: ProbeCharts | None) -> list[recall.Figure]:
    """The probe's charts: the shared (recall) ones, or its own beside the parse failures."""
    shown = recall.figures(probe)
    if own is None:
        return shown
    # RULER's probes read no format: an answer never fails to parse.
    parses = probe.probe not in RULER_PROBES
    kept = [f for f in shown if f.name == "parse_failures_by_length" and parses]
    return kept + [recall.Figure(name, chart) for name, chart in own.figures]


class _Drawing:
    """Each chart's spec for the page, and its files drawn by the renderers meanwhile."""

    def __init__(self, draw: Executor, out: Path, vl: str) -> None:
        self.renderers, self.out, self.vl = draw, out, vl
        self.specs: dict[str, dict[str, Any]] = {}
        self.saved: list[Future[None]] = []

    def draw(self, probe: str, shown: Sequence[recall.Figure]) -> list[str]:
        """The page ids of ``shown``: recall keeps the plain names, other probes a prefix."""
        prefix = "" if probe == "recall" else f"{anchor(probe)}_"
        names = [prefix + figure.name for figure in shown]
        self.specs.update({name: {} for name in names})  # in the page's order
        for figure in sorted(shown, key=lambda f: f.name not in HEATMAPS):
            name = prefix + figure.name
            self.specs[name] = vega.chart_spec(figure.chart)
            job = self.renderers.submit(
                render.save_spec, self.specs[name], self.out / name, self.vl
            )
            self.saved.append(job)
        return names


def _page(
    root: Path,
    sections: list[Section],
    errors: pl.DataFrame,
    runs: pl.DataFrame,
    specs: Mapping[str, dict[str, Any]],
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
        specs=json.dumps(specs).replace("</", "<\\/"),
        script=template("page.js"),
    )
