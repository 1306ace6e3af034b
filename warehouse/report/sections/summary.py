"""The report's first section, "Summary": how did each model do. One row per model × probe
(warehouse.stats.overview, every epoch pooled as in the probe sections): the headline figure
with its 95% interval, the answers behind it, the effective length, and the flags (invalid
answers, failed requests, unstable cell configs, drift of the latest epoch), each linking to
the section that shows it.

Other sections' flags join through :data:`FLAG_SOURCES`: a function of the report's connection
returning, per (model, probe), flags as (text, anchor); failed gates are one (gate_flags.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import duckdb

from needlescope.warehouse.report.html import anchor, esc, number
from needlescope.warehouse.report.sections.gate_flags import gate_flags
from needlescope.warehouse.report.sections.statistics import latest_epoch, result_probes
from needlescope.warehouse.stats.overview import Overview, overview, thresholds_kept
from needlescope.warehouse.store import Warehouse

Flag = tuple[str, str]  # the flag's text, the id of the element it links to
Flags = Mapping[tuple[str, str], Sequence[Flag]]  # by (model, probe)
FLAG_SOURCES: list[Callable[[duckdb.DuckDBPyConnection], Flags]] = [gate_flags]


def collect(
    root: Path,
    *,
    threshold: float | None,
    spread: float,
    seed: int = 0,
    con: duckdb.DuckDBPyConnection | None = None,
) -> tuple[list[Overview], dict[tuple[str, str], list[Flag]]]:
    """The rows and the other sections' flags, on a connection of their own (the report runs
    this beside its charts, on ``con``: a connection to its views, closed here)."""
    con = con if con is not None else Warehouse(root).connect()
    try:
        probes = result_probes(con)
        latest = {p: latest_epoch(con, p) for p in probes}
        rows = overview(con, drift_epochs=latest, threshold=threshold, spread=spread, seed=seed)
        extra: dict[tuple[str, str], list[Flag]] = {}
        for source in FLAG_SOURCES:
            for key, flags in source(con).items():
                extra.setdefault(key, []).extend(flags)
        return rows, extra
    finally:
        con.close()


def _link(text: str, target: str) -> str:
    return f"<a href='#{esc(target)}'>{esc(text)}</a>"


def _flags(row: Overview, extra: Sequence[Flag]) -> list[str]:
    probe = anchor("probe", row.probe)
    found: list[Flag] = []
    if row.invalid:
        found.append((f"{row.invalid:,} invalid answers", probe))
    if row.failed:
        found.append((f"{row.failed:,} failed requests", probe))
    if row.unstable:
        found.append((f"{row.unstable:,} unstable configs", f"unstable-{anchor(row.probe)}"))
    if row.drift:
        diff = f" ({row.drift_diff:+.1f})" if row.drift_diff is not None else ""
        found.append((f"drift{diff}", f"drift-{anchor(row.probe)}"))
    found += extra
    return [_link(text, target) for text, target in found]


def _headline(row: Overview) -> str:
    if row.mean_accuracy is None:
        return "<span class='muted'>no graded answer</span>"
    figure = f"<b>{row.mean_accuracy:.1f}%</b>"
    if row.accuracy_lo is not None and row.accuracy_hi is not None:
        figure += f" <span class='muted'>({row.accuracy_lo:.1f}–{row.accuracy_hi:.1f})</span>"
    return figure


def _effective(row: Overview) -> str:
    if row.longest_tested is None:
        return ""
    unit = f" {row.length_unit}" if row.length_unit else ""
    if row.effective_length is None:
        return f"none <span class='muted'>(of up to {number(row.longest_tested)}{esc(unit)})</span>"
    return f"{number(row.effective_length)}{esc(unit)}"


def section(
    rows: Sequence[Overview], extra: Flags | None = None, *, threshold: float | None = None
) -> str:
    """``threshold``: unused (each row carries the one its effective length kept)."""
    extra = extra or {}
    kept = thresholds_kept(rows)
    headers = [
        "model",
        "probe",
        "accuracy % (95% interval)",
        "answers",
        "parse failures",
        f"effective length (≥ {kept})" if ";" not in kept else "effective length",
        "flags",
    ]
    body = []
    for r in rows:
        flags = _flags(r, extra.get((r.model, r.probe), ()))
        cells = [
            f"<td class='t'>{esc(r.model)}</td>",
            f"<td class='t'>{_link(r.probe, anchor('probe', r.probe))}</td>",
            f"<td>{_headline(r)}</td>",
            f"<td>{number(r.answers)}</td>",
            f"<td>{number(r.parse_failures)}</td>",
            f"<td>{_effective(r)}</td>",
            f"<td class='t'>{' · '.join(flags)}</td>",
        ]
        body.append(f"<tr class='{'flagged' if flags else ''}'>{''.join(cells)}</tr>")
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return "\n".join(
        [
            "<section id='summary'><h2>Summary</h2>",
            "<p class='muted'>One row per model and probe, every epoch pooled: mean accuracy "
            "over the valid graded answers with its bootstrap 95% interval; answers: the valid "
            "answers behind it (parse failures among them; invalid answers — truncated, "
            "refused, … — and failed requests counted apart); effective length: the longest "
            f"length whose mean accuracy is at least {kept} there and at every shorter "
            "length; drift: the latest epoch against the previous one. Each probe and flag "
            "links to its section.</p>",
            f"<div class='scroll'><table id='summary-table'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>",
            "</section>",
        ]
    )
