"""The report's interactive and statistical additions, gathered in one call for report.py:
the heatmaps' drill-down (:mod:`.drilldown`), the model comparison (:mod:`.compare_section`),
the statistics (:mod:`.statistics_section`) and the run metadata (:mod:`.run_metadata`).

The per-probe accuracy tables are computed at once (they go into the probe sections). The
rest (paired comparisons, drift, effective lengths, the drill-down's answers and rebuilt
haystacks: most of the time on a large warehouse) is computed, when report.py passes the
warehouse's ``root``, on a connection of its own in a background thread, while the charts
are built and drawn; the page waits for it (:attr:`Extras.sections`, :attr:`Extras.tail`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from needlescope.warehouse.charts import shared as charts
from needlescope.warehouse.report import drilldown
from needlescope.warehouse.report.data import ProbeData
from needlescope.warehouse.report.figures import ProbeCharts
from needlescope.warehouse.report.html import failed, template
from needlescope.warehouse.report.sections import answers_side, run_metadata
from needlescope.warehouse.report.sections import compare as compare_section
from needlescope.warehouse.report.sections import statistics as statistics_section
from needlescope.warehouse.store import views

DEFAULT_THRESHOLD: float | None = None  # each probe's own (effective_length.default_threshold)
STYLES = ("drilldown", "compare", "statistics", "run_metadata")  # templates/<name>.css
Section = tuple[str, str, str]  # anchor, title, html


@dataclass(frozen=True)
class Later:
    """The sections after the probes' and the page's tail: (comparison, statistics, run
    metadata) sections, and the styles, data blocks and scripts before the page's script."""

    sections: list[Section]
    tail: str


class Extras:
    """What the page adds; ``sections`` and ``tail`` wait for the background work, if any."""

    def __init__(
        self,
        probe_html: Mapping[str, str] | None = None,
        later: Later | Future[Later] | None = None,
    ) -> None:
        # HTML added to each probe's section, after its model table
        self.probe_html = dict(probe_html or {})
        self._later = later

    def _result(self) -> Later:
        if self._later is None:
            return Later([], "")
        if isinstance(self._later, Future):
            self._later = self._later.result()
        return self._later

    def settle(self) -> None:
        """Wait for the background work to end, whatever its outcome."""
        if isinstance(self._later, Future):
            futures.wait([self._later])

    @property
    def sections(self) -> list[Section]:
        return self._result().sections

    @property
    def tail(self) -> str:
        return self._result().tail


# What a section's queries may raise on an odd warehouse: reported on the page, not fatal.
FAILURES = (duckdb.Error, ValueError, KeyError, OSError)


def _later(
    con: duckdb.DuckDBPyConnection,
    targets: Sequence[drilldown.Target],
    names: Sequence[str],
    *,
    source: str,
    effective_threshold: float | None,
    unstable_spread: float,
    seed: int,
) -> Later:
    sections: list[Section] = []
    try:
        drill = drilldown.collect(con, targets, source=source)
    except FAILURES as exc:  # the page keeps its charts: say what is missing
        drill = {}
        sections.append(("drilldown", "Drill-down", failed("the heatmaps' drill-down", exc)))
    panel, drill_script = drilldown.section_parts(drill)
    try:
        comparison, compare_script = compare_section.section(
            compare_section.collect(con, names, seed=seed)
        )
    except FAILURES as exc:
        comparison, compare_script = failed("the model comparisons", exc), ""
    if comparison:
        sections.append(("comparison", "Compare models", comparison))
    statistics = statistics_section.section(
        con, names, threshold=effective_threshold, spread=unstable_spread, seed=seed
    )
    if statistics:
        sections.append(("statistics", "Statistics", statistics))
    sections.append(("run-metadata", "Run metadata", run_metadata.section(con)))
    style = "".join(template(f"{name}.css") for name in STYLES)
    tail = "\n".join(
        part for part in (f"<style>{style}</style>", panel, drill_script, compare_script) if part
    )
    return Later(sections, tail)


def _in_background(con: duckdb.DuckDBPyConnection, **options: Any) -> Later:
    """:func:`_later` on ``con`` (a connection of this thread's own, closed here)."""
    try:
        return _later(con, **options)
    finally:
        con.close()


def drill_targets(
    probes: Sequence[ProbeData],
    own_figures: Mapping[str, ProbeCharts | None],
    variant_axes: Sequence[str],
) -> dict[str, list[drilldown.Target]]:
    """The heatmaps a click drills into, by the probe whose section shows them: the needle
    heatmaps of the probes drawn with the shared recall charts (labelled by the
    ``variant_axes`` that vary), and the heatmaps of the probes' own charts."""
    found: dict[str, list[drilldown.Target]] = {}
    for p in probes:
        own = own_figures.get(p.probe)
        if own is None and (p.probe == "recall" or p.needles.height):
            variants = charts.varying(p.stats, variant_axes)
            found[p.probe] = [drilldown.recall_target(p.probe, variants)]
        elif own is not None and own.drill:
            found[p.probe] = list(own.drill)
    return found


def collect(
    con: duckdb.DuckDBPyConnection,
    probes: Sequence[ProbeData],
    own_figures: Mapping[str, ProbeCharts | None],
    *,
    variant_axes: Sequence[str],
    source: str = "results",
    effective_threshold: float | None = DEFAULT_THRESHOLD,
    unstable_spread: float,
    seed: int = 0,
    root: Path | None = None,
) -> Extras:
    """Everything the page adds to report.py's charts and tables.

    ``own_figures``: each probe's own charts and their drill-down targets (None for the
    probes drawn with the shared recall charts, whose needle heatmaps the drill-down serves
    too); ``variant_axes``: the axes report.py labels the needle heatmaps' blocks with (when
    they vary). With ``root`` (the warehouse), the slow part runs in the background on a
    connection beside ``con`` (the same views: ``con`` stays open until the page has its
    sections) and reads the ``results`` view rather than ``source`` (a temporary table of
    ``con``).
    """
    names = [p.probe for p in probes]
    targets = drill_targets(probes, own_figures, variant_axes)
    hint = (
        "<p class='muted'>Click a cell of a heatmap below to see the answers behind it: "
        "the expected needles, the reply, its grade, each needle's outcome and the haystack "
        "around it.</p>"
    )
    probe_html = {
        p.probe: statistics_section.model_summary(con, p.probe, seed=seed)
        + (hint if p.probe in targets else "")
        + answers_side.answers_html(con, p.probe)
        for p in probes
    }
    options: dict[str, Any] = {
        "targets": [target for found in targets.values() for target in found],
        "names": names,
        "effective_threshold": effective_threshold,
        "unstable_spread": unstable_spread,
        "seed": seed,
    }
    if root is None or not names:
        return Extras(probe_html, _later(con, source=source, **options))
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-extras")
    try:
        job = worker.submit(_in_background, views.beside(con), source="results", **options)
    finally:
        worker.shutdown(wait=False)  # the thread ends with its one job
    return Extras(probe_html, job)
